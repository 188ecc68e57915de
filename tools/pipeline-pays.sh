#!/bin/sh
# Issue 16 ("a pipeline that always pays") on the GPU machine: full-size synthetic OpenVLA-7B on
# cuda + cpu_amx with N = 2, 4, 8, 16 LLM blocks on the CPU (--split 32 - N). For each N one
# vh-bench sweep compares serial and pipelined as a pair: both sessions loaded once, ROUNDS rounds
# alternating which runs first, the ratio taken within each round and its median reported (this
# VM's memory bandwidth drifts by a third within a minute; at N >= 8 pipelining can gain only the
# GPU stage's share of a frame, 2.5-6%, so runs minutes apart cannot compare them). Then the packed
# mode over two stages once per N (PACKED=0 skips it). Prints each sweep's table and a summary.
#
#   tools/pipeline-pays.sh [BUILD]    BUILD: a build folder with tools/vh-bench and
#                                     tools/vh-synth-checkpoint (default build-gpu)
# Environment: NS ("16 8 4 2"), ROUNDS (4), FRAMES (timed frames a run: 8; packed: FRAMES + 16,
# since throughput counts to the last submission and 16 are in flight), THREADS (CPU stage threads;
# default the library's: all cores but one beside a GPU stage), PACKED (1), RESULTS
# (/tmp/vh-pipeline-pays: vh-bench's JSON and stderr per N).
set -u
BUILD=${1:-${BUILD:-build-gpu}}
RESULTS=${RESULTS:-/tmp/vh-pipeline-pays}
MODEL=/tmp/openvla-7b-synth
NS=${NS:-16 8 4 2}
ROUNDS=${ROUNDS:-4}
FRAMES=${FRAMES:-8}
if [ ! -x "$BUILD/tools/vh-bench" ] || [ ! -x "$BUILD/tools/vh-synth-checkpoint" ]; then
  echo "no $BUILD/tools/vh-bench or vh-synth-checkpoint: build first (ninja -C $BUILD)"
  exit 2
fi
mkdir -p "$RESULTS" /tmp/vhlibs
python3 -c "import lzma,glob,os; [open('/tmp/vhlibs/'+os.path.basename(f)[:-3],'wb').write(lzma.open(f).read()) for f in glob.glob('.devlibs/*.xz')]"
cp .devlibs/*.so* /tmp/vhlibs/ 2>/dev/null
export LD_LIBRARY_PATH="/tmp/vhlibs:$PWD/$BUILD/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export VH_BACKEND_PATH="$PWD/$BUILD/backends/cuda:$PWD/$BUILD/backends/cpu_amx:$PWD/$BUILD/backends/cpu_generic"
export VH_CACHE_DIR=off
threads=""
[ -n "${THREADS:-}" ] && threads="--threads $THREADS"
start=$(date +%s)
step() { echo "== $* (+$(( $(date +%s) - start )) s)"; }

step "machine"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null
grep -m1 "model name" /proc/cpuinfo; echo "$(nproc) CPUs; CPU stage threads: ${THREADS:-library default}"
git log --oneline -1 2>/dev/null | cut -c1-100

if [ ! -f "$MODEL/config.json" ]; then
  step "synthetic OpenVLA-7B checkpoint in $MODEL"
  "$BUILD/tools/vh-synth-checkpoint" --out "$MODEL" --tokenizer models/openvla-tiny/tokenizer.model --no-sync \
    > "$RESULTS/synth.log" 2>&1 || { echo "synth failed"; tail -n 3 "$RESULTS/synth.log"; exit 1; }
fi

for n in $NS; do
  step "N = $n LLM blocks on the CPU: serial and pipelined, $ROUNDS rounds"
  # shellcheck disable=SC2086
  "$BUILD/tools/vh-bench" --model "$MODEL" --backend cuda,cpu_amx --split $((32 - n)) $threads \
    --mode serial,pipeline --rounds "$ROUNDS" --warmup 2 --frames "$FRAMES" --json \
    > "$RESULTS/pays-$n.json" 2> "$RESULTS/pays-$n.err" || { echo "rc=$?"; tail -n 3 "$RESULTS/pays-$n.err"; }
  if [ "${PACKED:-1}" = 1 ]; then
    step "N = $n: packed over two stages"
    # 16 in flight: a round of frames entering and leaving before the clock starts
    # shellcheck disable=SC2086
    "$BUILD/tools/vh-bench" --model "$MODEL" --backend cuda,cpu_amx --split $((32 - n)) $threads --mode packed \
      --session-warmup 4 --warmup 16 --frames $((FRAMES + 16)) --json \
      > "$RESULTS/packed-$n.json" 2> "$RESULTS/packed-$n.err" || { echo "rc=$?"; tail -n 3 "$RESULTS/packed-$n.err"; }
  fi
done

step "table"
python3 - "$RESULTS" "$NS" <<'PY'
import json, os, statistics, sys
results, ns = sys.argv[1], sys.argv[2].split()
def lines(name):
    try:
        return [json.loads(l) for l in open(os.path.join(results, name)) if l.strip()]
    except Exception:
        return []
print("%3s %-9s %10s %17s %9s %9s %8s %7s %s" % ("N", "mode", "actions/s", "min-max", "GPU ms", "CPU ms", "overlap",
                                                "ratio", "per-round ratios"))
for n in ns:
    got = lines("pays-%s.json" % n)
    runs = [j for j in got if "sweep" not in j]
    for mode in ("serial", "pipeline"):
        mine = [j for j in runs if j["mode"] == mode]
        if not mine:
            continue
        f = [j["frames_per_s"] for j in mine]
        med = lambda g: statistics.median([g(j) for j in mine])
        ratio, per_round = "", ""
        if mode == "pipeline":
            serial = {j["round"]: j["frames_per_s"] for j in runs if j["mode"] == "serial"}
            rr = [j["frames_per_s"] / serial[j["round"]] for j in mine if j["round"] in serial]
            ratio = "%.3f" % statistics.median(rr) if rr else ""
            per_round = " ".join("%.3f" % r for r in rr)
        print("%3s %-9s %10.3f %8.3f-%-8.3f %9.1f %9.1f %8.3f %7s %s" % (
            n, mode, statistics.median(f), min(f), max(f), med(lambda j: j["stages"][0]["busy_ms_per_frame"]),
            med(lambda j: j["stages"][1]["busy_ms_per_frame"]), med(lambda j: j["overlap_efficiency"]), ratio,
            per_round))
    for j in lines("packed-%s.json" % n)[-1:]:
        s = j["stages"]
        print("%3s %-9s %10.3f %17s %9.1f %9.1f %8.3f   (CPU passes a frame %.2f)" % (
            n, "packed", j["frames_per_s"], "", s[0]["busy_ms_per_frame"], s[1]["busy_ms_per_frame"],
            j["overlap_efficiency"], s[1]["passes_per_frame"]))
print("ratio: pipelined / serial actions/s, the median of the ratios within a round (goal >= 1)")
print("goals: overlap >= 0.95 pipelined and packed; packed >= 4 actions/s at N = 16, >= 12 at N = 4")
PY
tar -C "$RESULTS" -czf /tmp/pipeline-pays-results.tgz . 2>/dev/null
step "done: $RESULTS (also /tmp/pipeline-pays-results.tgz)"
