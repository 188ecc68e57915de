#!/bin/sh
# Set up, build, and run every test (unit and integration; GPU tests skip without a GPU).
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
meson test -C build --print-errorlogs --num-processes 2 "$@"
