#!/bin/sh
# The aarch64 cross build, as CI runs it (doc/aarch64.md): the core, cpu_generic (its NEON
# kernels), the tools, examples and tests, built with Debian's crossbuild-essential-arm64 against
# the :arm64 dev packages (cross/aarch64-linux-gnu.ini), then the test suite under qemu-user.
# Left out: cuda and cpu_amx (x86-64 only; meson's summary says so), the Python package and
# vh-serve (Debian's interpreter and the websocket stack are the build machine's, not arm64's).
#
#   scripts/check-aarch64.sh [meson test arguments...]
#
# Without the arm64 packages and no way to install them (no network, not root and no sudo) it
# says so and exits 0, unless VH_AARCH64_REQUIRED=1 (CI sets it: there the job must really run).
set -eu
cd "$(dirname "$0")/.."

packages="crossbuild-essential-arm64 qemu-user pkg-config libjansson-dev:arm64 libopenblas-dev:arm64 libhwloc-dev:arm64 libpng-dev:arm64 libjpeg-dev:arm64 check:arm64"

skip() {
    echo "check-aarch64: SKIPPED: $1" >&2
    if [ "${VH_AARCH64_REQUIRED:-0}" = 1 ]; then
        echo "check-aarch64: VH_AARCH64_REQUIRED=1: failing instead" >&2
        exit 1
    fi
    exit 0
}

missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    if [ "$(id -u)" -eq 0 ]; then as_root=""
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then as_root="sudo"
    else skip "missing:$missing (and not root, no sudo to install them)"; fi
    echo "check-aarch64: installing:$missing"
    # the :arm64 packages need the architecture enabled in dpkg
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        $as_root dpkg --add-architecture arm64
    fi
    # shellcheck disable=SC2086
    if ! { $as_root apt-get update -qq &&
           DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends $missing; }; then
        skip "could not install:$missing (no network or no Debian arm64 archive?)"
    fi
fi

# Configure once. cpu_amx stays 'auto' so the summary shows its "x86-64 only" line.
if [ ! -f build-aarch64/build.ninja ]; then
    meson setup build-aarch64 --cross-file cross/aarch64-linux-gnu.ini --buildtype=release -Db_ndebug=false \
        -Dcuda=disabled -Dpython=disabled -Dserve=disabled -Dcpu_generic=enabled -Dtests=enabled \
        -Dexamples=enabled -Dbench=disabled
fi
# Build what runs below (VH_AARCH64_TESTS=all or named tests: everything): the unit suite's and the
# named tests' programs and what they depend on, vh-run and the cpu_generic plugin.
if [ $# -gt 0 ] || [ "${VH_AARCH64_TESTS:-ci}" = all ]; then
    ninja -C build-aarch64
else
    # shellcheck disable=SC2046
    ninja -C build-aarch64 $(meson introspect build-aarch64 --tests --targets | /usr/bin/python3 -c '
import json, os, sys
info = json.load(sys.stdin)
by_id = {t["id"]: t for t in info["targets"]}
wanted = {"vh-run", "vh_backend_cpu_generic"}
files = set()
for test in info["tests"]:
    if any(s.split(":")[-1] == "unit" for s in test["suite"]) or test["name"] in ("vh_run_rate", "soak_drop", "soak_reject"):
        files.add(test["cmd"][0])
        for dep in test["depends"]:
            if dep in by_id: files.update(by_id[dep]["filename"])
for t in info["targets"]:
    if t["name"] in wanted: files.update(t["filename"])
root = os.path.realpath("build-aarch64")
print(" ".join(sorted(os.path.relpath(f, root) for f in files if os.path.realpath(f).startswith(root + os.sep))))
')
fi

# Tests under qemu-user (meson runs each cross-built test through the cross file's exe_wrapper;
# test scripts get it as $MESON_EXE_WRAPPER). Emulation is 3-30x slower than native (the model's
# kernels the most): timeouts x10.
run_tests() {
    meson test -C build-aarch64 --no-rebuild --print-errorlogs --num-processes 2 --timeout-multiplier 10 "$@"
}
if [ $# -gt 0 ]; then
    run_tests "$@"
    exit 0
fi
if [ "${VH_AARCH64_TESTS:-ci}" = all ]; then
    run_tests  # the whole suite: most of an hour on 2 cores (doc/aarch64.md)
    exit 0
fi

# CI's share of its 30 minutes is about 8 for this script, so CI runs (times on 2 quiet cores):
#  - the whole 'unit' suite: every kernel test on the NEON paths, the resize against Pillow on
#    NEON, the parsers, the image decoders, the thread pools, the ABI checks (about 35 s);
#  - vh_run_rate (vh-run on the tiny model under the real-time contract) and soak_drop and
#    soak_reject (1500 frames offered to two pipelined stages, most of them dropped or refused;
#    every accepted frame answered): about 15 s each;
#  - vh-run --check on one reference case per bundled image: the NEON build's actions against the
#    fixtures' reference (OpenVLA's own code, float64), prompt and action ids equal (about 15 s).
# Left out here, built all the same and run natively by scripts/test.sh: the other integration
# tests, each a full tiny-model run of many frames, from 30 s (bad_models) to over 7 minutes
# (openvla_fixtures: 32 cases twice; soak_block: 1500 frames, all computed) under emulation, and
# orion_converter (Python on the build machine: no aarch64 code in it).
run_tests --suite unit
run_tests vh_run_rate soak_drop soak_reject
reference=$(mktemp)
trap 'rm -f "$reference"' EXIT
/usr/bin/python3 - tests/fixtures/reference/openvla-tiny.json "$reference" <<'PYEOF'
import json, sys
ref = json.load(open(sys.argv[1]))
seen, cases = set(), []
for case in ref["cases"]:
    if case["image"] not in seen:
        seen.add(case["image"])
        cases.append(case)
ref["cases"] = cases
json.dump(ref, open(sys.argv[2], "w"))
PYEOF
qemu-aarch64 build-aarch64/tools/vh-run --backend cpu_generic --check "$reference"  # the cross file's exe_wrapper
