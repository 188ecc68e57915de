#!/bin/sh
# vh-run on an Orion model (tests/fixtures/orion/model, the tiny converted checkpoint): the frame of
# case set0_cmd2 of cases.json (tokens_0.f32, command 2, that case's eps as --noise) prints the
# reference trajectory, mu, log_sigma and every mode's trajectory within 1e-4 relative; two stages
# pipelined and packed print the same; frames without --noise repeat with the same --seed and not
# with another; an Orion model without --vision-tokens, tokens of the wrong size, a command out of
# range, and --vision-tokens for an OpenVLA model are refused with status 2 and a message.
# usage: vh_run_orion.sh VH_RUN ORION_FIXTURE_DIR
set -eu
vh_run=$1
fix=$2
py=/usr/bin/python3
[ -x "$py" ] || { echo "no $py: skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/built_program.sh"
vh_run=$(built_program "$vh_run" "$out")
model="$fix/model"
case_name=set0_cmd2

# the case's eps, as raw little-endian float32
"$py" - "$fix/cases.json" "$case_name" "$out/eps.f32" <<'PY'
import json, struct, sys
cases = {c["name"]: c for c in json.load(open(sys.argv[1]))["cases"]}
c = cases[sys.argv[2]]
assert c["token_set"] == 0 and c["command"] == 2, c["name"]
open(sys.argv[3], "wb").write(struct.pack("<%df" % len(c["eps"]), *c["eps"]))
PY

run() { # NAME ARGS...: vh-run --json on the case's frame, must exit 0
    name=$1
    shift
    rc=0
    "$vh_run" --json --model "$model" --command 2 "$@" > "$out/$name.json" 2> "$out/$name.err" || rc=$?
    [ "$rc" -eq 0 ] || { echo "$name: exit status $rc"; cat "$out/$name.err"; exit 1; }
}
run one --backend cpu_generic --vision-tokens "$fix/tokens_0.f32" --noise "$out/eps.f32"
"$py" - "$fix/cases.json" "$case_name" "$out/one.json" <<'PY'
import json, sys
c = {c["name"]: c for c in json.load(open(sys.argv[1]))["cases"]}[sys.argv[2]]
lines = open(sys.argv[3]).read().splitlines()
assert len(lines) == 1, "%d lines" % len(lines)
f = json.loads(lines[0])
assert f["status"] == "ok" and f["command"] == 2 and f["n_points"] == 6, f

def close(name, got, want):
    assert len(got) == len(want), "%s: %d values, reference %d" % (name, len(got), len(want))
    scale = max(abs(w) for w in want)
    err = max(abs(g - w) for g, w in zip(got, want)) / scale
    assert err <= 1e-4, "%s off by %g (relative to %g)" % (name, err, scale)
    return err

worst = close("trajectory", f["trajectory"], c["trajectory"])
ex = f["extras"]
modes = []  # cases.json's preds are per-step offsets [mode][step][2]; the extra is their cumulative sum
for m in range(6):
    x = y = 0.0
    for t in range(6):
        x += c["preds"][(m * 6 + t) * 2]
        y += c["preds"][(m * 6 + t) * 2 + 1]
        modes += [x, y]
worst = max(worst, close("mode_trajectories", ex["mode_trajectories"], modes))
worst = max(worst, close("mu", ex["mu"], c["mu"]))
worst = max(worst, close("log_sigma", ex["log_sigma"], c["log_sigma"]))
print("%s: trajectory, modes, mu, log_sigma within %.2g of cases.json" % (c["name"], worst))
PY

# several frames (two token files, cycling), one stage and two, serial, pipelined and packed
tok="--vision-tokens $fix/tokens_0.f32 --vision-tokens $fix/tokens_1.f32 --frames 4 --noise $out/eps.f32"
run serial --backend cpu_generic --mode serial $tok
run pipeline --backend cpu_generic,cpu_generic --split 1 --mode pipeline $tok
run packed --backend cpu_generic --mode packed $tok
"$py" - "$out/serial.json" "$out/pipeline.json" "$out/packed.json" "$out/one.json" <<'PY'
import json, sys
runs = [[json.loads(l) for l in open(p)] for p in sys.argv[1:4]]
one = json.loads(open(sys.argv[4]).readline())
for r in runs:
    assert len(r) == 4 and all(f["status"] == "ok" for f in r), r
    assert [f["vision_tokens"].rsplit("/", 1)[1] for f in r] == ["tokens_0.f32", "tokens_1.f32"] * 2
assert runs[0][0]["trajectory"] == one["trajectory"], "frame 1 differs from the single frame"
assert runs[0][0]["trajectory"] == runs[0][2]["trajectory"], "the same frame twice differs"
assert runs[0][0]["trajectory"] != runs[0][1]["trajectory"], "the tokens do not matter"
assert [f["trajectory"] for f in runs[1]] == [f["trajectory"] for f in runs[0]], "pipelined differs from serial"
for a, b in zip(runs[2], runs[0]):
    for x, y in zip(a["trajectory"], b["trajectory"]):
        assert abs(x - y) <= 1e-5 * (1 + abs(y)), "packed differs from serial"
print("4 frames: serial, pipelined over two stages and packed agree")
PY

# noise from the seed: the same seed repeats, another differs, and neither is the case's eps
run seed7a --backend cpu_generic --vision-tokens "$fix/tokens_0.f32" --frames 2 --seed 7
run seed7b --backend cpu_generic --vision-tokens "$fix/tokens_0.f32" --frames 2 --seed 7
run seed8 --backend cpu_generic --vision-tokens "$fix/tokens_0.f32" --frames 2 --seed 8
"$py" - "$out/seed7a.json" "$out/seed7b.json" "$out/seed8.json" <<'PY'
import json, sys
a, b, c = ([json.loads(l)["trajectory"] for l in open(p)] for p in sys.argv[1:4])
assert a == b, "--seed 7 twice differs"
assert a != c, "--seed 7 and --seed 8 give the same trajectories"
assert a[0] != a[1], "two sequences drew the same noise"
print("seeded noise: repeatable, per seed and per frame")
PY

# the text output
"$vh_run" --model "$model" --backend cpu_generic --vision-tokens "$fix/tokens_0.f32" --command 2 > "$out/text.txt"
grep -q '^frame 1 .*tokens_0.f32: trajectory \[(' "$out/text.txt" || { echo "no text trajectory line"; cat "$out/text.txt"; exit 1; }

refused() { # WHAT MESSAGE ARGS...: vh-run must exit 2 with MESSAGE on stderr
    what=$1 message=$2
    shift 2
    rc=0
    "$vh_run" "$@" > "$out/refused.txt" 2> "$out/refused.err" || rc=$?
    [ "$rc" -eq 2 ] || { echo "$what: exit status $rc, not 2"; cat "$out/refused.err"; exit 1; }
    grep -q -- "$message" "$out/refused.err" || { echo "$what: no '$message' in:"; cat "$out/refused.err"; exit 1; }
}
refused "no tokens" "is an Orion model: give each frame's vision tokens with --vision-tokens FILE" --model "$model"
refused "wrong size" "must hold 33856 little-endian float32" --model "$model" --vision-tokens "$out/eps.f32"
refused "short noise" "must hold 32 little-endian float32" --model "$model" --vision-tokens "$fix/tokens_0.f32" \
    --noise "$fix/tokens_0.f32"
refused "command 6" "commands are 0..5" --model "$model" --vision-tokens "$fix/tokens_0.f32" --command 6
refused "an image" "not --image" --model "$model" --vision-tokens "$fix/tokens_0.f32" --image x.png
refused "OpenVLA" "are for Orion models" --vision-tokens "$fix/tokens_0.f32"
"$vh_run" --help | grep -q -- '--vision-tokens FILE' || { echo "--help does not describe --vision-tokens"; exit 1; }
echo "refusals: no tokens, tokens or noise of the wrong size, command 6, an image, tokens for OpenVLA"
