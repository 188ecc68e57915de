#!/bin/sh
# Where a frame's GPU time goes, per kernel: Nsight Compute (ncu, from the CUDA toolkit) times every
# kernel launch of one frame of vh-bench (gpu__time_duration, kernels serialised), and the summary
# sums them per kernel name in launch order's phases. Usage on the GPU machine:
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
python3 - "$OUT/ncu.csv" <<'EOF'
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, rows = rows[0], rows[1:]
ki, ni, vi, ui = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value"), head.index("Metric Unit")
per = collections.OrderedDict()
total = 0.0
for r in rows:
    if r[ni] != "gpu__time_duration.sum": continue
    us = float(r[vi].replace(",", "")) / (1000.0 if r[ui] == "nsecond" else 1.0 if r[ui] == "usecond" else 0.001)
    name = r[ki].split("(")[0][:60]
    c, t = per.get(name, (0, 0.0))
    per[name] = (c + 1, t + us)
    total += us
print(f"{len(rows)} launches, {total/1000:.2f} ms of kernel time")
for name, (c, t) in sorted(per.items(), key=lambda kv: -kv[1][1])[:30]:
    print(f"{t/1000:8.3f} ms {c:6d} x {t/c:8.1f} us  {name}")
EOF
