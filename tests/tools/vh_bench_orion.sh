#!/bin/sh
# vh-bench on an Orion model (the tiny converted fixture): synthetic frames (seeded tokens, commands
# 0..5 in turn) in every mode, one stage and two, closed loop and --rate; each run times every frame
# without a failure and reports a positive rate; its JSON numbers are the shortest that read back.
# On the MindDrive fixture the report and the JSON name MindDrive, not Orion.
# usage: vh_bench_orion.sh VH_BENCH ORION_MODEL_DIR [MINDDRIVE_MODEL_DIR]
set -eu
vh_bench=$1
model=$2
minddrive=${3:-}
py=/usr/bin/python3
[ -x "$py" ] || { echo "no $py: skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/built_program.sh"
vh_bench=$(built_program "$vh_bench" "$out")

bench() { # NAME ARGS...
    name=$1
    shift
    rc=0
    "$vh_bench" --model "$model" --json --frames 12 --warmup 2 --seed 3 "$@" > "$out/$name.json" 2> "$out/$name.err" || rc=$?
    [ "$rc" -eq 0 ] || { echo "$name: exit status $rc"; cat "$out/$name.err"; exit 1; }
    "$py" - "$out/$name.json" "$name" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["family"] == "orion" and r["orion_frames"]["vision_tokens"] == 529, r
assert r["frames"] == 12 and r["failures"] == 0 and r["frames_per_s"] > 0, r
assert r["end_to_end_ms"]["p50"] > 0, r
print("%s: %.1f actions/s, end to end p50 %.2f ms (%s, %d in flight)"
      % (sys.argv[2], r["frames_per_s"], r["end_to_end_ms"]["p50"], r["mode"], r["frames_in_flight"]))
PY
}
bench serial --backend cpu_generic --mode serial
bench packed --backend cpu_generic --mode packed --frames-in-flight 4
bench pipeline2 --backend cpu_generic,cpu_generic --split 1 --mode pipeline
bench serial2 --backend cpu_generic,cpu_generic --split 2 --mode serial
bench packed2 --backend cpu_generic,cpu_generic --split 1 --mode packed
bench rate --backend cpu_generic --rate 200

# the text report names the synthetic input
"$vh_bench" --model "$model" --frames 3 --warmup 1 --backend cpu_generic > "$out/text.txt"
grep -q '^input    Orion: synthetic vision tokens 529 x ' "$out/text.txt" || { cat "$out/text.txt"; exit 1; }
rc=0
"$vh_bench" --model "$model" --image x.png > /dev/null 2> "$out/image.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q 'not --image' "$out/image.err" || { echo "--image accepted for Orion"; exit 1; }
"$py" "$(dirname "$0")/json_numbers.py" "$out"/*.json

"$vh_bench" --help | grep -q "^Orion and MindDrive models: synthetic frames" || { echo "--help: no MindDrive"; exit 1; }

[ -n "$minddrive" ] || exit 0
"$vh_bench" --model "$minddrive" --frames 3 --warmup 1 --backend cpu_generic > "$out/md.txt"
grep -q '^input    MindDrive: synthetic vision tokens ' "$out/md.txt" || { echo "MindDrive: $(grep input "$out/md.txt")"; exit 1; }
"$vh_bench" --model "$minddrive" --json --frames 3 --warmup 1 --backend cpu_generic > "$out/md.json"
"$py" -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["family"] == "minddrive", r["family"]' "$out/md.json"
rc=0
"$vh_bench" --model "$minddrive" --image x.png > /dev/null 2> "$out/md_image.err" || rc=$?
[ "$rc" -eq 2 ] && grep -q 'a MindDrive model' "$out/md_image.err" || { echo "MindDrive --image: $(cat "$out/md_image.err")"; exit 1; }
