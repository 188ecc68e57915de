#!/bin/sh
# Where a frame's GPU time goes, per kernel: Nsight Compute (ncu, from the CUDA toolkit) times every
# kernel launch of one frame of vh-bench (gpu__time_duration, kernels serialised), and
# tools/kernel_profile_summary.py gives each phase's kernel time and each kernel's share. Usage on the GPU machine:
#   sh tools/kernel-profile.sh MODEL [LAUNCHES]      (BUILD, OUT as in tools/gpu-check.sh)
set -u
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-/tmp/vh-gpu-check}
MODEL=${1:?model folder}
LAUNCHES=${2:-4000}
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
export LD_LIBRARY_PATH="$PWD/.devlibs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export VH_BACKEND_PATH="$PWD/$BUILD/backends/cuda"
mkdir -p "$OUT"
timeout ${PROFILE_TIMEOUT:-150} "$NCU" --metrics gpu__time_duration.sum --csv --launch-count "$LAUNCHES" \
  "$BUILD/tools/vh-bench" --model "$MODEL" --backend cuda --frames 1 --warmup 0 > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
echo "ncu rc=$? ($(wc -l < "$OUT/ncu.csv") lines)"; tail -n 3 "$OUT/ncu.err"
python3 tools/kernel_profile_summary.py "$OUT/ncu.csv"
