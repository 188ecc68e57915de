#!/usr/bin/python3
"""How far each converter option moves the numbers from the fp32 agent's, on the tiny checkpoints.

    /usr/bin/python3 tools/converter_parity.py [--vh-run build/tools/vh-run]
        [--plugin-path build/backends/cpu_generic] [--backend cpu_generic] [orion] [minddrive]

For each family: makes the tiny checkpoint of the decision-half fixtures (tests/orion/make_tiny_orion.py,
tests/minddrive/make_tiny_minddrive.py, with the seed tests/fixtures/*/cases.json records), converts
it with every option combination the converter accepts, runs each of the fixtures' 26 cases through
vh-run on the backend (cpu_generic computes in fp32) with the case's vision tokens, command and
noise, and prints a Markdown table of the largest error against the fixtures' float64 reference
(transformers + peft, the original planners) over the cases. An error is max |x - reference| over
a vector divided by the vector's largest |reference| (as the fixture tests measure it).

Needs torch for the converters (Debian's python3); the rest is the standard library.
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

FAMILIES = {
    "orion": {
        "maker": "tests/orion/make_tiny_orion.py", "converter": "tools/orion/convert_orion.py",
        "fixtures": "tests/fixtures/orion", "checkpoint": "Orion.pth", "llm_dir": "pretrain_qformer",
        "config_flag": "--agent-config", "config": "orion_stage3_agent.py",
        "options": [("fp32", "keep"), ("fp32", "merge"), ("bf16", "keep"), ("bf16", "merge")],
    },
    "minddrive": {
        "maker": "tests/minddrive/make_tiny_minddrive.py",
        "converter": "tools/minddrive/convert_minddrive.py",
        "fixtures": "tests/fixtures/minddrive", "checkpoint": "minddrive_rltrain.pth",
        "llm_dir": "llava-qwen2-0.5b", "config_flag": "--infer-config",
        "config": "minddrive_qwen2_05B_infer.py",
        "options": [("fp32", "keep"), ("bf16", "keep"), ("fp16", "keep")],   # merge is refused
    },
}


def rel_error(got, want):
    scale = max([abs(w) for w in want] + [1e-12])
    if len(got) != len(want):
        return float("inf")
    return max(abs(g - w) for g, w in zip(got, want)) / scale


def cumulative_modes(preds, modes, steps):
    """The reference's every-mode trajectories: its per-step offsets summed."""
    out = []
    for m in range(modes):
        x = y = 0.0
        for t in range(steps):
            x += preds[(m * steps + t) * 2]
            y += preds[(m * steps + t) * 2 + 1]
            out += [x, y]
    return out


def run_case(args, model, fixtures, case, noise, tmp):
    path = os.path.join(tmp, "noise.f32")
    with open(path, "wb") as f:
        f.write(struct.pack("<%df" % len(noise), *noise))
    cmd = [args.vh_run, "--model", model, "--backend", args.backend, "--json",
           "--vision-tokens", os.path.join(fixtures, "tokens_%d.f32" % case["token_set"]),
           "--command", str(case["command"]), "--noise", path]
    if args.plugin_path:
        cmd += ["--plugin-path", args.plugin_path]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("vh-run failed on %s (%s):\n%s" % (case["name"], " ".join(cmd), p.stderr))
    return json.loads(p.stdout.splitlines()[0])


def measure_orion(args, model, fixtures, cases, tmp):
    worst = {"trajectories": 0.0, "mu, log_sigma": 0.0}
    for c in cases:
        a = run_case(args, model, fixtures, c, c["eps"], tmp)
        x = a["extras"]
        worst["trajectories"] = max(worst["trajectories"], rel_error(a["trajectory"], c["trajectory"]),
                                    rel_error(x["mode_trajectories"], cumulative_modes(c["preds"], 6, 6)))
        worst["mu, log_sigma"] = max(worst["mu, log_sigma"], rel_error(x["mu"], c["mu"]),
                                     rel_error(x["log_sigma"], c["log_sigma"]))
    return worst


def measure_minddrive(args, model, fixtures, cases, tmp):
    worst = {"decisions equal": 0, "speed log-probs": 0.0, "trajectories": 0.0, "mu, log_sigma": 0.0}
    for c in cases:
        a = run_case(args, model, fixtures, c, c["eps_speed"] + c["eps_path"], tmp)
        x = a["extras"]
        sp, pa = c["speed"], c["path"]
        worst["decisions equal"] += a["speed_decision"] == c["decision"]
        worst["speed log-probs"] = max(worst["speed log-probs"],
                                       rel_error(x["speed_log_probs"], c["speed_log_probs"]))
        worst["trajectories"] = max(
            worst["trajectories"], rel_error(a["trajectory"], pa["trajectory"]),
            rel_error(x["speed_trajectory"], sp["trajectory"]),
            rel_error(x["speed_modes"], cumulative_modes(sp["preds"], 7, 6)),
            rel_error(x["path_modes"], cumulative_modes(pa["preds"], 6, 20)))
        worst["mu, log_sigma"] = max(worst["mu, log_sigma"], rel_error(x["speed_mu"], sp["mu"]),
                                     rel_error(x["speed_log_sigma"], sp["log_sigma"]),
                                     rel_error(x["path_mu"], pa["mu"]),
                                     rel_error(x["path_log_sigma"], pa["log_sigma"]))
    worst["decisions equal"] = "%d / %d" % (worst["decisions equal"], len(cases))
    return worst


def family_table(args, name, tmp):
    fam = FAMILIES[name]
    fixtures = os.path.join(ROOT, fam["fixtures"])
    with open(os.path.join(fixtures, "cases.json")) as f:
        ref = json.load(f)
    cases = ref["cases"]
    src = os.path.join(tmp, name)
    subprocess.run([sys.executable, os.path.join(ROOT, fam["maker"]), "--out", src,
                    "--seed", str(ref["checkpoint_seed"])], check=True)
    rows = []
    for dtype, lora in fam["options"]:
        out = os.path.join(tmp, "%s-%s-%s" % (name, dtype, lora))
        cmd = [sys.executable, os.path.join(ROOT, fam["converter"]),
               "--checkpoint", os.path.join(src, fam["checkpoint"]),
               "--llm-dir", os.path.join(src, fam["llm_dir"]),
               fam["config_flag"], os.path.join(src, fam["config"]),
               "--out", out, "--dtype", dtype, "--lora", lora]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit("converter failed (%s):\n%s" % (" ".join(cmd), p.stderr))
        measure = measure_orion if name == "orion" else measure_minddrive
        rows.append(("--dtype %s --lora %s" % (dtype, lora), measure(args, out, fixtures, cases, tmp)))
    cols = list(rows[0][1])
    lines = ["%s (%d cases, backend %s):" % (name, len(cases), args.backend), "",
             "| converted with | " + " | ".join(cols) + " |",
             "|---|" + "---|" * len(cols)]
    for label, worst in rows:
        cells = [v if isinstance(v, str) else "%.2g" % v for v in (worst[c] for c in cols)]
        lines.append("| `%s` | %s |" % (label, " | ".join(cells)))
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("families", nargs="*", help="orion, minddrive (default both)")
    p.add_argument("--vh-run", default=os.path.join(ROOT, "build", "tools", "vh-run"))
    p.add_argument("--plugin-path", default=os.path.join(ROOT, "build", "backends", "cpu_generic"))
    p.add_argument("--backend", default="cpu_generic")
    args = p.parse_args()
    for name in args.families:
        if name not in FAMILIES:
            p.error("unknown family %r (choose from %s)" % (name, ", ".join(sorted(FAMILIES))))
    with tempfile.TemporaryDirectory(prefix="converter-parity-") as tmp:
        for name in args.families or list(FAMILIES):
            print(family_table(args, name, tmp))
            print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
