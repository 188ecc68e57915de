#!/bin/sh
# vh-run --frame-file (issue 25): a stream of frames, each with its own inputs, as JSON lines.
# OpenVLA: per-line instructions and paths relative to the file's folder, checked with --check
# against the fixtures' reference (OpenVLA's own code) frame by frame; per-line unnorm_key on the
# two-dataset model against its reference; tag, sequence and timestamp_ns come back in --json;
# cameras are passed through; --frames cycles over the lines. Orion: per-line vision tokens (.f32
# and .npy), command and noise (a file, an inline array) give cases.json's trajectories; Orion with a
# camera front end from six cameras with their calibration, ego pose and can_bus per line. Bad lines
# (unknown member, a member twice, not JSON, a missing image, members the model does not take, a command out of
# range, noise of the wrong length, ...) stop the run with status 2 and the line number before the
# model loads, so no frame is lost; every accepted frame is answered.
# usage: vh_run_frames.sh VH_RUN SOURCE_ROOT
set -eu
py=/usr/bin/python3
[ -x "$py" ] && "$py" -c "import numpy" 2>/dev/null || { echo "no numpy in $py: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/built_program.sh"
vh_run=$(built_program "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" "$work")
src=$2
frames=$src/tests/fixtures/images/frames
orion=$src/tests/fixtures/orion
fail() { echo "FAILED: $*"; exit 1; }
mkdir -p "$work/stream/images"
cp "$frames"/frame_*.png "$work/stream/images/"

echo "== OpenVLA: per-line instructions, checked against the fixtures' reference"
cat > "$work/stream/frames.jsonl" <<'EOF2'
{"image": "images/frame_2.png", "instruction": "open the drawer", "tag": 41, "sequence": 1000, "timestamp_ns": 5000}
{"image": "images/frame_0.png", "instruction": "move the green block to the left of the yellow one", "tag": 42}

{"image": "images/frame_4.png", "cameras": [{"name": "CAM_FRONT", "image": "images/frame_1.png"}, {"image": "images/frame_3.png"}]}
EOF2
"$py" - "$src/tests/fixtures/reference/openvla-tiny.json" <<'PY'
import json, sys  # the instructions above are the fixtures' own
got = {c["instruction"] for c in json.load(open(sys.argv[1]))["cases"]}
assert {"open the drawer", "move the green block to the left of the yellow one", "pick up the red block"} <= got, got
PY
(cd "$work" && "$vh_run" --backend cpu_generic --frame-file stream/frames.jsonl --check "$src/tests/fixtures/reference/openvla-tiny.json") \
    > "$work/check.txt" 2> "$work/check.err" || fail "the frame file does not pass: $(cat "$work/check.txt" "$work/check.err")"
grep -q "^check: 3 of 3 frames pass" "$work/check.txt" || fail "$(cat "$work/check.txt")"
sed -n 1p "$work/check.txt" | grep -q "frame_2.png / \"open the drawer\".*: pass$" || fail "line 1: $(sed -n 1p "$work/check.txt")"
sed -n 3p "$work/check.txt" | grep -q "frame_4.png / \"pick up the red block\".*: pass$" || fail "line 4: $(sed -n 3p "$work/check.txt")"
"$vh_run" --backend cpu_generic --frame-file "$work/stream/frames.jsonl" --json --frames 5 > "$work/stream.json" 2> "$work/stream.err" \
    || fail "--json: $(cat "$work/stream.err")"
grep -q "submitted 5 .* unanswered 0" "$work/stream.err" || fail "statistics: $(grep submitted "$work/stream.err")"
"$py" - "$work/stream.json" <<'PY'
import json, sys
f = [json.loads(l) for l in open(sys.argv[1])]
assert len(f) == 5 and all(x["status"] == "ok" for x in f), f
assert [x["line"] for x in f] == [1, 2, 4, 1, 2], [x["line"] for x in f]
assert f[0]["tag"] == 41 and f[0]["sequence"] == 1000 and f[0]["timestamp_ns"] == 5000, f[0]
assert f[1]["tag"] == 42 and "sequence" not in f[1] and "timestamp_ns" not in f[1], f[1]
assert f[2]["cameras"] == 2 and f[2]["instruction"] == "pick up the red block", f[2]
assert f[3]["action_ids"] == f[0]["action_ids"] and f[3]["tag"] == 41, "cycling: line 1 again differs"
assert f[0]["image"].endswith("/stream/images/frame_2.png"), f[0]["image"]
PY

printf '{"image": "%s/frame_0.png", "instruction": "juggle"}\n' "$frames" > "$work/norecord.jsonl"
set +e
"$vh_run" --backend cpu_generic --frame-file "$work/norecord.jsonl" --check "$src/tests/fixtures/reference/openvla-tiny.json" \
    > /dev/null 2> "$work/norecord.err"
rc=$?
set -e
[ $rc = 2 ] && grep -q 'no record of image .*frame_0.png with instruction "juggle".*(line 1 of the frame file)' "$work/norecord.err" \
    || fail "a line without a record: $rc $(cat "$work/norecord.err")"

echo "== OpenVLA: per-line unnorm_key on the two-dataset model"
cat > "$work/keys.jsonl" <<EOF2
{"image": "$frames/frame_1.png", "unnorm_key": "bridge_orig"}
{"image": "$frames/frame_1.png", "unnorm_key": "fractal20220817_data"}
{"image": "$frames/frame_3.png", "instruction": "open the drawer", "unnorm_key": "fractal20220817_data"}
EOF2
"$vh_run" --backend cpu_generic --model "$src/tests/fixtures/models/openvla-tiny-b" --frame-file "$work/keys.jsonl" \
    --check "$src/tests/fixtures/reference/openvla-tiny-b.json" > "$work/keys.txt" 2> "$work/keys.err" \
    || fail "per-line unnorm_key: $(cat "$work/keys.txt" "$work/keys.err")"
grep -q "^check: 3 of 3 frames pass" "$work/keys.txt" || fail "$(cat "$work/keys.txt")"

echo "== Orion: per-line tokens, command and noise"
"$py" - "$orion" "$work" <<'PY'
import json, sys, numpy as np
fix, w = sys.argv[1:]
cases = {c["name"]: c for c in json.load(open(f"{fix}/cases.json"))["cases"]}
cfg = json.load(open(f"{fix}/model/config.json"))
n, width = cfg["vision_tokens"], cfg["text_config"]["hidden_size"]
np.save(f"{w}/tokens_1.npy", np.fromfile(f"{fix}/tokens_1.f32", dtype="<f4").reshape(n, width))
a, b = cases["set0_cmd2"], cases["set1_cmd4"]
np.save(f"{w}/eps_b.npy", np.array(b["eps"], dtype="<f4"))
with open(f"{w}/orion.jsonl", "w") as f:
    f.write(json.dumps({"vision_tokens": f"{fix}/tokens_0.f32", "command": 2, "noise": a["eps"], "tag": 1}) + "\n")
    f.write(json.dumps({"vision_tokens": "tokens_1.npy", "command": 4, "noise": "eps_b.npy", "sequence": 9}) + "\n")
PY
"$vh_run" --backend cpu_generic --model "$orion/model" --frame-file "$work/orion.jsonl" --json > "$work/orion.json" 2> "$work/orion.err" \
    || fail "Orion: $(cat "$work/orion.err")"
"$py" - "$orion/cases.json" "$work/orion.json" <<'PY'
import json, sys
cases = {c["name"]: c for c in json.load(open(sys.argv[1]))["cases"]}
f = [json.loads(l) for l in open(sys.argv[2])]
assert len(f) == 2 and all(x["status"] == "ok" for x in f), f
for got, name, command in zip(f, ["set0_cmd2", "set1_cmd4"], [2, 4]):
    want = cases[name]["trajectory"]
    scale = max(abs(v) for v in want)
    err = max(abs(g - v) for g, v in zip(got["trajectory"], want)) / scale
    assert got["command"] == command and err <= 1e-4, (name, got["command"], err)
assert f[0]["noise"] == "inline" and f[0]["tag"] == 1 and f[1]["noise"].endswith("eps_b.npy") and f[1]["sequence"] == 9, f
print("Orion: both lines give their cases' trajectories")
PY

echo "== Orion from six cameras: images, calibration per camera, ego pose and can_bus per line"
"$py" -c "import sys, numpy; numpy.zeros(32, numpy.float32).tofile(sys.argv[1])" "$work/zeros32.f32"
"$py" - "$frames" "$work" <<'PY'
import json, math, sys
frames, w = sys.argv[1:]
def l2i(c):  # K (1600 x 900 rig) @ lidar2cam of a camera at yaw 60 c degrees
    yaw = c * math.pi / 3
    R = [[math.sin(yaw), -math.cos(yaw), 0], [0, 0, -1], [math.cos(yaw), math.sin(yaw), 0]]
    l2c = [R[0] + [0.0], R[1] + [1.5], R[2] + [0.2], [0, 0, 0, 1]]
    K = [[1266.0, 0, 800, 0], [0, 1266.0, 450, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    return [[sum(K[i][k] * l2c[k][j] for k in range(4)) for j in range(4)] for i in range(4)]
with open(f"{w}/cameras.jsonl", "w") as f:
    for t in range(2):
        cams = [{"image": f"{frames}/frame_{(c + t) % 5}.png", "lidar2img": l2i(c)} for c in range(6)]
        pose = [[1, 0, 0, 3.0 * t], [0, 1, 0, 0], [0, 0, 1, 1.8], [0, 0, 0, 1]]
        f.write(json.dumps({"cameras": cams, "ego_pose": pose, "can_bus": [0.1 * k for k in range(18)], "command": 2,
                            "timestamp_ns": 1000000000 + 500000000 * t, "noise": [0.0] * 32}) + "\n")
    # the same frame without its ego pose: refused by the library at submit, the run goes on
    f.write(json.dumps({"cameras": cams, "can_bus": [0.0] * 18, "command": 2}) + "\n")
PY
set +e
mkdir -p "$work/tokens"
"$vh_run" --backend cpu_generic --model "$orion/model-front" --frame-file "$work/cameras.jsonl" --json --warmup 0 \
    --dump-vision-tokens "$work/tokens" > "$work/cameras.json" 2> "$work/cameras.err"
set -e
"$py" - "$work/cameras.json" "$work/cameras.err" <<'PY'
import json, sys
f = [json.loads(l) for l in open(sys.argv[1])]
err = open(sys.argv[2]).read()
ok = [x for x in f if x["status"] == "ok"]
assert len(ok) == 2 and all(x["cameras"] == 6 and len(x["trajectory"]) == 12 for x in ok), (f, err)
assert ok[0]["trajectory"] != ok[1]["trajectory"], "two different frames gave one trajectory"
assert "frame->ego_pose" in err or any("ego_pose" in json.dumps(x) for x in f), (f, err)
print("Orion from cameras: both camera lines answered, the one without its ego pose refused")
PY
# the first frame's front-end tokens, given back as a token frame: its trajectory again
"$vh_run" --backend cpu_generic --model "$orion/model-front" --vision-tokens "$work/tokens/frame_000001.npy" \
    --command 2 --noise "$work/zeros32.f32" --json --warmup 0 > "$work/replay.json" 2>> "$work/cameras.err" || true
"$py" - "$work" <<'PY'
import glob, json, sys
import numpy as np
w = sys.argv[1]
files = sorted(glob.glob(f"{w}/tokens/*.npy"))
assert [f.rsplit("/", 1)[1] for f in files] == ["frame_000001.npy", "frame_000002.npy"], files
t = [np.load(f) for f in files]
assert all(x.shape == (529, 64) and x.dtype == np.float32 and np.isfinite(x).all() for x in t), [x.shape for x in t]
assert not np.array_equal(t[0], t[1])
cams = [json.loads(l) for l in open(f"{w}/cameras.json")]
replay = [json.loads(l) for l in open(f"{w}/replay.json")]
assert replay[0]["status"] == "ok" and replay[0]["trajectory"] == cams[0]["trajectory"], (replay, cams[0])
print("Orion from cameras: --dump-vision-tokens wrote each camera frame's 529 tokens; given back, frame 1's trajectory")
PY

echo "== bad lines stop the run before the load"
refused() { # NAME LINE WORDS [ARGS...]: the frame file NAME.jsonl is refused, naming LINE and WORDS
    name=$1 line=$2 words=$3
    shift 3
    set +e
    "$vh_run" --verbose --backend cpu_generic --frame-file "$work/$name.jsonl" "$@" > "$work/$name.out" 2> "$work/$name.err"
    rc=$?
    set -e
    [ $rc = 2 ] || fail "$name: exit status $rc $(cat "$work/$name.err")"
    grep -q "$line.*$words" "$work/$name.err" || fail "$name: $(cat "$work/$name.err")"
    ! grep -q "\[debug\]\|\[info\]" "$work/$name.err" || fail "$name refused after the load started"
    [ ! -s "$work/$name.out" ] || fail "$name: a frame was answered: $(cat "$work/$name.out")"
}
good="{\"image\": \"$frames/frame_0.png\"}"
printf '%s\n{"image": "x.png", "colour": 1}\n' "$good" > "$work/unknown.jsonl"
refused unknown "line 2" 'unknown member "colour"'
printf '%s\n%s\n{"image": \n' "$good" "$good" > "$work/notjson.jsonl"
refused notjson "line 3" "not JSON"
printf '%s\n{"image": "missing.png"}\n' "$good" > "$work/missing.jsonl"
refused missing "" "missing.png"
printf '%s\n{"image": "a.png", "vision_tokens": "b.f32"}\n' "$good" > "$work/both.jsonl"
refused both "line 2" 'both "image" and "vision_tokens"'
printf '{"instruction": "x"}\n' > "$work/noimage.jsonl"
refused noimage "line 1" 'no "image"'
printf '%s\n{"image": "a.png", "command": 2}\n' "$good" > "$work/command.jsonl"
refused command "line 2" "are for driving models"
printf '{"image": "a.png", "tag": -1}\n' > "$work/tag.jsonl"
refused tag "line 1" '"tag" must be an integer'
printf '{"image": "a.png", "cameras": [{"name": "F", "img": "a.png"}]}\n' > "$work/camera.jsonl"
refused camera "line 1" 'unknown member "img"'
printf '%s\n{"image": "a.png", "tag": 1, "tag": 2}\n' "$good" > "$work/twice.jsonl"
refused twice "line 2" "duplicate object key"
printf '[1, 2]\n' > "$work/array.jsonl"
refused array "line 1" "not a JSON object"
printf '\n\n' > "$work/empty.jsonl"
refused empty "" "no frames"
printf '{"vision_tokens": "%s/tokens_0.f32", "command": 9}\n' "$orion" > "$work/range.jsonl"
refused range "line 1" '"command" 9: the model.s commands are 0..5' --model "$orion/model"
printf '{"vision_tokens": "%s/tokens_0.f32"}\n{"vision_tokens": "%s/tokens_0.f32", "noise": [1, 2]}\n' "$orion" "$orion" > "$work/noise.jsonl"
refused noise "line 2" '"noise" has 2 values' --model "$orion/model"
printf '{"image": "%s/frame_0.png"}\n' "$frames" > "$work/openvla.jsonl"
refused openvla "line 1" 'needs "vision_tokens"' --model "$orion/model"
set +e
"$vh_run" --frame-file "$work/stream/frames.jsonl" --image "$frames/frame_0.png" 2> "$work/mixed.err" > /dev/null
rc=$?
set -e
[ $rc = 2 ] && grep -q "not with --image" "$work/mixed.err" || fail "--frame-file with --image: $rc $(cat "$work/mixed.err")"
echo ok
