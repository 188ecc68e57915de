#!/bin/sh
# vh-run --json prints every round of each frame's prompt ("prompt_rounds": name, ids, image_position,
# n_image_rows), against the released code's ids in the fixtures: Orion's one round
# (tests/fixtures/orion/cases.json, -200 where the image goes), MindDrive's decision and action rounds
# (tests/fixtures/minddrive/cases.json; the decision's final speed token is never run, so not
# printed), and the bundled OpenVLA model's one round (its prompt_ids, the image after BOS).
# usage: vh_run_prompt_rounds.sh VH_RUN SOURCE_ROOT
set -eu
vh_run=$1
fix=$2/tests/fixtures
py=/usr/bin/python3
[ -x "$py" ] || { echo "no $py: skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/built_program.sh"
vh_run=$(built_program "$vh_run" "$out")

run() { # NAME ARGS...: vh-run --json, must exit 0
    name=$1
    shift
    rc=0
    "$vh_run" --json --backend cpu_generic "$@" > "$out/$name.json" 2> "$out/$name.err" || rc=$?
    [ "$rc" -eq 0 ] || { echo "$name: exit status $rc"; cat "$out/$name.err"; exit 1; }
}
run orion --model "$fix/orion/model" --vision-tokens "$fix/orion/tokens_0.f32" --command 2 --frames 2
run minddrive --model "$fix/minddrive/model" --vision-tokens "$fix/minddrive/tokens_0.f32" --command 4
run openvla --frames 2

"$py" - "$fix" "$out" <<'PY'
import json, sys
fix, out = sys.argv[1:3]

def frames(name):
    return [json.loads(l) for l in open("%s/%s.json" % (out, name))]

def against(what, got, want, dropped_tail=0):
    """A printed round against reference ids holding -200 at the image (and ids never run after)."""
    image = want.index(-200)
    text = want[:image] + want[image + 1:len(want) - dropped_tail]
    assert got["ids"] == text, "%s: ids %s, the reference's %s" % (what, got["ids"], text)
    assert got["image_position"] == image, "%s: image at %d, the reference's %d" % (what, got["image_position"], image)

orion = json.load(open(fix + "/orion/cases.json"))
for f in frames("orion"):
    (r,) = f["prompt_rounds"]
    assert r["name"] == "prompt" and r["n_image_rows"] == orion["n_vision_tokens"], r
    against("orion", r, orion["prompt_ids"])
    assert r["image_position"] == orion["image_index"]
    assert len(r["ids"]) + r["n_image_rows"] == orion["sequence_length"]

md = json.load(open(fix + "/minddrive/cases.json"))
case = [c for c in md["cases"] if c["command"] == 4][0]
(f,) = frames("minddrive")
decision, action = f["prompt_rounds"]
assert (decision["name"], action["name"]) == ("decision", "action"), f["prompt_rounds"]
assert case["decision_prompt_ids"][-1] == md["special_tokens"]["<maintain_moderate_speed>"]
against("minddrive decision", decision, case["decision_prompt_ids"], dropped_tail=1)
against("minddrive action", action, case["action_prompt_ids"])
assert decision["n_image_rows"] == action["n_image_rows"] == md["n_vision_tokens"]

for f in frames("openvla"):
    (r,) = f["prompt_rounds"]
    assert r["name"] == "prompt" and r["ids"] == f["prompt_ids"] and r["image_position"] == 1, r
    assert r["ids"][0] == 1 and r["ids"][-1] == 29871 and r["n_image_rows"] > 0, r
print("prompt_rounds: Orion's round, MindDrive's two and OpenVLA's as the references have them")
PY
