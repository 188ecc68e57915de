#!/bin/sh
# Install what building and testing vlahybrid needs, from Debian 12 packages.
set -eu
packages="build-essential meson ninja-build pkg-config libjansson-dev libopenblas-dev libdnnl-dev libhwloc-dev libpng-dev libjpeg-dev check abigail-tools cmake python3-torch python3-numpy libwebsockets-dev libmsgpack-dev python3-websockets python3-msgpack python3-pil"
missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then as_root=""; else as_root="sudo"; fi
echo "installing:$missing"
$as_root apt-get update -qq
DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq --no-install-recommends $missing
