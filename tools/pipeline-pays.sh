#!/bin/sh
# Issue 16 ("a pipeline that always pays") on the GPU machine: full-size synthetic OpenVLA-7B on
# cuda + cpu_amx with N = 2, 4, 8, 16 LLM blocks on the CPU (--split 32 - N), each in the serial,
# pipelined and packed (two-stage) modes, closed loop (vh-bench keeps the session's frames in
# flight submitted). Prints one line per run and a table at the end: actions/s, each stage's busy
# ms a frame, the CPU stage's passes a frame, the overlap (actions/s x the slower stage's busy
# time), and per N pipelined / serial, packed / serial and the CPU stage's ms pipelined / serial.
#
#   tools/pipeline-pays.sh [BUILD]    BUILD: a build folder with tools/vh-bench and
#                                     tools/vh-synth-checkpoint (default build-gpu)
# Environment: NS ("2 4 8 16"), MODES ("serial pipeline packed"), REPEATS (1: each mode once a
# split; more: the modes again, in alternating order, and the table's medians), THREADS (CPU stage threads;
# default the library's: all cores but one beside a GPU stage), FRAMES (timed frames, serial and
# pipelined: 12; packed: FRAMES + 16, since throughput counts to the last submission and 16 are
# in flight), SPIN=1 (also pipelined with VH_CUDA_SYNC=spin, the GPU thread's old wait),
# RESULTS (/tmp/vh-pipeline-pays: vh-bench's JSON and stderr per run).
# Runtime at today's speeds (a CPU block ~55 ms at 276 rows, ~5 ms at 1): about 6-7 minutes with
# the checkpoint already in /tmp/openvla-7b-synth (pipeline-check.sh's), about 1 more to make it.
set -u
BUILD=${1:-${BUILD:-build-gpu}}
RESULTS=${RESULTS:-/tmp/vh-pipeline-pays}
MODEL=/tmp/openvla-7b-synth
NS=${NS:-2 4 8 16}
MODES=${MODES:-serial pipeline packed}
FRAMES=${FRAMES:-12}
if [ ! -x "$BUILD/tools/vh-bench" ] || [ ! -x "$BUILD/tools/vh-synth-checkpoint" ]; then
  echo "no $BUILD/tools/vh-bench or vh-synth-checkpoint: build first (ninja -C $BUILD)"
  exit 2
fi
mkdir -p "$RESULTS" /tmp/vhlibs
python3 -c "import lzma,glob,os; [open('/tmp/vhlibs/'+os.path.basename(f)[:-3],'wb').write(lzma.open(f).read()) for f in glob.glob('.devlibs/*.xz')]"
cp .devlibs/*.so* /tmp/vhlibs/ 2>/dev/null
export LD_LIBRARY_PATH="/tmp/vhlibs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export VH_BACKEND_PATH="$PWD/$BUILD/backends/cuda:$PWD/$BUILD/backends/cpu_amx:$PWD/$BUILD/backends/cpu_generic"
export VH_CACHE_DIR=off
threads="" sync=""
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

# run NAME N MODE [vh-bench options]: $RESULTS/NAME.json, one line here
run() {
  name=$1 n=$2 mode=$3
  shift 3
  if [ "$mode" = packed ]; then
    # 16 in flight: a round of frames entering and leaving before the clock starts; the session's
    # own warm-up kept short (its default for packed is twice the frames in flight)
    set -- --mode packed --session-warmup 4 --warmup 16 --frames $((FRAMES + 16)) "$@"
  else
    set -- --mode "$mode" --warmup 2 --frames "$FRAMES" "$@"
  fi
  t0=$(date +%s)
  # shellcheck disable=SC2086
  env ${sync:+VH_CUDA_SYNC=$sync} "$BUILD/tools/vh-bench" --model "$MODEL" --backend cuda,cpu_amx \
    --split $((32 - n)) $threads --json "$@" \
    > "$RESULTS/$name.json" 2> "$RESULTS/$name.err"
  rc=$?
  python3 - "$RESULTS/$name.json" "$name" "$rc" "$(( $(date +%s) - t0 ))" <<'PY'
import json, sys
path, name, rc, secs = sys.argv[1:]
try:
    j = json.loads(open(path).read().strip().splitlines()[-1])
except Exception:
    print("%-22s rc=%s, no result (%s s)" % (name, rc, secs))
    sys.exit()
s = j["stages"]
print("%-22s rc=%s %6.3f actions/s  GPU %7.1f ms  CPU %7.1f ms a frame (%.2f passes)  overlap %.3f  %d failed  (%s s)"
      % (name, rc, j["frames_per_s"], s[0]["busy_ms_per_frame"], s[1]["busy_ms_per_frame"],
         s[1].get("passes_per_frame", 0), j["overlap_efficiency"], j["failures"], secs))
PY
  [ "$rc" -eq 0 ] || tail -n 2 "$RESULTS/$name.err"
}

REPEATS=${REPEATS:-1}
for n in $NS; do
  step "N = $n LLM blocks on the CPU"
  r=1
  while [ "$r" -le "$REPEATS" ]; do
    # repeats alternate the order of the modes, so a drift of the machine does not favour one
    order=$MODES
    [ $((r % 2)) -eq 0 ] && order=$(echo "$MODES" | tr ' ' '\n' | sed -n '1!G;h;$p' | tr '\n' ' ')
    for mode in $order; do run "$mode-$n-r$r" "$n" "$mode"; done
    r=$((r + 1))
  done
  if [ "${SPIN:-0}" = 1 ]; then sync=spin; run "pipeline_spin-$n-r1" "$n" pipeline; sync=""; fi
done

step "table"
python3 - "$RESULTS" "$NS" "$REPEATS" <<'PY'
import json, os, statistics, sys
results, ns, repeats = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
def load(name):
    try:
        return json.loads(open(os.path.join(results, name + ".json")).read().strip().splitlines()[-1])
    except Exception:
        return None
fps, gpu, cpu = (lambda j: j["frames_per_s"]), (lambda j: j["stages"][0]["busy_ms_per_frame"]), \
    (lambda j: j["stages"][1]["busy_ms_per_frame"])
med = lambda xs: statistics.median(xs) if xs else float("nan")
print("medians of %d repeat(s); actions/s min-max across them" % repeats)
print("%3s  %-14s %10s %15s %9s %9s %8s %8s" % ("N", "mode", "actions/s", "min-max", "GPU ms", "CPU ms", "CPU pas",
                                                "overlap"))
for n in ns:
    runs = {}
    for mode in ("serial", "pipeline", "packed", "pipeline_spin"):
        js = [j for j in (load("%s-%s-r%d" % (mode, n, r)) for r in range(1, repeats + 1)) if j]
        if not js:
            continue
        runs[mode] = js
        f = [fps(j) for j in js]
        print("%3s  %-14s %10.3f %7.3f-%-7.3f %9.1f %9.1f %8.2f %8.3f" % (
            n, mode, med(f), min(f), max(f), med([gpu(j) for j in js]), med([cpu(j) for j in js]),
            med([j["stages"][1].get("passes_per_frame", 0) for j in js]), med([j["overlap_efficiency"] for j in js])))
    ratio = lambda a, b, g: med([g(j) for j in runs[a]]) / med([g(j) for j in runs[b]]) \
        if a in runs and b in runs else float("nan")
    print("%3s  pipelined/serial %.2fx (goal >= 1), packed/serial %.2fx; CPU ms pipelined/serial %.2f (goal 1)"
          % (n, ratio("pipeline", "serial", fps), ratio("packed", "serial", fps), ratio("pipeline", "serial", cpu)))
print("goals: overlap >= 0.95 pipelined and packed; packed >= 4 actions/s at N = 16, >= 12 at N = 4")
PY
tar -C "$RESULTS" -czf /tmp/pipeline-pays-results.tgz . 2>/dev/null
step "done: $RESULTS (also /tmp/pipeline-pays-results.tgz)"
