#!/usr/bin/env python3
"""Plot tools/pipeline-check.sh's results: actions/s and GPU memory against N, the LLM blocks on
the CPU stage, for the pipelined and the serial runs of the same split (and cuda alone).

usage: pipeline_plot.py RESULTS_DIR OUT.png   (RESULTS_DIR holds bench-*.json)
       pipeline_plot.py --summary BENCH.json  (one line about one run; no matplotlib needed)
       pipeline_plot.py --timeline TRACE.json OUT.png  (a Chrome trace of the stages as a timeline)"""
import glob
import json
import os
import re
import sys


def summary(path):
    with open(path) as f:
        j = json.load(f)
    stages = " | ".join("%s %u+%u busy %.1f ms handoff %.3f" % (s["backend"], s["first_block"], s["n_blocks"],
                                                               s["busy_ms_per_frame"], s.get("handoff_ms_per_frame", 0))
                        for s in j["stages"])
    return ("%.2f fps e2e p50 %.1f ms split %s [%s..%s] moves %s gpu %.2f GB overlap %.3f handoff %.3f ms | %s" %
            (j["frames_per_s"], j["end_to_end_ms"]["p50"], j["llm_split"], j["split_min"], j["split_max"],
             j["split_changes"], j["gpu_bytes"] / 1e9, j["overlap_efficiency"], j["handoff_ms_per_frame"], stages))


def load(results):
    runs = {}
    for path in glob.glob(os.path.join(results, "bench-*.json")):
        m = re.match(r"bench-(pipeline|serial)-(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            runs[(m.group(1), int(m.group(2)))] = json.load(f)
    return runs


def timeline(plt, trace_path, out):
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    spans = [e for e in events if e.get("ph") == "X"]
    frames = sorted({e["args"]["frame"] for e in spans})
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(12, 2.6))
    for e in spans:
        frame = e["args"]["frame"]
        ax.broken_barh([(e["ts"] / 1e3, e["dur"] / 1e3)], (e["tid"] - 0.4, 0.8),
                       facecolors=colours(frames.index(frame) % 10), edgecolor="black", linewidth=0.2)
    tids = sorted(names)
    ax.set_yticks(tids)
    ax.set_yticklabels([names[t] for t in tids])
    ax.invert_yaxis()
    ax.set_xlabel("ms (one colour per frame)")
    ax.set_title(os.path.basename(trace_path))
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    if sys.argv[1] == "--summary":
        print(summary(sys.argv[2]))
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if sys.argv[1] == "--timeline":
        timeline(plt, sys.argv[2], sys.argv[3])
        return

    results, out = sys.argv[1], sys.argv[2]
    runs = load(results)
    ns = sorted({n for _, n in runs})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode, style in (("pipeline", "o-"), ("serial", "s--")):
        xs = [n for n in ns if (mode, n) in runs]
        ax1.plot(xs, [runs[(mode, n)]["frames_per_s"] for n in xs], style, label=mode)
    cuda = os.path.join(results, "bench-cuda.json")
    if os.path.exists(cuda):
        with open(cuda) as f:
            ax1.axhline(json.load(f)["frames_per_s"], color="gray", lw=0.8, label="cuda alone")
    ax1.set_xscale("symlog", linthresh=1)
    ax1.set_yscale("log")
    ax1.set_xticks(ns)
    ax1.set_xticklabels([str(n) for n in ns])
    ax1.set_xlabel("LLM blocks on the CPU (cpu_amx), N")
    ax1.set_ylabel("actions/s")
    ax1.set_title("OpenVLA-7B shapes, H200 + 16-core Xeon")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend()
    xs = [n for n in ns if ("pipeline", n) in runs]
    ax2.plot(xs, [runs[("pipeline", n)]["gpu_bytes"] / 1e9 for n in xs], "o-", label="GPU stage (pipeline: 2 KV slots)")
    xs = [n for n in ns if ("serial", n) in runs]
    ax2.plot(xs, [runs[("serial", n)]["gpu_bytes"] / 1e9 for n in xs], "s--", label="GPU stage (serial: 1 KV slot)")
    ax2.set_xscale("symlog", linthresh=1)
    ax2.set_xticks(ns)
    ax2.set_xticklabels([str(n) for n in ns])
    ax2.set_xlabel("LLM blocks on the CPU (cpu_amx), N")
    ax2.set_ylabel("GPU memory held, GB")
    ax2.grid(True, alpha=0.3)
    ax2.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
