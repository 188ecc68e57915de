#!/bin/sh
# Configure (once) and build into ./build.
set -eu
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || meson setup build --buildtype=release -Db_ndebug=false
ninja -C build
