#!/bin/sh
# One call on the GPU machine's 16-core Xeon (AMX): cpu_amx's linear layers against plain oneDNN
# and the direct kernel (bench_amx), cpu_generic's block and the read-bandwidth floor
# (bench_kernels), whole Llama-2-7B blocks through the executors (vh-bench on 2- and 6-layer
# synthetic checkpoints: the difference over 4 layers is the block), PyTorch's CPU block
# (tools/bench_torch_cpu.py), and the cpu_amx fixture test on real AMX. Built elsewhere into
# $BUILD with .devlibs holding the Debian libraries (xz-compressed where large). Logs go to $OUT.
set -u
BUILD=${BUILD:-build-gpu}
OUT=${OUT:-/tmp/vh-xeon-check}
mkdir -p "$OUT" /tmp/vhlibs
python3 -c "import lzma,glob,os; [open('/tmp/vhlibs/'+os.path.basename(f)[:-3],'wb').write(lzma.open(f).read()) for f in glob.glob('.devlibs/*.xz')]"
cp .devlibs/*.so.* /tmp/vhlibs/ 2>/dev/null
export LD_LIBRARY_PATH="/tmp/vhlibs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export VH_BACKEND_PATH="$PWD/$BUILD/backends/cpu_amx:$PWD/$BUILD/backends/cpu_generic:$PWD/$BUILD/backends/cuda"
export VH_TEST_DATA="$PWD/tests/fixtures" VH_SOURCE_ROOT="$PWD" CK_DEFAULT_TIMEOUT=900
T=${THREADS:-16}
step() { echo "== $*"; }

step cpu; grep -m1 "model name" /proc/cpuinfo; nproc; grep -o -m1 "amx_bf16" /proc/cpuinfo
step amx-fixtures; "$BUILD/tests/test_amx_fixtures" > "$OUT/amx-fixtures.log" 2>&1; echo "rc=$?"; grep -E "runs|Checks|:F:|:E:" "$OUT/amx-fixtures.log" | grep -v "not compared" | head
step bench-amx; "$BUILD/bench/bench_amx" --threads $T > "$OUT/bench-amx.txt" 2>&1; echo "rc=$?"; cat "$OUT/bench-amx.txt"
step bench-kernels; "$BUILD/bench/bench_kernels" --threads $T --section block > "$OUT/bench-block.txt" 2>&1; tail -n 6 "$OUT/bench-block.txt"
"$BUILD/bench/bench_kernels" --threads $T --section bandwidth 2>&1 | tail -n 2
step synth
for n in 2 6; do "$BUILD/tools/vh-synth-checkpoint" --out /tmp/synth-$n --tokenizer models/openvla-tiny/tokenizer.model --llm-layers $n --vision tiny --no-sync > /dev/null 2>&1 || echo "synth $n failed"; done
for be in cpu_amx cpu_generic; do
  for n in 2 6; do
    step "vh-bench $be $n layers"
    "$BUILD/tools/vh-bench" --model /tmp/synth-$n --backend $be --threads $T --frames ${FRAMES:-4} --warmup 1 --json > "$OUT/bench-$be-$n.json" 2>&1; echo "rc=$?"; cat "$OUT/bench-$be-$n.json"; echo
  done
done
# the vision towers: full-size towers minus tiny ones, same 2 LLM layers (vision_ms difference)
"$BUILD/tools/vh-synth-checkpoint" --out /tmp/synth-2v --tokenizer models/openvla-tiny/tokenizer.model --llm-layers 2 --no-sync > /dev/null 2>&1 || echo "synth 2v failed"
for be in cpu_amx cpu_generic; do
  step "vh-bench $be full vision"
  "$BUILD/tools/vh-bench" --model /tmp/synth-2v --backend $be --threads $T --frames ${FRAMES:-4} --warmup 1 --json > "$OUT/bench-$be-2v.json" 2>&1; echo "rc=$?"; cat "$OUT/bench-$be-2v.json"; echo
done
step torch; PYTHONUNBUFFERED=1 python3 tools/bench_torch_cpu.py --threads $T --json "$OUT/torch-cpu.json" 2>&1 | tail -n 3
