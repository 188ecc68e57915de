#!/bin/sh
# Build programs against vlahybrid the three ways users do, and run each on the bundled model:
#  1. installed (meson install from $BUILD into a staging root), a C program built with pkg-config;
#  2. the same install, a CMake project: find_package(vlahybrid) -> vlahybrid::vlahybrid;
#  3. a meson project with vlahybrid as a subproject (the source tree), built from scratch;
#  2b. the same install's static core (libvlahybrid.a, where the build made one: -Ddefault_library=both),
#     linked with pkg-config --static: no libvlahybrid.so in the program, the plugins still dlopen'd,
#     and the same action as the shared build's consumer;
#  4. the same install's Python package (examples/python/predict.py with /usr/bin/python3), which
#     must find the staged library by its path relative to the package, not the loader's path.
# The staged library finds the staged plugins beside itself (no VH_BACKEND_PATH: it looks relative to
# where it is), and pkg-config sees only the staged .pc files (PKG_CONFIG_LIBDIR: no jansson.pc).
set -eu
cd "$(dirname "$0")/.."
src=$PWD
BUILD=${BUILD:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
model=$src/models/openvla-tiny

root=$work/root
DESTDIR=$root meson install -C "$BUILD" --no-rebuild --quiet
prefix=$(meson introspect "$BUILD" --buildoptions | python3 -c "import json,sys; o={x['name']:x['value'] for x in json.load(sys.stdin)}; print(o['prefix']); print(o['libdir'])")
libdir=$(echo "$prefix" | sed -n 2p)
prefix=$(echo "$prefix" | sed -n 1p)
staged=$root$prefix
unset VH_BACKEND_PATH
export LD_LIBRARY_PATH="$staged/$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

echo "== pkg-config"
export PKG_CONFIG_LIBDIR="$staged/$libdir/pkgconfig"
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror tests/consumers/consumer.c -o "$work/consumer-pkgconfig" \
  $(pkg-config --cflags --libs vlahybrid)
"$work/consumer-pkgconfig" "$model" | tee "$work/shared.out"

echo "== pkg-config --static (libvlahybrid.a)"
if [ ! -f "$staged/$libdir/libvlahybrid.a" ]; then
  echo "no libvlahybrid.a installed (built with -Ddefault_library=shared): skipped"
else
  # the archive by path: beside libvlahybrid.so, -lvlahybrid would pick the shared one
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Wextra -Werror tests/consumers/consumer.c -o "$work/consumer-static" \
    $(pkg-config --cflags vlahybrid) "$staged/$libdir/libvlahybrid.a" \
    $(pkg-config --static --libs vlahybrid | sed 's/ *-lvlahybrid\b//')
  if readelf -d "$work/consumer-static" | grep -q 'libvlahybrid'; then
    echo "the static consumer still needs libvlahybrid.so"; exit 1
  fi
  # only the public API is visible in the archive (the shared library's version script's list)
  internal=$(nm -g --defined-only "$staged/$libdir/libvlahybrid.a" | awk 'NF == 3 {print $3}' | grep -v '^vh_' || true)
  count=$(nm -g --defined-only "$staged/$libdir/libvlahybrid.a" | awk 'NF == 3' | wc -l)
  exported=$(grep -c '^ *vh_[a-z_]*;' lib/vlahybrid.map)
  if [ -n "$internal" ] || [ "$count" -ne "$exported" ]; then
    echo "libvlahybrid.a exports $count symbols, the version script $exported: $internal"; exit 1
  fi
  # a program linking the core statically finds the installed plugins through VH_BACKEND_PATH
  VH_BACKEND_PATH="$staged/$libdir/vlahybrid/backends" "$work/consumer-static" "$model" | tee "$work/static.out"
  cmp "$work/shared.out" "$work/static.out" || { echo "the static and shared consumers' actions differ"; exit 1; }
fi

echo "== CMake (find_package)"
cmake -S tests/consumers/cmake -B "$work/cmake" -DCMAKE_PREFIX_PATH="$staged" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/cmake" >/dev/null
"$work/cmake/consumer" "$model"

echo "== Python package"
pkg_init=$(find "$staged" -path '*/vlahybrid/_install_paths.py' | head -n 1)
if [ -z "$pkg_init" ]; then
  echo "no Python package installed (meson found no /usr/bin/python3): skipped"
elif ! /usr/bin/python3 -c 'import numpy' 2>/dev/null; then
  echo "no numpy for /usr/bin/python3: skipped"
else
  site=$(dirname "$(dirname "$pkg_init")")
  (cd "$work" && env -u LD_LIBRARY_PATH -u VLAHYBRID_BUILD_DIR -u VLAHYBRID_LIBRARY PYTHONPATH="$site" \
    /usr/bin/python3 "$src/examples/python/predict.py" "$model") > "$work/python.out"
  cat "$work/python.out"
  grep -q "from $staged/$libdir/libvlahybrid.so.0" "$work/python.out" ||
    { echo "the installed package did not load the installed library"; exit 1; }
fi

echo "== meson subproject"
mkdir -p "$work/meson/subprojects"
cp tests/consumers/meson/meson.build tests/consumers/consumer.c "$work/meson/"
sed -i "s|'../consumer.c'|'consumer.c'|" "$work/meson/meson.build"
ln -s "$src" "$work/meson/subprojects/vlahybrid"
unset PKG_CONFIG_LIBDIR
meson setup "$work/meson/build" "$work/meson" --force-fallback-for=vlahybrid >/dev/null
ninja -C "$work/meson/build" >/dev/null
"$work/meson/build/consumer" "$model" # the subproject's library finds its plugins beside it
echo "consumers: pkg-config (shared and static), CMake, the Python package and the meson subproject build all ran"
