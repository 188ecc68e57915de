#!/bin/sh
# Tools that work where they are (doc/api.md, "Where the plugins and the bundled model are found"):
#  1. the build tree: build/tools/vh-run, run directly (no `meson devenv`, no VH_BACKEND_PATH), finds
#     the plugins built beside the library and the bundled model, and gives the reference action;
#  2. an install (meson install --destdir) moved to another folder: its vh-run finds its library,
#     plugins, model and frames relative to itself and gives the reference action;
#  3. no build or source path in any installed file (strings);
#  4. pkg-config against the moved install alone (PKG_CONFIG_LIBDIR: no jansson.pc in sight), and a
#     program built with its flags runs.
# The reference: tests/fixtures/reference/openvla-tiny.json (made by OpenVLA's own code in float64),
# the case of frame_0.png with "pick up the red block".
# usage: installed_tree.sh SOURCE_ROOT BUILD_ROOT
set -eu
src=$1
build=$2
py=/usr/bin/python3
[ -x "$py" ] || { echo "no $py: skipped"; exit 77; }
command -v meson >/dev/null || { echo "no meson on PATH: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# meson test points LD_LIBRARY_PATH at the build tree's library, which would shadow the install's
unset VH_BACKEND_PATH VH_TRACE LD_LIBRARY_PATH
ref=$src/tests/fixtures/reference/openvla-tiny.json
frame=$src/tests/fixtures/images/frames/frame_0.png

# The frame's JSON line against the reference case (token ids equal, action within 1e-9).
check_action() { # LABEL JSON_FILE
    "$py" - "$ref" "$2" "$1" <<'PYEOF'
import json, sys
ref = json.load(open(sys.argv[1]))
case = next(c for c in ref["cases"] if c["image"] == "frame_0.png" and c["instruction"] == "pick up the red block")
got = json.loads(open(sys.argv[2]).readline())
assert got["status"] == "ok", got
assert got["action_ids"] == case["action_ids"], (got["action_ids"], case["action_ids"])
worst = max(abs(a - b) for a, b in zip(got["action"], case["action"]))
assert len(got["action"]) == len(case["action"]) and worst <= 1e-9, worst
print("%s: action tokens %s equal the reference, max |d action| %.3g" % (sys.argv[3], got["action_ids"], worst))
PYEOF
}

echo "== build tree, no devenv, no VH_BACKEND_PATH"
(cd "$work" && "$build/tools/vh-run" --json --backend cpu_generic --image "$frame") > "$work/build.json"
check_action "build tree" "$work/build.json"
# and with no arguments at all: the bundled model and frames
(cd "$work" && "$build/tools/vh-run" --json --frames 1) > "$work/bundled.json"
check_action "build tree, bundled data" "$work/bundled.json"

echo "== installed, then moved"
DESTDIR="$work/stage" meson install -C "$build" --no-rebuild --quiet >/dev/null
prefix=$(meson introspect "$build" --buildoptions | "$py" -c "import json,sys; print({x['name']: x['value'] for x in json.load(sys.stdin)}['prefix'])")
mv "$work/stage$prefix" "$work/moved"
rm -rf "$work/stage"
moved=$work/moved
(cd / && "$moved/bin/vh-run" --json --backend cpu_generic --frames 1) > "$work/moved.json"
# the moved program runs the moved library (its $ORIGIN run path), not the build tree's
(cd / && LD_TRACE_LOADED_OBJECTS=1 "$moved/bin/vh-run") > "$work/ldd.txt"
grep -q "libvlahybrid.so.0 => $moved/" "$work/ldd.txt" || { echo "not the moved library:"; cat "$work/ldd.txt"; exit 1; }
check_action "moved install" "$work/moved.json"
# a plugin folder that does not exist any more is not searched: the message names the moved one
if (cd / && "$moved/bin/vh-run" --backend no_such_backend --frames 1) 2> "$work/nf.err" >/dev/null; then
    echo "an unknown backend was accepted"; exit 1
fi
grep -q "$moved/lib.*/vlahybrid/backends" "$work/nf.err" || { echo "the moved plugin folder is not searched:"; cat "$work/nf.err"; exit 1; }

echo "== no build or source path in the installed files"
found=0
for f in $(find "$moved" -type f ! -path '*/share/vlahybrid/*'); do
    if strings -a "$f" | grep -q -e "$build" -e "$src"; then
        echo "$f names $(strings -a "$f" | grep -e "$build" -e "$src" | head -1)"
        found=1
    fi
done
[ $found = 0 ] || exit 1

echo "== pkg-config against the install alone"
if command -v pkg-config >/dev/null && command -v cc >/dev/null; then
    pcdir=$(dirname "$(find "$moved" -name vlahybrid.pc | head -1)")
    flags=$(PKG_CONFIG_LIBDIR=$pcdir pkg-config --cflags --libs vlahybrid)
    echo "pkg-config --cflags --libs vlahybrid: $flags"
    PKG_CONFIG_LIBDIR=$pcdir pkg-config --exists --print-errors vlahybrid
    libdir=$(PKG_CONFIG_LIBDIR=$pcdir pkg-config --variable=libdir vlahybrid)
    # shellcheck disable=SC2086
    cc -std=c11 -Wall -Wextra -Werror ${VH_CONSUMER_CFLAGS:-} "$src/tests/consumers/consumer.c" -o "$work/consumer" $flags -Wl,-rpath,"$libdir"
    "$work/consumer" "$moved/share/vlahybrid/models/openvla-tiny"
else
    echo "no pkg-config or cc: that part skipped"
fi
echo "build tree and moved install both find their plugins and data; nothing installed names $build or $src"
