#!/bin/sh
# vh-run --check on the driving models (doc/check-format.md, "Driving models"): vh-run --json lines of
# a run are the reference of a second run, frame k against record k. Orion from vision tokens (a
# frame file with inline and drawn noise, --frames cycling) and from six cameras (the front end),
# MindDrive with its speed decision: the second run passes (exit 0); a copy with one trajectory value
# moved fails (exit 1) and names the frame; MindDrive's decision may part from the reference's at a
# near-tie only under the bf16 criterion; malformed records, references of another model kind, more
# frames than records, other trajectory lengths, frames that are not the records' are refused before
# the model loads (exit 2).
# usage: vh_run_check_driving.sh VH_RUN SOURCE_ROOT
set -eu
py=/usr/bin/python3
[ -x "$py" ] || { echo "no $py: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/built_program.sh"
vh_run=$(built_program "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" "$work")
src=$2
orion=$src/tests/fixtures/orion
minddrive=$src/tests/fixtures/minddrive
frames=$src/tests/fixtures/images/frames
fail() { echo "FAILED: $*"; exit 1; }

# check NAME WANT_RC ARGS...: vh-run --check ... with exit status WANT_RC, stdout in NAME.txt, stderr in
# NAME.err (no warm-up frames: the tests' time goes to the frames that are checked)
check() {
    name=$1 want=$2
    shift 2
    set +e
    "$vh_run" --backend cpu_generic --warmup 0 "$@" > "$work/$name.txt" 2> "$work/$name.err"
    rc=$?
    set -e
    [ $rc = "$want" ] || fail "$name: exit status $rc, not $want: $(cat "$work/$name.txt" "$work/$name.err")"
}
# refused NAME WORDS ARGS...: exit status 2 with WORDS on stderr, before the model loads
refused() {
    name=$1 words=$2
    shift 2
    check "$name" 2 --verbose "$@"
    grep -q -- "$words" "$work/$name.err" || fail "$name: no '$words' in: $(cat "$work/$name.err")"
    ! grep -q "\[debug\]\|\[info\]" "$work/$name.err" || fail "$name refused after the load started"
    [ ! -s "$work/$name.txt" ] || fail "$name: a frame was answered: $(cat "$work/$name.txt")"
}
# edit IN OUT PYTHON: OUT is IN's records (a list r of dicts) after PYTHON
edit() {
    "$py" - "$1" "$2" "$3" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
exec(sys.argv[3])
open(sys.argv[2], "w").write("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in r))
PY
}

echo "== Orion from vision tokens: a run is the reference of the next"
cat > "$work/orion.jsonl" <<EOF
{"vision_tokens": "$orion/tokens_0.f32", "command": 2, "noise": [$(printf '0.1,%.0s' $(seq 31))0.1]}
{"vision_tokens": "$orion/tokens_1.f32", "command": 4, "sequence": 7}
EOF
"$vh_run" --backend cpu_generic --warmup 0 --model "$orion/model" --frame-file "$work/orion.jsonl" --frames 3 --json \
    > "$work/orion-ref.jsonl" 2> "$work/orion-ref.err" || fail "the reference run: $(cat "$work/orion-ref.err")"
# (without --frames: one frame per record, cycling over the lines; --json: each frame's object has its check)
check orion-pass 0 --model "$orion/model" --frame-file "$work/orion.jsonl" --check "$work/orion-ref.jsonl" --json
"$py" - "$work/orion-pass.txt" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
f = [json.loads(l) for l in lines[:3]]
assert all(x["check"]["pass"] and x["check"]["criterion"] == "fp32" and x["check"]["trajectory_max_delta"] == 0 for x in f), f
assert [x["check"]["reference_line"] for x in f] == [1, 2, 3] and f[2]["vision_tokens"].endswith("tokens_0.f32"), f
assert lines[3].startswith("check: 3 of 3 frames pass (trajectories and extras within 0.0001 of each one's largest "
                           "reference value) against"), lines[3]
PY
grep -q "judges by the fp32 criterion" "$work/orion-pass.err" || fail "criterion: $(cat "$work/orion-pass.err")"

echo "== a moved trajectory value fails, and names the frame"
edit "$work/orion-ref.jsonl" "$work/orion-moved.jsonl" 'r[1]["trajectory"][5] += 1.0'
check orion-moved 1 --model "$orion/model" --frame-file "$work/orion.jsonl" --check "$work/orion-moved.jsonl"
grep -q "^check: 2 of 3 frames pass" "$work/orion-moved.txt" || fail "summary: $(grep '^check:' "$work/orion-moved.txt")"
sed -n 1p "$work/orion-moved.txt" | grep -q "^check frame 0 .*tokens_0.f32 (command 2; reference line 1): trajectory equal; extras equal (tolerance 0.0001 of the largest): pass$" \
    || fail "frame 0: $(sed -n 1p "$work/orion-moved.txt")"
sed -n 2p "$work/orion-moved.txt" | grep -q "^check frame 1 .*tokens_1.f32 .*trajectory max |d| 1 m, .*: FAIL$" \
    || fail "frame 1: $(sed -n 2p "$work/orion-moved.txt")"
# a reference made on a bf16 backend: the bf16 criterion (5e-2 of the largest value for Orion) takes
# a value moved by 3% of the largest; --check-tolerance 0.01 does not
edit "$work/orion-ref.jsonl" "$work/orion-bf16.jsonl" '
r[1]["trajectory"][5] += 0.03 * max(abs(v) for v in r[1]["trajectory"])
for x in r:
    x["backends"] = "cuda"'
check orion-bf16 0 --model "$orion/model" --frame-file "$work/orion.jsonl" --check "$work/orion-bf16.jsonl"
grep -q "judges by the bf16 criterion (the backends' compute: the run's cpu_generic, the reference's cuda): trajectories and extras within 0.05 of" \
    "$work/orion-bf16.err" || fail "bf16 reference: $(cat "$work/orion-bf16.err")"
grep -q "^check: 3 of 3 frames pass (bf16 criterion: " "$work/orion-bf16.txt" || fail "bf16 reference: $(cat "$work/orion-bf16.txt")"
check orion-tight 1 --model "$orion/model" --frame-file "$work/orion.jsonl" --check "$work/orion-bf16.jsonl" --check-tolerance 0.01
sed -n 2p "$work/orion-tight.txt" | grep -q "0.03 of the largest .*(tolerance 0.01 of the largest): FAIL$" \
    || fail "--check-tolerance 0.01: $(sed -n 2p "$work/orion-tight.txt")"

echo "== Orion from six cameras (the camera front end)"
"$py" - "$frames" "$work/cameras.jsonl" <<'PY'
import json, math, sys
frames, out = sys.argv[1:]
def l2i(c):  # K (1600 x 900 rig) @ lidar2cam of a camera at yaw 60 c degrees
    yaw = c * math.pi / 3
    R = [[math.sin(yaw), -math.cos(yaw), 0], [0, 0, -1], [math.cos(yaw), math.sin(yaw), 0]]
    l2c = [R[0] + [0.0], R[1] + [1.5], R[2] + [0.2], [0, 0, 0, 1]]
    K = [[1266.0, 0, 800, 0], [0, 1266.0, 450, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    return [[sum(K[i][k] * l2c[k][j] for k in range(4)) for j in range(4)] for i in range(4)]
with open(out, "w") as f:
    for t in range(2):
        cams = [{"image": f"{frames}/frame_{(c + t) % 5}.png", "lidar2img": l2i(c)} for c in range(6)]
        pose = [[1, 0, 0, 3.0 * t], [0, 1, 0, 0], [0, 0, 1, 1.8], [0, 0, 0, 1]]
        f.write(json.dumps({"cameras": cams, "ego_pose": pose, "can_bus": [0.1 * k for k in range(18)], "command": 2,
                            "timestamp_ns": 1000000000 + 500000000 * t}) + "\n")
PY
"$vh_run" --backend cpu_generic --warmup 0 --model "$orion/model-front" --frame-file "$work/cameras.jsonl" --json \
    > "$work/cameras-ref.jsonl" 2> "$work/cameras-ref.err" || fail "the camera reference run: $(cat "$work/cameras-ref.err")"
check cameras-pass 0 --model "$orion/model-front" --frame-file "$work/cameras.jsonl" --check "$work/cameras-ref.jsonl"
grep -q "^check: 2 of 2 frames pass" "$work/cameras-pass.txt" || fail "cameras: $(cat "$work/cameras-pass.txt")"

echo "== MindDrive: the trajectory, the extras and the speed decision"
cat > "$work/md.jsonl" <<EOF
{"vision_tokens": "$minddrive/tokens_0.f32", "command": 2}
{"vision_tokens": "$minddrive/tokens_1.f32", "command": 4, "noise": [$(printf '0.2,%.0s' $(seq 63))0.2]}
EOF
"$vh_run" --backend cpu_generic --warmup 0 --model "$minddrive/model" --frame-file "$work/md.jsonl" --json \
    > "$work/md-ref.jsonl" 2> "$work/md-ref.err" || fail "the MindDrive reference run: $(cat "$work/md-ref.err")"
check md-pass 0 --model "$minddrive/model" --frame-file "$work/md.jsonl" --check "$work/md-ref.jsonl"
grep -q "^check: 2 of 2 frames pass (.*, speed decisions equal) against" "$work/md-pass.txt" || fail "$(cat "$work/md-pass.txt")"
grep -q "speed decision equal ([0-9]*) (tolerance 0.0001 of the largest): pass$" "$work/md-pass.txt" || fail "$(cat "$work/md-pass.txt")"
# frame 0's reference decision moved to a near-tie (log-probability gap 0.1), frame 1's far (gap 0.5)
edit "$work/md-ref.jsonl" "$work/md-decisions.jsonl" '
for x, gap in zip(r, [0.1, 0.5]):
    lp = x["extras"]["speed_log_probs"]
    d = x["speed_decision"]
    other = max((i for i in range(len(lp)) if i != d), key=lambda i: lp[i])
    lp[other] = lp[d] + gap
    x["speed_decision"] = other
'
check md-bf16 1 --model "$minddrive/model" --frame-file "$work/md.jsonl" --check "$work/md-decisions.jsonl" \
    --numerics bf16 --check-tolerance 1
grep -q "^check: 1 of 2 frames pass (bf16 criterion: .*near-tie, log-probability gap < 0.25, in 1 frames)" "$work/md-bf16.txt" \
    || fail "bf16: $(cat "$work/md-bf16.txt")"
sed -n 1p "$work/md-bf16.txt" | grep -q "a near-tie, reference log-probability gap 0.1 < 0.25 (speed_trajectory not compared).*: pass$" \
    || fail "bf16 frame 0: $(sed -n 1p "$work/md-bf16.txt")"
sed -n 2p "$work/md-bf16.txt" | grep -q "DIFFERS from the reference's .*gap 0.5).*: FAIL$" || fail "bf16 frame 1: $(sed -n 2p "$work/md-bf16.txt")"
check md-fp32 1 --model "$minddrive/model" --frame-file "$work/md.jsonl" --check "$work/md-decisions.jsonl" --check-tolerance 1
grep -q "^check: 0 of 2 frames pass" "$work/md-fp32.txt" || fail "fp32: $(cat "$work/md-fp32.txt")"

echo "== bad references and frames that are not the records' are refused before the load"
# refused_orion NAME WORDS ARGS...: refused, on the Orion model with the token frame file
refused_orion() {
    name=$1 words=$2
    shift 2
    refused "$name" "$words" --model "$orion/model" --frame-file "$work/orion.jsonl" "$@"
}
edit "$work/orion-ref.jsonl" "$work/bad-json.jsonl" 'r[1] = "{\"trajectory\": [1, 2"'
refused_orion bad-json "line 2: not JSON" --check "$work/bad-json.jsonl"
edit "$work/orion-ref.jsonl" "$work/bad-traj.jsonl" 'r[2]["trajectory"] = "north"'
refused_orion bad-traj "line 3: \"trajectory\" must be an array of numbers" --check "$work/bad-traj.jsonl"
edit "$work/orion-ref.jsonl" "$work/bad-null.jsonl" 'r[0]["trajectory"][3] = None'
refused_orion bad-null "line 1: \"trajectory\"\[3\] is null" --check "$work/bad-null.jsonl"
edit "$work/orion-ref.jsonl" "$work/bad-extra.jsonl" 'r[0]["extras"]["mu"][0] = "x"'
refused_orion bad-extra "line 1: extras.mu\[0\] is not a number" --check "$work/bad-extra.jsonl"
edit "$work/orion-ref.jsonl" "$work/dropped.jsonl" 'r[1]["status"] = "dropped"'
refused_orion dropped "line 2: status is dropped" --check "$work/dropped.jsonl"
edit "$work/orion-ref.jsonl" "$work/short.jsonl" 'r[1]["trajectory"] = r[1]["trajectory"][:10]; del r[1]["n_points"]'
refused_orion short "line 2: a trajectory of 5 points; line 1's has 6" --check "$work/short.jsonl"
edit "$work/orion-ref.jsonl" "$work/all-short.jsonl" '
for x in r:
    x["trajectory"] = x["trajectory"][:10]; del x["n_points"]'
refused_orion all-short "trajectories have 5 points; the model's have 6" --check "$work/all-short.jsonl"
printf '\n\n' > "$work/empty.jsonl"
refused_orion empty "no records" --check "$work/empty.jsonl"
refused_orion fixtures "one JSON object with \"cases\"" --check "$orion/cases.json"
refused_orion too-many "the run has 4 frames and .* only 3 records" --check "$work/orion-ref.jsonl" --frames 4
refused_orion seed "drew the planner's noise from seed 0, this run from 5" --check "$work/orion-ref.jsonl" --seed 5
edit "$work/orion.jsonl" "$work/swapped.jsonl" 'r.reverse()'
refused swapped "line 1 is the reference of frame 0, .*tokens_1.f32 (line 1 of the frame file): its frame was tokens_0.f32" \
    --model "$orion/model" --frame-file "$work/swapped.jsonl" --check "$work/orion-ref.jsonl"
edit "$work/orion.jsonl" "$work/command.jsonl" 'r[1]["command"] = 5'
refused command "its frame had command 4, this frame has 5" --model "$orion/model" --frame-file "$work/command.jsonl" \
    --check "$work/orion-ref.jsonl"
# references of another model kind
refused md-for-orion "records have a speed decision: the reference of a MindDrive model, not of Orion" \
    --model "$orion/model" --vision-tokens "$orion/tokens_0.f32" --check "$work/md-ref.jsonl"
refused orion-for-md "records have no speed decision: the reference of an Orion model, not of MindDrive" \
    --model "$minddrive/model" --vision-tokens "$minddrive/tokens_0.f32" --check "$work/orion-ref.jsonl"
"$vh_run" --backend cpu_generic --warmup 0 --json --frames 1 > "$work/openvla-ref.jsonl" 2>/dev/null || fail "an OpenVLA run"
refused_orion openvla-for-orion "line 1: an OpenVLA record" --check "$work/openvla-ref.jsonl"
refused orion-for-openvla "a driving model's record (\"trajectory\"; no \"action_ids\")" --check "$work/orion-ref.jsonl"
echo "vh-run --check: driving references pass, a moved value fails, bad references are refused"
