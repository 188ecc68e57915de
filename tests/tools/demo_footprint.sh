#!/bin/sh
# scripts/demo.sh installs and builds only what the demo runs (issue: it used to install the test
# framework, PyTorch and the ABI tools and build every test and the CUDA plugin first):
#  1. its package profile lacks the test-only packages and is a subset of the full one;
#  2. its build folder, configured as the demo does it, holds vh-run and the CPU plugins and no
#     test, no CUDA plugin, no Python package, no vh-serve.
# usage: demo_footprint.sh SOURCE_ROOT
set -eu
src=$1
py=/usr/bin/python3
[ -x "$py" ] || { echo "no $py: skipped"; exit 77; }
command -v meson >/dev/null || { echo "no meson on PATH: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "demo_footprint: $*"; exit 1; }

demo=$(sh "$src/scripts/install-deps.sh" demo --print)
all=$(sh "$src/scripts/install-deps.sh" all --print)
for p in check abigail-tools python3-torch cmake libwebsockets-dev; do
    echo "$demo" | grep -qx "$p" && fail "the demo installs the test-only package $p"
done
for p in $demo; do echo "$all" | grep -qx "$p" || fail "$p is in the demo profile but not in the full one"; done
echo "$demo" | grep -qx libopenblas-dev || fail "the demo profile lacks cpu_generic's OpenBLAS"

VH_DEMO_BUILD="$work/build" sh "$src/scripts/demo.sh" --setup-only
meson introspect "$work/build" --targets > "$work/targets.json"
"$py" - "$work/targets.json" <<'PYEOF'
import json, sys
targets = json.load(open(sys.argv[1]))
names = {t["name"] for t in targets}
problems = []
for must in ("vh-run", "vh_backend_cpu_generic"):
    if must not in names:
        problems.append(f"no {must} target")
for t in targets:
    if t["name"].startswith("test_") or t["name"] == "vh_backend_cuda" or t["name"] == "vh-serve":
        problems.append(f"the demo builds {t['name']}")
if problems:
    sys.exit("demo_footprint: " + "; ".join(problems))
print(f"demo_footprint: {len(targets)} targets, none a test, no cuda plugin, no vh-serve")
PYEOF
