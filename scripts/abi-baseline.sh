#!/bin/sh
# Refresh the committed ABI baseline (tests/abi/libvlahybrid.abi) from build/: do it when a
# release deliberately changes the ABI (and bump the soname for an incompatible change).
set -eu
cd "$(dirname "$0")/.."
abidw --headers-dir include/vlahybrid --drop-private-types --no-corpus-path --no-comp-dir-path --no-show-locs \
  --out-file tests/abi/libvlahybrid.abi build/lib/libvlahybrid.so
echo "wrote tests/abi/libvlahybrid.abi"
