#!/bin/sh
# Build the libFuzzer targets (clang, ASan + UBSan, every UB fatal) into $BUILD and run each for
# $RUNS executions (default 10 million), one after another; long runs belong in the background:
#   scripts/fuzz.sh                       all targets
#   RUNS=100000 TARGETS=config scripts/fuzz.sh
# Inputs that crash a target are written to fuzz/regressions/<target>/ (commit them: the normal
# test suite replays that directory); the growing working corpus stays in $WORK. Prints each
# target's executions, time and outcome; the logs are in $WORK/<target>.log.
set -eu
cd "$(dirname "$0")/.."
RUNS=${RUNS:-10000000}
BUILD=${BUILD:-build-fuzz}
WORK=${WORK:-$PWD/build-fuzz-work}
TARGETS=${TARGETS:-safetensors checkpoint_index config tokenizer tokenizer_json image orion minddrive openpi_message npy frame_file}
# the checkpoint_index target writes its input to a folder each run: in memory that is 8x faster
[ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && export TMPDIR=/dev/shm
if [ ! -d "$BUILD" ]; then
  CC=clang meson setup "$BUILD" -Dfuzzing=enabled -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args=-fno-sanitize-recover=all -Dcuda=disabled -Dcpu_amx=disabled -Dcpu_generic=disabled -Dtests=disabled \
    -Dexamples=disabled --buildtype=debugoptimized >/dev/null
fi
ninja -C "$BUILD" >/dev/null
for t in $TARGETS; do
  mkdir -p "$WORK/$t" "fuzz/regressions/$t"
  seeds=""
  for d in "fuzz/corpus/$t" "fuzz/regressions/$t"; do [ -d "$d" ] && [ -n "$(ls "$d")" ] && seeds="$seeds $d"; done
  [ "$t" = image ] && seeds="$seeds tests/fixtures/images/decode"
  start=$(date +%s)
  # shellcheck disable=SC2086
  if ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
     "$BUILD/fuzz/fuzz_$t" -runs="$RUNS" -max_len=16384 -rss_limit_mb=4096 -print_final_stats=1 \
     -artifact_prefix="fuzz/regressions/$t/" "$WORK/$t" $seeds > "$WORK/$t.log" 2>&1; then
    outcome=clean
  else
    outcome="FAILED (see $WORK/$t.log; the input is in fuzz/regressions/$t/)"
  fi
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$WORK/$t.log" | tail -n 1)
  echo "$t: ${execs:-?} executions in $(( $(date +%s) - start )) s, $outcome"
done
