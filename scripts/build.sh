#!/bin/sh
# Configure (once) and build into ./build (with the static core too: scripts/check-consumers.sh links it).
set -eu
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || meson setup build --buildtype=release -Db_ndebug=false -Ddefault_library=both
ninja -C build
