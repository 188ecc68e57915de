#!/bin/sh
# vh-run --rate: frames submitted by the clock as a camera would, under policy "latest" with a
# one-frame queue, under a 1 ms deadline, and under policy "reject" (the bundled model and frames).
# Each run must exit 0, print one line per frame and the statistics block, answer every accepted
# frame (in submission order, by its id), and its counts must add up:
#   completed + dropped + expired + cancelled + failed == submitted,  submitted + rejected == frames.
# usage: vh_run_rate.sh VH_RUN
set -eu
vh_run=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/built_program.sh"
vh_run=$(built_program "$vh_run" "$out")

fail() { echo "$run: $*"; cat "$out/$run.txt" "$out/$run.err"; exit 1; }
# The number after KEY on the statistics' "frames" line.
count() { awk -v key="$1" '$1 == "frames" { for (i = 2; i < NF; i += 2) if ($i == key) print $(i + 1) }' "$out/$run.txt"; }
lines() { grep -c -- "$1" "$out/$run.txt" || true; }

# run NAME FRAMES ARGS...: run vh-run, check what holds under any policy, leave the counts in
# submitted rejected completed dropped expired cancelled failed.
run_vh_run() {
    run=$1 frames=$2
    shift 2
    rc=0
    "$vh_run" --backend cpu_generic --frames "$frames" "$@" > "$out/$run.txt" 2> "$out/$run.err" || rc=$?
    [ "$rc" -eq 0 ] || fail "exit status $rc"
    grep -q '^statistics:$' "$out/$run.txt" || fail "no statistics block"
    for key in submitted rejected completed dropped expired cancelled failed unanswered; do
        v=$(count $key)
        case $v in ''|*[!0-9]*) fail "no count '$key' in the statistics";; esac
        eval "$key=$v"
    done
    [ "$unanswered" -eq 0 ] || fail "$unanswered accepted frames unanswered"
    [ $((completed + dropped + expired + cancelled + failed)) -eq "$submitted" ] ||
        fail "completed $completed + dropped $dropped + expired $expired + cancelled $cancelled + failed $failed != submitted $submitted"
    [ $((submitted + rejected)) -eq "$frames" ] || fail "submitted $submitted + rejected $rejected != $frames frames"
    [ "$failed" -eq 0 ] || fail "$failed frames failed"
    # The frame lines agree with the counts, and the answers come in submission order, ids 1, 2, ...
    [ "$(lines '^frame ')" -eq "$frames" ] || fail "not one line per frame"
    [ "$(lines ': action \[')" -eq "$completed" ] || fail "not one action line per completed frame"
    [ "$(lines ': frame dropped for a newer one$')" -eq "$dropped" ] || fail "dropped lines != dropped count"
    [ "$(lines ': frame deadline expired$')" -eq "$expired" ] || fail "expired lines != expired count"
    [ "$(lines '^frame - .*: queue full$')" -eq "$rejected" ] || fail "refused lines != rejected count"
    awk -v n="$submitted" '/^frame [0-9]/ { if ($2 != ++id) bad = 1 } END { exit bad || id != n }' \
        "$out/$run.txt" || fail "answers not frames 1..$submitted in order"
    # The latencies: one end-to-end sample per completed frame, p50 <= p95 <= max.
    awk -v n="$completed" '$1 == "end_to_end" { seen = 1; if ($2 != n || (n > 0 && !(0 < $3 && $3 <= $4 && $4 <= $5))) bad = 1 }
        END { exit !seen || bad }' "$out/$run.txt" || fail "end_to_end latency row wrong"
    for part in queue_wait compute vision prefill decode stage0_pass; do
        grep -q "^  $part " "$out/$run.txt" || fail "no $part latency row"
    done
    echo "$run: $frames frames, submitted $submitted, rejected $rejected, completed $completed, dropped $dropped, expired $expired, cancelled $cancelled"
}

# 200 Hz into a one-frame queue: frames are displaced, never refused or expired, and the last one
# (nothing comes after it) is always computed.
run_vh_run latest 40 --rate 200 --policy latest --queue 1
[ "$rejected" -eq 0 ] && [ "$expired" -eq 0 ] || fail "rejected or expired frames without reject or a deadline"
[ "$completed" -ge 1 ] || fail "the last frame was not computed"

# 1000 Hz with a 1 ms deadline: frames expire or are displaced; none is refused.
run_vh_run deadline 40 --rate 1000 --deadline-ms 1
[ "$rejected" -eq 0 ] || fail "rejected frames without policy reject"

# Policy reject: a full queue refuses (counted, not fatal); what was accepted is all computed.
run_vh_run reject 20 --rate 500 --policy reject --queue 1
[ "$dropped" -eq 0 ] && [ "$completed" -eq "$submitted" ] || fail "accepted frames not all computed"
[ "$submitted" -ge 1 ] || fail "the first frame, into an empty queue, was refused"

run=arguments
"$vh_run" --help > "$out/$run.txt" 2> "$out/$run.err" || fail "--help failed"
grep -q -- '--rate HZ' "$out/$run.txt" || fail "--help does not describe --rate"
if "$vh_run" --policy sometimes > "$out/$run.txt" 2> "$out/$run.err"; then fail "--policy sometimes accepted"; fi
