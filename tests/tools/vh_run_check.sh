#!/bin/sh
# vh-run's command line (issue 17): --check against the fixtures' reference (made by OpenVLA's own
# code in float64) passes, a doctored copy fails with exit status 1 and says which frames; vh-run's
# own --json lines serve as a reference too; --version, unknown options, every option in --help;
# a bad image is refused before the model loads; a one-frame run skips the warm-up; the load's
# progress line on a terminal only.
# usage: vh_run_check.sh VH_RUN SOURCE_ROOT PROJECT_VERSION
set -eu
vh_run=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=$2
version=$3
py=/usr/bin/python3
[ -x "$py" ] || { echo "no $py: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/built_program.sh"
vh_run=$(built_program "$vh_run" "$work")
ref=$src/tests/fixtures/reference/openvla-tiny.json
frames=$src/tests/fixtures/images/frames
fail() { echo "FAILED: $*"; exit 1; }

echo "== --check against the fixtures"
(cd "$work" && "$vh_run" --backend cpu_generic --check "$ref") > "$work/pass.txt" || fail "the fixtures do not pass: $(tail -3 "$work/pass.txt")"
grep -q "^check: 32 of 32 frames pass" "$work/pass.txt" || fail "no summary: $(tail -2 "$work/pass.txt")"
[ "$(grep -c ': pass$' "$work/pass.txt")" = 32 ] || fail "not 32 per-frame lines"
"$vh_run" --backend cpu_generic --check "$ref" --decode-positions openvla-hf440 > "$work/hf440.txt" || fail "hf440 positions do not pass"

echo "== a doctored reference fails"
"$py" - "$ref" "$work/doctored.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["cases"]
c[1]["action_ids"][3] += 1          # an action token
c[5]["prompt_ids"][4] += 1          # a prompt token
c[9]["action"][0] += 1e-3           # an action value, within a loose tolerance
json.dump(d, open(sys.argv[2], "w"))
PYEOF
set +e
# (its images found from the current folder: the copy is not in the repository)
(cd "$src" && "$vh_run" --backend cpu_generic --check "$work/doctored.json") > "$work/fail.txt"
rc=$?
set -e
[ $rc = 1 ] || fail "a doctored reference gave exit status $rc"
grep -q "^check: 29 of 32 frames pass" "$work/fail.txt" || fail "summary: $(grep '^check:' "$work/fail.txt")"
sed -n 2p "$work/fail.txt" | grep -q "action ids DIFFER.*FAIL$" || fail "frame 1: $(sed -n 2p "$work/fail.txt")"
sed -n 6p "$work/fail.txt" | grep -q "prompt ids DIFFER.*FAIL$" || fail "frame 5: $(sed -n 6p "$work/fail.txt")"
sed -n 10p "$work/fail.txt" | grep -q "max |d action| 0.001 .*FAIL$" || fail "frame 9: $(sed -n 10p "$work/fail.txt")"
set +e
(cd "$src" && "$vh_run" --backend cpu_generic --check "$work/doctored.json" --check-tolerance 0.01) > "$work/loose.txt"
rc=$?
set -e
[ $rc = 1 ] && grep -q "^check: 30 of 32 frames pass" "$work/loose.txt" || fail "--check-tolerance 0.01: $rc, $(grep '^check:' "$work/loose.txt")"

echo "== vh-run --json lines as the reference, the frames given with --image"
"$vh_run" --backend cpu_generic --json --image "$frames/frame_1.png" --image "$frames/frame_3.png" --instruction "open the drawer" > "$work/lines.jsonl"
"$vh_run" --backend cpu_generic --check "$work/lines.jsonl" --image "$frames/frame_3.png" --image "$frames/frame_1.png" \
    --instruction "open the drawer" > "$work/lines.txt" || fail "its own lines do not pass: $(cat "$work/lines.txt")"
grep -q "^check: 2 of 2 frames pass" "$work/lines.txt" || fail "$(cat "$work/lines.txt")"
set +e
"$vh_run" --backend cpu_generic --check "$work/lines.jsonl" --image "$frames/frame_2.png" --instruction "open the drawer" 2> "$work/norec.err" >/dev/null
rc=$?
set -e
[ $rc = 2 ] && grep -q "no record of image .*frame_2.png" "$work/norec.err" || fail "a frame without a record: $rc $(cat "$work/norec.err")"

echo "== the command line"
set +e
"$vh_run" --jsn 2> "$work/unknown.err"; rc_unknown=$?
"$vh_run" --frames 2> "$work/novalue.err"; rc_novalue=$?
"$vh_run" --verbose --backend cpu_generic --image "$work/missing.png" 2> "$work/missing.err" >/dev/null; rc_missing=$?
printf 'not a png' > "$work/bad.png"
"$vh_run" --verbose --backend cpu_generic --image "$frames/frame_0.png" --image "$work/bad.png" 2> "$work/bad.err" >/dev/null; rc_bad=$?
set -e
[ $rc_unknown = 2 ] && grep -q "unknown option --jsn" "$work/unknown.err" || fail "--jsn: $rc_unknown $(cat "$work/unknown.err")"
[ $rc_novalue = 2 ] && grep -q -- "--frames needs a value" "$work/novalue.err" || fail "--frames: $(cat "$work/novalue.err")"
for f in missing bad; do
    eval rc=\$rc_$f
    [ "$rc" = 2 ] && grep -q "$f.png" "$work/$f.err" || fail "$f image: $rc $(cat "$work/$f.err")"
    # refused before the load: the library logged nothing (--verbose logs every plugin loaded)
    ! grep -q "\[debug\]\|\[info\]" "$work/$f.err" || fail "$f image reported after the load started: $(cat "$work/$f.err")"
done
[ "$("$vh_run" --version)" = "vh-run (vlahybrid $version)" ] || fail "--version: $("$vh_run" --version)"
"$vh_run" --help > "$work/help.txt"
for flag in --model --image --instruction --unnorm-key --backend --threads --plugin-path --decode-positions --json \
            --verbose --frames --rate --policy --queue --deadline-ms --warmup --cpu-affinity --seed --check \
            --check-tolerance --split --mode --gpu-mem-budget --zone --trace --frames-in-flight --vision-tokens \
            --command --noise --version --frame-file --check-margin --numerics; do
    grep -q -- "^ *$flag\b\|, $flag\b\|; $flag\b" "$work/help.txt" || fail "--help does not describe $flag"
done

echo "== a one-frame run skips the warm-up; a stream keeps it"
"$vh_run" --verbose --backend cpu_generic --frames 1 2> "$work/one.err" >/dev/null
grep -q "0 warm-up frames" "$work/one.err" || fail "one frame: $(grep 'session ready' "$work/one.err")"
"$vh_run" --verbose --backend cpu_generic --frames 2 2> "$work/two.err" >/dev/null
grep -q "1 warm-up frames" "$work/two.err" || fail "two frames: $(grep 'session ready' "$work/two.err")"
"$vh_run" --verbose --backend cpu_generic --frames 1 --warmup 2 2> "$work/asked.err" >/dev/null
grep -q "2 warm-up frames" "$work/asked.err" || fail "--warmup 2: $(grep 'session ready' "$work/asked.err")"

echo "== the load's progress: on a terminal only"
"$vh_run" --backend cpu_generic --frames 1 2> "$work/piped.err" >/dev/null
! grep -q "loading:" "$work/piped.err" || fail "progress drawn into a pipe"
if command -v script >/dev/null; then
    script -qec "'$vh_run' --backend cpu_generic --frames 1" "$work/tty.log" >/dev/null
    grep -q "vh-run: loading: loading weights" "$work/tty.log" && grep -q "loading: warm-up\|loading: ready\|loading: starting stages" "$work/tty.log" \
        || fail "no progress line on a terminal: $(head -c 300 "$work/tty.log")"
else
    echo "no script(1): the terminal part skipped"
fi
echo "vh-run --check passes the fixtures and fails a doctored copy; the command line checks out"
