#!/bin/sh
# Set up, build, and run the bundled tiny OpenVLA model on the bundled camera frames.
# Installs and builds only what the demo runs (scripts/install-deps.sh demo; in ./build-demo: the
# library, the CPU plugins and the tools; no tests, no benchmarks, no CUDA plugin, no Python package,
# no vh-serve).
# Extra arguments go to vh-run (e.g. --json, or --model DIR --image FILE --instruction TEXT).
#   scripts/demo.sh --setup-only   install and configure, build and run nothing
#   VH_DEMO_BUILD=DIR              the build folder (default build-demo)
set -eu
cd "$(dirname "$0")/.."
build=${VH_DEMO_BUILD:-build-demo}
./scripts/install-deps.sh demo
[ -f "$build/build.ninja" ] || meson setup "$build" --buildtype=release -Db_ndebug=false \
    -Dtests=disabled -Dbench=disabled -Dcuda=disabled -Dpython=disabled -Dserve=disabled \
    -Dexamples=disabled >/dev/null
[ "${1:-}" = --setup-only ] && exit 0
ninja -C "$build"
exec meson devenv -C "$build" ./tools/vh-run "$@"
