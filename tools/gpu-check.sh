#!/bin/sh
# One call on the GPU machine (see ../shared/DEVICE.md): the cuda kernel tests, the OpenVLA fixtures
# on the cuda backend, vh-run, a full-size synthetic OpenVLA-7B benchmark, and the transformers peer
# with the floors. Built beforehand elsewhere into $BUILD (default build-gpu), with the Debian
# runtime libraries the build needs in .devlibs. Logs and JSON go to $OUT.
set -u
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-/tmp/vh-gpu-check}
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/.devlibs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export VH_BACKEND_PATH="$PWD/$BUILD/backends/cuda"
export VH_TEST_DATA="$PWD/tests/fixtures" VH_SOURCE_ROOT="$PWD" CK_DEFAULT_TIMEOUT=600
step() { echo "== $*"; }

step gpu; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader
step kernels; "$BUILD/tests/test_cuda_kernels" > "$OUT/kernels.log" 2>&1; echo "rc=$?"; tail -n 40 "$OUT/kernels.log"
step fixtures; "$BUILD/tests/test_cuda_fixtures" > "$OUT/fixtures.log" 2>&1; echo "rc=$?"; grep -E "runs|Checks|:F:|:E:" "$OUT/fixtures.log" | head -n 20
step budget; "$BUILD/tests/test_cuda_budget" > "$OUT/budget.log" 2>&1; echo "rc=$?"; grep -E "Checks|:F:|:E:" "$OUT/budget.log"
step vh-run; "$BUILD/tools/vh-run" --backend cuda --json > "$OUT/vh-run.jsonl" 2> "$OUT/vh-run.err"; echo "rc=$?"
head -c 600 "$OUT/vh-run.jsonl"; tail -n 5 "$OUT/vh-run.err"
[ "${SKIP_BENCH:-0}" = 1 ] && exit 0
step synth; "$BUILD/tools/vh-synth-checkpoint" --out /tmp/openvla-7b-synth --tokenizer models/openvla-tiny/tokenizer.model --no-sync > "$OUT/synth.log" 2>&1; echo "rc=$?"; tail -n 3 "$OUT/synth.log"
step bench; "$BUILD/tools/vh-bench" --model /tmp/openvla-7b-synth --backend cuda --frames ${FRAMES:-30} --warmup 3 > "$OUT/bench.txt" 2>&1; echo "rc=$?"; cat "$OUT/bench.txt"
step bench-decode-on-cublaslt; VH_CUDA_GEMV=0 "$BUILD/tools/vh-bench" --model /tmp/openvla-7b-synth --backend cuda --frames 10 --warmup 2 > "$OUT/bench-cublaslt.txt" 2>&1; echo "rc=$?"; cat "$OUT/bench-cublaslt.txt"
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -n 1)
if [ -n "$NSYS" ] && [ "${PROFILE:-1}" = 1 ]; then
  step profile "$NSYS"
  "$NSYS" profile -o "$OUT/prof" --force-overwrite true "$BUILD/tools/vh-bench" --model /tmp/openvla-7b-synth --backend cuda --frames 5 --warmup 1 > "$OUT/prof.log" 2>&1; echo "rc=$?"
  "$NSYS" stats --report cuda_gpu_kern_sum --format csv "$OUT/prof.nsys-rep" > "$OUT/kernels-profile.csv" 2>/dev/null; head -n 30 "$OUT/kernels-profile.csv" | cut -c1-220
fi
step peer; PYTHONUNBUFFERED=1 python3 tools/bench_transformers.py --json "$OUT/peer.json" > "$OUT/peer.log" 2>&1; echo "rc=$?"; tail -n 8 "$OUT/peer.log"
