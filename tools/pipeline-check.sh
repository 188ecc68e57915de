#!/bin/sh
# The two-stage plans on the GPU machine (cuda + cpu_amx), in one call or two (../shared/DEVICE.md):
#   tools/pipeline-check.sh tests   the cuda kernel / fixtures / budget tests, the pipeline fixtures test
#                                   (cuda,cpu_amx, every split) and vh-run
#   tools/pipeline-check.sh packed  cuda (issue 6's table in one call): serial; packed with 7 / 14 / 28
#                                   in flight and the KV-gathering peer (VH_CUDA_KV_GATHER=1) alike;
#                                   serial and packed at 10 / 30 / 60 Hz; two stages; transformers
#   tools/pipeline-check.sh packed-batch  cuda packed with 1, 2, 4 new frames a pass, the same with the
#                                   KV-gathering peer (VH_CUDA_KV_GATHER=1, ActionFlow's copies), serial
#   tools/pipeline-check.sh profile GPU time per operation (VH_CUDA_PROFILE=1) of cuda serial and packed
#                                   with 7 and 14 frames in flight (tables in $RESULTS/profile-*.err)
#   tools/pipeline-check.sh realtime  issue 8 on the 7B: first frames with the session's warm-up and
#                                   without, serial at 10 Hz and packed at 30 Hz, an instruction of
#                                   another length than the warm-up's; a deadline at 60 Hz; the
#                                   library's bytes on stderr; packed K=7 and serial throughput
#   tools/pipeline-check.sh affinity  cpu_amx and cpu_generic with --cpu-affinity 2-5: every thread's CPUs
#   tools/pipeline-check.sh repeat  N = 4 and 16, pipelined and serial, alternated twice (run-to-run spread)
#   tools/pipeline-check.sh traces  Chrome traces of N = 0 and 4, pipelined and serial (hand-over spans)
#   tools/pipeline-check.sh bench   full-size synthetic OpenVLA-7B: cuda alone; N = 0 1 2 4 8 16 LLM
#                                   blocks on the CPU, pipelined and serial; N = 0 with 3 and 4 frames
#                                   in flight; the 8 GB GPU budget (pipelined and serial); the
#                                   automatically chosen split; the scheduler moving a given split
#                                   inside a zone; a Chrome trace
# Built beforehand into $BUILD (default build-gpu) with the Debian libraries in .devlibs (xz where
# large). vh-bench's JSON per run goes to $RESULTS (bench-*.json), all of it packed into
# /tmp/pipeline-check-results.tgz; tools/pipeline_plot.py draws the plot from it.
set -u
BUILD=${BUILD:-build-gpu}
RESULTS=${RESULTS:-/tmp/vh-pipeline-check}
MODEL=/tmp/openvla-7b-synth
mkdir -p "$RESULTS" /tmp/vhlibs
python3 -c "import lzma,glob,os; [open('/tmp/vhlibs/'+os.path.basename(f)[:-3],'wb').write(lzma.open(f).read()) for f in glob.glob('.devlibs/*.xz')]"
cp .devlibs/*.so* /tmp/vhlibs/ 2>/dev/null
export LD_LIBRARY_PATH="/tmp/vhlibs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export VH_BACKEND_PATH="$PWD/$BUILD/backends/cuda:$PWD/$BUILD/backends/cpu_amx:$PWD/$BUILD/backends/cpu_generic"
export VH_TEST_DATA="$PWD/tests/fixtures" VH_SOURCE_ROOT="$PWD" CK_DEFAULT_TIMEOUT=900
export VH_CACHE_DIR="$RESULTS/cache"
step() { echo "== $* ($(date +%T))"; }

synth() {
  [ -f "$MODEL/config.json" ] && return
  step synth
  "$BUILD/tools/vh-synth-checkpoint" --out "$MODEL" --tokenizer models/openvla-tiny/tokenizer.model --no-sync \
    > "$RESULTS/synth.log" 2>&1 || { echo "synth failed"; tail -n 3 "$RESULTS/synth.log"; }
}

# bench NAME FRAMES [vh-bench options]: one JSON line to $RESULTS/bench-NAME.json, a summary here
bench() {
  name=$1 frames=$2
  shift 2
  "$BUILD/tools/vh-bench" --model "$MODEL" --frames "$frames" --warmup 2 --json "$@" > "$RESULTS/bench-$name.json" \
    2> "$RESULTS/bench-$name.err"
  echo "$name rc=$? $(python3 tools/pipeline_plot.py --summary "$RESULTS/bench-$name.json" 2>&1 | tail -n 1)"
  tail -n 2 "$RESULTS/bench-$name.err"
}

frames_for() {
  case $1 in
    0|1|2) echo 16 ;;
    4) echo 10 ;;
    8) echo 6 ;;
    *) echo 4 ;;
  esac
}

if [ "${1:-tests}" = tests ]; then
  step gpu; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; grep -m1 "model name" /proc/cpuinfo
  step "cuda kernels, fixtures, budget and packed-logits tests (and cpu_amx packed logits)"
  for t in cuda_kernels cuda_fixtures cuda_budget gpu_packed_logits amx_packed_logits; do
    "$BUILD/tests/test_$t" > "$RESULTS/$t.log" 2>&1; echo "$t rc=$?"; grep -E "^FAIL|:F:|:E:" "$RESULTS/$t.log" | head -n 5
  done
  step gpu-pipeline-test
  "$BUILD/tests/test_gpu_pipeline" > "$RESULTS/gpu-pipeline.log" 2>&1; echo "rc=$?"
  grep -E "Checks|:F:|:E:|chosen|trace:" "$RESULTS/gpu-pipeline.log" | head -n 12
  step vh-run
  for m in serial pipeline; do
    "$BUILD/tools/vh-run" --backend cuda,cpu_amx --split 1 --mode $m --json > "$RESULTS/vh-run-$m.jsonl" 2> "$RESULTS/vh-run-$m.err"
    echo "$m rc=$?"
  done
  sed 's/,"vision_ms".*//' "$RESULTS/vh-run-serial.jsonl" > "$RESULTS/a"
  sed 's/,"vision_ms".*//' "$RESULTS/vh-run-pipeline.jsonl" > "$RESULTS/b"
  if cmp -s "$RESULTS/a" "$RESULTS/b"; then echo "vh-run: pipeline = serial ($(wc -l < "$RESULTS/a") frames)"
  else echo "vh-run: pipeline DIFFERS from serial"; fi
elif [ "$1" = packed ]; then
  synth
  step "cuda, closed loop: serial; packed with 7 / 14 / 28 in flight (1 / 2 / 4 new frames a pass); the same with the KV-gathering peer"
  bench packed-serial 24 --backend cuda --mode serial
  for k in 7 14 28; do
    bench packed-k$k 120 --backend cuda --mode packed --frames-in-flight $k --warmup $((k + 2))
    VH_CUDA_KV_GATHER=1 bench packed-gather-k$k 120 --backend cuda --mode packed --frames-in-flight $k --warmup $((k + 2))
  done
  step "arrivals at 10 / 30 / 60 Hz: serial, packed (default: 7 in flight)"
  for hz in 10 30 60; do
    bench packed-serial-${hz}hz $((hz * 2)) --backend cuda --mode serial --rate $hz
    bench packed-packed-${hz}hz $((hz * 2)) --backend cuda --mode packed --rate $hz
  done
  step "packed with the head on the CPU (cuda,cpu_amx split 32)"
  bench packed-packed-2stage 40 --backend cuda,cpu_amx --split 32 --mode packed --warmup 8
  step "peer: transformers generate"
  PYTHONUNBUFFERED=1 timeout 150 python3 tools/bench_transformers.py --json "$RESULTS/peer.json" > "$RESULTS/peer.log" 2>&1
  echo "rc=$?"; tail -n 6 "$RESULTS/peer.log"
elif [ "$1" = packed-batch ]; then
  synth
  step "cuda packed: 7 / 14 / 28 frames in flight = 1 / 2 / 4 new frames a pass"
  for k in 7 14 28; do
    bench packed-k$k 60 --backend cuda --mode packed --frames-in-flight $k --warmup $((k + 2))
    VH_CUDA_KV_GATHER=1 bench packed-gather-k$k 60 --backend cuda --mode packed --frames-in-flight $k --warmup $((k + 2))
  done
  bench packed-serial 16 --backend cuda --mode serial
elif [ "$1" = profile ]; then
  synth
  step "GPU time per operation: cuda serial, packed with 7 and 14 in flight"
  VH_CUDA_PROFILE=1 bench profile-serial 8 --backend cuda --mode serial
  for k in 7 14; do
    VH_CUDA_PROFILE=1 bench profile-packed-k$k 30 --backend cuda --mode packed --frames-in-flight $k --warmup $((k + 2))
  done
  step "where a pass's time goes with graphs on: traced packed runs (tools/trace_spans.py)"
  for k in 7 28; do
    bench trace-packed-k$k 40 --backend cuda --mode packed --frames-in-flight $k --warmup $((k + 2)) \
      --trace "$RESULTS/trace-packed-k$k.json"
    python3 tools/trace_spans.py "$RESULTS/trace-packed-k$k.json" | head -n 8
  done
elif [ "$1" = repeat ]; then
  synth
  for round in 1 2; do
    for n in 4 16; do
      for m in pipeline serial; do
        bench repeat$round-$m-$n $(frames_for $n) --backend cuda,cpu_amx --split $((32 - n)) --mode $m
      done
    done
  done
elif [ "$1" = realtime ]; then
  synth
  # rt NAME [vh-run options]: per-frame JSON to rt-NAME.jsonl; first frames' latency vs the rest
  rt() {
    name=$1
    shift
    "$BUILD/tools/vh-run" --model "$MODEL" --image tests/fixtures/images/frames/frame_0.png --backend cuda --json \
      --verbose "$@" > "$RESULTS/rt-$name.jsonl" 2> "$RESULTS/rt-$name.err"
    echo "$name rc=$? $(grep -o 'warm-up frames ([0-9.]* ms)' "$RESULTS/rt-$name.err")"
    python3 - "$RESULTS/rt-$name.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ok = [r["latency_ms"] for r in rows if r.get("status") == "ok"]
rest = sorted(ok[5:]) or [0]
print("  frames %d, actions %d; first five end-to-end ms: %s; the rest p50 %.1f p95 %.1f max %.1f" % (
    len(rows), len(ok), " ".join("%.1f" % v for v in ok[:5]), rest[len(rest) // 2],
    rest[min(len(rest) - 1, int(len(rest) * 0.95))], rest[-1]))
PY
    grep -E "^  (frames|end_to_end|queue_wait|compute) " "$RESULTS/rt-$name.err"
  }
  long="move the blue cup to the left of the plate and then put the spoon inside it"
  step "serial, 10 Hz: the session's warm-up (default) vs none"
  rt serial-warm --mode serial --rate 10 --frames 30 --instruction "$long"
  rt serial-cold --mode serial --rate 10 --frames 30 --instruction "$long" --warmup 0
  step "packed, 30 Hz: warm-up vs none"
  rt packed-warm --mode packed --rate 30 --frames 90 --instruction "$long"
  rt packed-cold --mode packed --rate 30 --frames 90 --instruction "$long" --warmup 0
  step "serial at 60 Hz with a 50 ms deadline (the GPU does ~27 frames/s): frames expire, none late"
  rt deadline --mode serial --rate 60 --frames 120 --deadline-ms 50 --policy block --queue 16
  step "the library's own output: vh-run without --verbose, stderr holds only vh-run's statistics"
  "$BUILD/tools/vh-run" --model "$MODEL" --image tests/fixtures/images/frames/frame_0.png --backend cuda --json \
    --frames 3 > /dev/null 2> "$RESULTS/quiet.err"
  echo "stderr lines not from vh-run's statistics: $(grep -cvE '^(statistics:|  )' "$RESULTS/quiet.err")"
  step "throughput after the change (vh-bench, 120 timed frames)"
  bench rt-serial 120 --backend cuda --mode serial
  bench rt-packed7 120 --backend cuda --mode packed --frames-in-flight 7
elif [ "$1" = affinity ]; then
  # each thread of a running vh-run: its name and the CPUs it may use (pinned workers: one core)
  threads_of() { for t in /proc/$1/task/*; do echo "$(cat "$t/comm") $(grep Cpus_allowed_list "$t/status" | cut -f2)"; done | sort | uniq -c; }
  for backend in cpu_amx cpu_generic; do
    step "$backend, --cpu-affinity 2-5 (n_threads 0: the 4 CPUs), the bundled model at 5 Hz"
    "$BUILD/tools/vh-run" --backend $backend --cpu-affinity 2-5 --rate 5 --frames 20 > "$RESULTS/aff-$backend.out" 2>&1 &
    pid=$!
    sleep 3
    threads_of $pid
    wait $pid
    echo "rc=$? $(grep -c '^frame' "$RESULTS/aff-$backend.out") frames; $(grep -E '^  frames' "$RESULTS/aff-$backend.out")"
  done
elif [ "$1" = traces ]; then
  synth
  for n in 0 4; do
    for m in pipeline serial; do
      bench trace-$m-$n 4 --backend cuda,cpu_amx --split $((32 - n)) --mode $m --trace "$RESULTS/trace-$m-$n.json"
    done
  done
else
  synth
  step "cuda alone"; bench cuda 16 --backend cuda
  for n in 0 1 2 4 8 16; do
    step "N=$n"
    bench pipeline-$n $(frames_for $n) --backend cuda,cpu_amx --split $((32 - n)) --mode pipeline
    bench serial-$n $(frames_for $n) --backend cuda,cpu_amx --split $((32 - n)) --mode serial
  done
  step "N=4, the CPU stage on all 16 cores (default: 15 beside a GPU stage)"
  bench threads16-pipeline-4 $(frames_for 4) --backend cuda,cpu_amx --split 28 --mode pipeline --threads 16
  step "N=0, more frames in flight"
  for k in 3 4; do bench inflight$k-0 16 --backend cuda,cpu_amx --split 32 --mode pipeline --frames-in-flight $k; done
  step "8 GB budget"
  bench budget8-pipeline 4 --backend cuda,cpu_amx --gpu-mem-budget 8G --mode pipeline
  bench budget8-serial 4 --backend cuda,cpu_amx --gpu-mem-budget 8G --mode serial
  step "the scheduler: given split 28 with a zone of 4 (the cut may move to 24..32)"
  bench zone-28 12 --backend cuda,cpu_amx --split 28 --zone 4 --mode pipeline --trace "$RESULTS/trace-zone.json"
  step "chosen split"
  bench auto 10 --backend cuda,cpu_amx --mode pipeline
  cat "$RESULTS/cache/"*.tsv 2>/dev/null
  step trace
  bench trace-4 4 --backend cuda,cpu_amx --split 28 --mode pipeline --trace "$RESULTS/trace-n4.json"
  ls -la "$RESULTS"/trace-n4.json
fi
tar -C "$RESULTS" -czf /tmp/pipeline-check-results.tgz --exclude=cache . 2>/dev/null
