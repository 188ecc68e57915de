#!/bin/sh
# Install what vlahybrid needs, from Debian 12 packages.
#   scripts/install-deps.sh         everything: building, every test, the consumers' checks
#   scripts/install-deps.sh demo    only what scripts/demo.sh builds and runs (the library, the CPU
#                                   plugins and the tools): no test framework, no PyTorch, no ABI tools
#   scripts/install-deps.sh PROFILE --print    the packages of that profile, one a line; installs nothing
# (python3-numpy in both: the build derives the bundled model's weights, tests/fixtures/derive_fixtures.py)
set -eu
demo="build-essential meson ninja-build pkg-config python3-numpy libjansson-dev libopenblas-dev libdnnl-dev libhwloc-dev libpng-dev libjpeg-dev"
case "${1:-all}" in
  demo) packages=$demo ;;
  all) packages="$demo check abigail-tools cmake python3-torch libwebsockets-dev libmsgpack-dev python3-websockets python3-msgpack python3-pil" ;;
  *) echo "usage: $0 [demo|all]" >&2; exit 2 ;;
esac
if [ "${2:-}" = --print ]; then printf '%s\n' $packages; exit 0; fi
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then as_root=""; else as_root="sudo"; fi
echo "installing:$missing"
$as_root apt-get update -qq
DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends $missing
