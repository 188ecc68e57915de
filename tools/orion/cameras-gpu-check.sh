#!/bin/sh
# One call on the GPU machine for Orion's camera front end (issue 27): the cuda tests against the
# released code, then the ViT and the camera frame timed against a base build, alternated, and the
# PyTorch peers, all in the same call. Built here beforehand and packed (tools/device/pack.sh):
#   tools/device/pack.sh build-gpu build-gpu-min; tools/device/pack.sh BASE/build-gpu build-gpu-base-min
#   ../shared/tools/devlibs.sh .devlibs
#   released sources (for the peers) in .orion-src (mmcv/..., adzoo/...), optional
# device run: carry ["build-gpu-min", "build-gpu-base-min", ".devlibs", ".orion-src"],
#   command: sh tools/orion/cameras-gpu-check.sh
# Each step has its own time limit; $OUT/summary.txt gathers the figures as they come.
# Knobs: NEW, BASE (the two builds), MID (a third timed between them where that folder exists:
# default build-gpu-mid-min), STEPS (which steps, default all: tests eva frame graphs profile peers
# hybrid), TESTS (which tests), ROUNDS (the timed steps' rounds, default 2), DEADLINE (no step starts
# after it, seconds). A test that fails on NEW is run again with
# MID's plugin.
set -u
NEW=${NEW:-build-gpu-min} BASE=${BASE:-build-gpu-base-min} MID=${MID:-build-gpu-mid-min}
TIMED="$BASE"; [ -d "$MID" ] && TIMED="$TIMED $MID"; TIMED="$TIMED $NEW"
OUT=${OUT:-/tmp/vh-cameras}
STEPS=${STEPS:-tests eva frame graphs profile peers hybrid}
mkdir -p "$OUT" /tmp/vhlibs
S="$OUT/summary.txt"
cp .devlibs/*.so* /tmp/vhlibs/ 2>/dev/null
python3 -c "import lzma,glob,os; [open('/tmp/vhlibs/'+os.path.basename(f)[:-3],'wb').write(lzma.open(f).read()) for f in glob.glob('.devlibs/*.xz')]"
export LD_LIBRARY_PATH=/tmp/vhlibs:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export VH_TEST_DATA="$PWD/tests/fixtures" VH_SOURCE_ROOT="$PWD" CK_DEFAULT_TIMEOUT=600
START=$(date +%s) DEADLINE=${DEADLINE:-540} # seconds: no step starts after it (the call's limit)
has() {
  case " $STEPS " in *" $1 "*) ;; *) return 1 ;; esac
  [ $(($(date +%s) - START)) -lt "$DEADLINE" ] && return 0
  echo "skipped $1: past ${DEADLINE}s" >> "$S"; return 1
}
past() { [ $(($(date +%s) - START)) -ge "$DEADLINE" ]; }
note() { echo "$*" | tee -a "$S"; }
python3 tests/fixtures/derive_fixtures.py > "$OUT/derive.log" 2>&1 || note "derive_fixtures failed"
note "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)"
for b in $TIMED; do note "$b: $(cat "$b/REVISION" 2>/dev/null)"; done

# The tests: every kernel, EVA's layers, the PETR heads and the whole front end against the
# released code; gpu_orion_cameras also replays the heads' graphs against eager launches.
if has tests; then
  for t in ${TESTS:-cuda_kernels gpu_eva_fixtures gpu_petr_heads gpu_orion_cameras}; do
    VH_BACKEND_PATH="$PWD/$NEW/backends/cuda" timeout 300 "$NEW/tests/test_$t" > "$OUT/$t.log" 2>&1
    note "test $t rc=$? $(grep -E '^[0-9]+%: Checks' "$OUT/$t.log" | tail -n 1)"
    grep -E ':F:|:E:' "$OUT/$t.log" | head -n 5 | tee -a "$S"
    grep -E 'error [^ ]+ of the largest|FAIL|  time |all kernels passed' "$OUT/$t.log" | head -n 40 >> "$S"
    if [ "$t" != cuda_kernels ] && ! grep -qE '^100%: Checks' "$OUT/$t.log" && [ -d "$MID/backends/cuda" ]; then
      VH_BACKEND_PATH="$PWD/$MID/backends/cuda" timeout 300 "$NEW/tests/test_$t" > "$OUT/$t-mid.log" 2>&1
      note "test $t on $MID rc=$? $(grep -E '^[0-9]+%: Checks' "$OUT/$t-mid.log" | tail -n 1)"
      grep -E 'error [^ ]+ of the largest|FAIL' "$OUT/$t-mid.log" | head -n 20 >> "$S"
    fi
  done
fi

# A full-size synthetic Orion with the front end (14.5 GB of weights), for the timings.
M=/tmp/orion-front-synth
if has eva || has frame || has profile || has hybrid || has graphs; then
  [ -f $M/config.json ] || timeout 240 "$NEW/tools/vh-synth-checkpoint" --family orion --front-end --out $M \
      --tokenizer models/openvla-tiny/tokenizer.model --no-sync > "$OUT/synth.log" 2>&1
  note "synth rc=$? $(tail -n 1 "$OUT/synth.log")"
fi

# The ViT alone, the builds alternated twice.
if has eva; then
  for r in $(seq 1 ${ROUNDS:-2}); do
    for b in $TIMED; do
      past && break
      VH_BACKEND_PATH="$PWD/$b/backends/cuda" timeout 120 "$b/bench/bench_eva" --model $M --backend cuda \
          --images 6 --iters 20 > "$OUT/eva-$b-$r.txt" 2>&1
      note "bench_eva $b round $r rc=$?: $(grep -iE 'median|TFLOP' "$OUT/eva-$b-$r.txt" | tr '\n' ' ')"
    done
  done
fi

# A camera frame end to end, the builds alternated twice, each with a trace.
if has frame; then
  for r in $(seq 1 ${ROUNDS:-2}); do
    for b in $TIMED; do
      past && break
      VH_BACKEND_PATH="$PWD/$b/backends/cuda" timeout 150 "$b/tools/vh-bench" --model $M --backend cuda \
          --frames 8 --warmup 2 --trace "$OUT/trace-$b-$r.json" > "$OUT/frame-$b-$r.txt" 2>&1
      note "vh-bench $b round $r rc=$?"
      grep -E 'frames/s|end-to-end|vision|prefill|backend|resident' "$OUT/frame-$b-$r.txt" | head -n 12 >> "$S"
    done
  done
  python3 tools/trace_spans.py "$OUT/trace-$NEW-${ROUNDS:-2}.json" > "$OUT/spans-new.txt" 2>&1 && head -n 30 "$OUT/spans-new.txt" >> "$S"
  python3 tools/trace_spans.py "$OUT/trace-$BASE-${ROUNDS:-2}.json" > "$OUT/spans-base.txt" 2>&1
  VH_BACKEND_PATH="$PWD/$NEW/backends/cuda" timeout 150 "$NEW/tools/vh-bench" --model $M --backend cuda \
      --frames 10 --warmup 2 --mode pipeline > "$OUT/frame-pipeline.txt" 2>&1
  note "vh-bench pipeline rc=$?"; grep -E 'frames/s|end-to-end' "$OUT/frame-pipeline.txt" >> "$S"
fi

# The heads' runs without CUDA graphs (every kernel launched), the same frames, for the graphs' gain.
if has graphs; then
  VH_CUDA_GRAPHS=0 VH_BACKEND_PATH="$PWD/$NEW/backends/cuda" timeout 150 "$NEW/tools/vh-bench" --model $M \
      --backend cuda --frames 10 --warmup 2 > "$OUT/frame-nographs.txt" 2>&1
  note "vh-bench VH_CUDA_GRAPHS=0 rc=$?"; grep -E 'frames/s|end-to-end|vision' "$OUT/frame-nographs.txt" >> "$S"
fi

# Every GPU operation timed (no graphs), the table the profile logs at the executor's end.
if has profile; then
  VH_CUDA_PROFILE=1 VH_BACKEND_PATH="$PWD/$NEW/backends/cuda" timeout 150 "$NEW/tools/vh-bench" --model $M \
      --backend cuda --frames 4 --warmup 1 > "$OUT/profile.txt" 2>&1
  note "profile rc=$? (profile.txt)"
fi

# The PyTorch peers of the ViT and the heads (the released modules from .orion-src).
if has peers && [ -d .orion-src/mmcv ]; then
  timeout 200 python3 tools/orion/bench_eva_torch.py --orion-repo .orion-src --images 6 --iters 20 \
      --json "$OUT/peer-eva.json" > "$OUT/peer-eva.log" 2>&1
  note "peer eva rc=$?"; tail -n 6 "$OUT/peer-eva.log" >> "$S"
  timeout 200 python3 tools/orion/bench_heads_torch.py --orion-repo .orion-src --iters 20 --warmup 5 \
      --json "$OUT/peer-heads.json" > "$OUT/peer-heads.log" 2>&1
  note "peer heads rc=$?"; tail -n 8 "$OUT/peer-heads.log" >> "$S"
fi
if has peers; then # the decision half (LLM prefill + planner) in transformers: fp32 agent, bf16 eager / SDPA
  (cd tools && timeout 240 python3 bench_orion_transformers.py --iters 5 --json "$OUT/peer-llm.json") \
      > "$OUT/peer-llm.log" 2>&1
  note "peer llm rc=$?"; tail -n 8 "$OUT/peer-llm.log" >> "$S"
fi

# The hybrid split: the ViT and the heads on cuda, the LLM's last 16 blocks on cpu_amx, under a
# GPU memory budget that the whole model does not fit.
if has hybrid; then
  VH_BACKEND_PATH="$PWD/$NEW/backends/cuda:$PWD/$NEW/backends/cpu_amx" timeout 200 "$NEW/tools/vh-bench" \
      --model $M --backend cuda,cpu_amx --split 16 --frames 3 --warmup 1 --threads 16 \
      --gpu-mem-budget 12G > "$OUT/hybrid.txt" 2>&1
  note "hybrid rc=$?"; grep -E 'frames/s|end-to-end|busy|backend|memory|overlap' "$OUT/hybrid.txt" | head -n 12 >> "$S"
fi
note "done"
