#!/bin/sh
# The test suite under sanitizers, as CI runs it (no GPU: the cuda and cpu_amx plugins are left
# out, their tests need their hardware anyway):
#   build-asan: every test under AddressSanitizer + LeakSanitizer + UndefinedBehaviorSanitizer,
#               every report fatal (but the Python-only converter tests; the pipeline test on one
#               fixture stream, the soaks on 300 frames);
#   build-tsan-ci: the tests with threads (session, pipeline, packed, queue, thread pool, shutdown) under
#               ThreadSanitizer (the pipeline test's racing runs on its first fixture stream's first
#               16 frames; api_misuse's threaded case).
#   scripts/check-sanitizers.sh [asan|tsan]   (default: both)
set -eu
cd "$(dirname "$0")/.."
common="-Dcuda=disabled -Dcpu_amx=disabled -Dexamples=disabled -Dbench=disabled -Db_lundef=false --buildtype=debugoptimized"
what=${1:-all}
if [ "$what" = all ] || [ "$what" = asan ]; then
  # shellcheck disable=SC2086
  [ -d build-asan ] || meson setup build-asan $common -Db_sanitize=address,undefined \
    -Dc_args=-fno-sanitize-recover=all >/dev/null
  ninja -C build-asan >/dev/null
  # Lighter than the native run where a test repeats itself: the pipeline test on its first fixture
  # stream's first 16 frames (every split and mode all the same), orion_cameras's modes against serial packed
  # alone (VH_TEST_STREAMS), the PETR heads' real geometry on its first frame (VH_TEST_REAL_FRAMES), the
  # soaks on 300 frames, not 1500; the converters'
  # tests are Python alone (no library code to instrument) and are left to the native run.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  VH_TEST_STREAMS=1 VH_TEST_FRAMES=16 VH_SOAK_FRAMES=300 VH_TEST_REAL_FRAMES=1 \
    meson test -C build-asan --no-rebuild --print-errorlogs --num-processes 2 --timeout-multiplier 3 \
      --no-suite converter
fi
if [ "$what" = all ] || [ "$what" = tsan ]; then
  # shellcheck disable=SC2086
  [ -d build-tsan-ci ] || meson setup build-tsan-ci $common -Db_sanitize=thread >/dev/null
  ninja -C build-tsan-ci >/dev/null
  # The pipeline test's racing runs only (VH_TEST_THREADS_ONLY: interior splits, two-stage and
  # many-in-flight packed runs) on one stream's first 16 frames; api_misuse's threaded case (queue:
  # policies, submit/poll from two threads, two producers, sessions in parallel threads) alone.
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 VH_TEST_STREAMS=1 VH_TEST_FRAMES=16 VH_TEST_THREADS_ONLY=1
  meson test -C build-tsan-ci --no-rebuild --print-errorlogs --num-processes 2 --timeout-multiplier 4 \
      pipeline packed_logits frame_queue thread_pool split_scheduler vh_run_pipeline realtime vh_run_rate \
      good_neighbour shutdown vh_serve_openpi
  CK_RUN_CASE=queue meson test -C build-tsan-ci --no-rebuild --print-errorlogs --timeout-multiplier 4 api_misuse
fi
