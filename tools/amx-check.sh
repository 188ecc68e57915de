#!/bin/sh
# Issue 16's one call on the GPU machine (H200 + 16-core Xeon with AMX), everything with its peer:
# the own bf16 GEMM's tests on real AMX; bench_bf16_gemm (DRAM read bandwidth, the GEMM at 1, 8 and
# 276 rows, one block's four GEMMs against oneDNN); PyTorch's CPU Llama block and timm's towers
# (tools/bench_torch_cpu.py); whole Llama-2-7B blocks through cpu_amx (vh-bench on 2- and 6-layer
# synthetic checkpoints, the own GEMM and VH_CPU_AMX_GEMM=onednn, VH_CPU_PROFILE=1) and the vision
# towers (full-size towers, 2 LLM layers); tools/pipeline-pays.sh (cuda + cpu_amx, N = 2, 4, 8, 16
# CPU blocks, serial / pipelined / packed); N = 16 pipelined and serial again, pipelined first.
# Built elsewhere into build-gpu (lib/, backends/{cuda,cpu_amx}/, bench/, tools/, tests/), with .devlibs
# holding the Debian libraries (../shared/tools/devlibs.sh). Run from the source root:
#   OUT=/tmp/out sh tools/amx-check.sh
set -u
OUT=${OUT:-/tmp/vh-amx-check}
B=build-gpu; mkdir -p /tmp/vhlibs $OUT
python3 -c "import lzma,glob,os; [open('/tmp/vhlibs/'+os.path.basename(f)[:-3],'wb').write(lzma.open(f).read()) for f in glob.glob('.devlibs/*.xz')]"
cp .devlibs/*.so.* /tmp/vhlibs/ 2>/dev/null
export LD_LIBRARY_PATH=/tmp/vhlibs:$PWD/$B/lib:/usr/local/cuda/lib64 VH_TEST_DATA=$PWD/tests/fixtures VH_SOURCE_ROOT=$PWD VH_BACKEND_PATH=$PWD/$B/backends/cpu_amx:$PWD/$B/backends/cuda CK_DEFAULT_TIMEOUT=900
export VH_CACHE_DIR=off
T0=$(date +%s); el() { echo "[+$(( $(date +%s) - T0 )) s]"; }
echo "== machine $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) $(nproc) CPUs; $(nvidia-smi --query-gpu=name --format=csv,noheader)"
( for n in 2 6; do $B/tools/vh-synth-checkpoint --out /tmp/synth-$n --tokenizer models/openvla-tiny/tokenizer.model --llm-layers $n --vision tiny --no-sync > /dev/null 2>&1 || echo "synth $n failed"; done
  $B/tools/vh-synth-checkpoint --out /tmp/synth-2v --tokenizer models/openvla-tiny/tokenizer.model --llm-layers 2 --no-sync > /dev/null 2>&1 || echo "synth 2v failed"
  $B/tools/vh-synth-checkpoint --out /tmp/openvla-7b-synth --tokenizer models/openvla-tiny/tokenizer.model --no-sync > /dev/null 2>&1 || echo "synth 7b failed" ) &
for t in test_bf16_gemm test_avx512_attention test_amx_fixtures; do timeout 100 $B/tests/$t > /tmp/$t.log 2>&1; echo "$t rc=$? $(grep Checks /tmp/$t.log | tail -1)"; done
echo "== bench_bf16_gemm $(el)"; timeout 100 $B/bench/bench_bf16_gemm --threads 16 --rows 1,8,276 > $OUT/bench_bf16_gemm.txt 2>&1; grep -A12 "^(c)" $OUT/bench_bf16_gemm.txt; grep -A8 "^summary" $OUT/bench_bf16_gemm.txt; grep -i "DRAM read" $OUT/bench_bf16_gemm.txt | head -2
echo "== torch $(el)"; timeout 150 python3 tools/bench_torch_cpu.py --threads 16 --json $OUT/torch.json > /tmp/torch.log 2>&1; cat $OUT/torch.json; echo
wait; echo "== synth done $(el)"
for g in own onednn; do for n in 2 6 2v; do
  if [ $g = onednn ]; then export VH_CPU_AMX_GEMM=onednn; else unset VH_CPU_AMX_GEMM; fi
  VH_CPU_PROFILE=1 timeout 90 $B/tools/vh-bench --model /tmp/synth-$n --backend cpu_amx --threads 16 --frames 4 --warmup 1 > /tmp/bench-$g-$n.txt 2>&1
  echo "$g $n: $(grep -E "^(vision|prefill|decode step) " /tmp/bench-$g-$n.txt | tr -s ' ' | tr '\n' ';')"
done; done
unset VH_CPU_AMX_GEMM
grep -A7 "profile" /tmp/bench-own-6.txt; cp /tmp/bench-own-6.txt /tmp/bench-onednn-6.txt /tmp/bench-own-2v.txt $OUT/
echo "== pipeline $(el)"
NS="2 4 8 16" RESULTS=/tmp/pays timeout 300 sh tools/pipeline-pays.sh $B 2>&1 | sed -n '/== table/,$p' | head -26
echo "== N = 16 again, pipelined first $(el)"
for m in pipeline serial; do timeout 60 $B/tools/vh-bench --model /tmp/openvla-7b-synth --backend cuda,cpu_amx --split 16 --mode $m --warmup 2 --frames 12 --json > /tmp/again-$m.json 2>/dev/null; python3 -c "import json; j=json.loads(open(\"/tmp/again-$m.json\").read().strip().splitlines()[-1]); s=j[\"stages\"]; print(\"$m\", round(j[\"frames_per_s\"],3), \"CPU ms\", round(s[1][\"busy_ms_per_frame\"],1), \"overlap\", round(j[\"overlap_efficiency\"],3))"; done
echo "== end $(el)"
