#!/bin/sh
# Copy the part of a build the GPU machine runs into a small folder that can travel to it (the
# device tool carries at most 64 MiB; a whole build-gpu is several hundred). The layout is the
# build's, so the binaries' $ORIGIN/../lib run paths still hold.
#   tools/device/pack.sh BUILD DEST [EXTRA...]   e.g. tools/device/pack.sh build-gpu build-gpu-min
# Copies the library, every backend plugin, vh-run, vh-bench, vh-synth-checkpoint, bench/*
# programs and the tests the device scripts run (tests/test_cuda_* , test_gpu_*, test_amx_*),
# plus any EXTRA paths (relative to BUILD); what a build lacks is skipped.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 BUILD DEST [EXTRA...]" >&2; exit 2; }
build=$1 dest=$2; shift 2
rm -rf "$dest"; mkdir -p "$dest"
copy() { for f in "$@"; do [ -e "$build/$f" ] || continue; mkdir -p "$dest/$(dirname "$f")"; cp -L "$build/$f" "$dest/$f"; done; }
cd_build_glob() { (cd "$build" && for p in "$@"; do for f in $p; do [ -f "$f" ] && echo "$f"; done; done); }
copy $(cd_build_glob 'lib/libvlahybrid.so*' 'backends/*/vh_backend_*.so' 'tools/vh-run' 'tools/vh-bench' \
    'tools/vh-synth-checkpoint' 'bench/bench_*' 'tests/test_cuda_*' 'tests/test_gpu_*' 'tests/test_amx_*') "$@"
du -sh "$dest"
