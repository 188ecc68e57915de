#!/bin/sh
# Set up, build, and run the bundled tiny OpenVLA model on the bundled camera frames.
# Extra arguments go to vh-run (e.g. --json, or --model DIR --image FILE --instruction TEXT).
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
exec meson devenv -C build ./tools/vh-run "$@"
