#!/bin/sh
# vh-bench on an Orion folder with a camera front end (the tiny fixture model-front): by default it
# submits synthetic camera frames (six images, the rig's calibration, a moving ego 0.5 s a frame),
# and every frame is answered without a failure, serial at the agent's 1600 x 900 and packed with
# frames in flight at a smaller size; the JSON and the text report say camera frames, their count
# and size; --frame-source tokens runs tokens on the same folder; bad options exit 2 with a message.
# No timings are asserted.
# usage: vh_bench_cameras.sh VH_BENCH FRONT_END_MODEL_DIR TOKENS_ONLY_MODEL_DIR
set -eu
vh_bench=$1
model=$2
tokens_only=$3
py=/usr/bin/python3
[ -x "$py" ] || { echo "no $py: skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/built_program.sh"
vh_bench=$(built_program "$vh_bench" "$out")

bench() { # NAME SOURCE WIDTH HEIGHT ARGS...
    name=$1 source=$2 width=$3 height=$4
    shift 4
    rc=0
    "$vh_bench" --model "$model" --json --frames 3 --warmup 1 --backend cpu_generic "$@" > "$out/$name.json" \
        2> "$out/$name.err" || rc=$?
    [ "$rc" -eq 0 ] || { echo "$name: exit status $rc"; cat "$out/$name.err"; exit 1; }
    "$py" - "$out/$name.json" "$name" "$source" "$width" "$height" <<'PY'
import json, sys
path, name, source, width, height = sys.argv[1:]
r = json.load(open(path))
assert r["family"] == "orion" and r["frames"] == 3 and r["failures"] == 0, r
of = r["orion_frames"]
assert of["source"] == source, of
if source == "cameras":
    assert of["cameras"] == 6 and of["camera_width"] == int(width) and of["camera_height"] == int(height), of
else:
    assert "cameras" not in of and of["vision_tokens"] == 529, of
print("%s: %s, %d frames answered (%s, %d in flight)" % (name, source, r["frames"], r["mode"], r["frames_in_flight"]))
PY
}
bench cameras cameras 1600 900
bench packed cameras 400 225 --camera-size 400x225 --mode packed --frames-in-flight 2
bench asked cameras 320 180 --cameras --camera-size 320x180
bench tokens tokens 0 0 --frame-source tokens
"$py" "$(dirname "$0")/json_numbers.py" "$out"/*.json

# the text report names the camera frames
"$vh_bench" --model "$model" --frames 2 --warmup 0 --backend cpu_generic --camera-size 200x120 > "$out/text.txt"
grep -q "^input    Orion: synthetic camera frames, 6 cameras 200 x 120 " "$out/text.txt" ||
    { cat "$out/text.txt"; exit 1; }

refused() { # EXPECTED-MESSAGE ARGS...: exit status 2 and the message, before any model loads
    want=$1
    shift
    rc=0
    "$vh_bench" "$@" > /dev/null 2> "$out/refuse.err" || rc=$?
    [ "$rc" -eq 2 ] && grep -qF -- "$want" "$out/refuse.err" ||
        { echo "vh-bench $*: rc $rc"; cat "$out/refuse.err"; exit 1; }
}
refused '--camera-size needs WIDTHxHEIGHT, each 1..16384 pixels (e.g. 1600x900), not "0x5"' \
    --model "$model" --camera-size 0x5
refused 'not "1600x"' --model "$model" --camera-size 1600x
refused 'not "-1x5"' --model "$model" --camera-size -1x5
refused '--frame-source is tokens or cameras, not "lidar"' --model "$model" --frame-source lidar
refused 'has no camera front end' --model "$tokens_only" --cameras
refused '--camera-size is for camera frames' --model "$model" --frame-source tokens --camera-size 400x225
refused 'runs on synthetic camera frames, not --image' --model "$model" --image x.png
"$vh_bench" --help | grep -q -- "--camera-size WxH" || { echo "--help: no --camera-size"; exit 1; }
