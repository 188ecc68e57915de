#!/bin/sh
# The example for a second on the tiny model with cpu_generic over the bundled frames: it must
# exit 0, print a statistics line per half second and the totals, and answer every frame.
#   smoke_test.sh OPENVLA_ORIN FRAMES_DIR
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$1" --frames "$2" --backend cpu_generic --rate 10 --seconds 1 --stats-every 0.5 --quiet > "$out"
cat "$out"
[ "$(grep -c '^stats t=' "$out")" -ge 2 ] || { echo "fewer than 2 statistics lines"; exit 1; }
grep -q '^total: .* [1-9][0-9]* actions' "$out" || { echo "no totals line with actions"; exit 1; }
# the totals add up: every accepted frame is an action, dropped, expired or failed (and none failed)
awk '/^total:/ { n = $2; a = $4; d = $6; e = $8; f = $10;
  if (n != a + d + e + f || f != 0) { print "frames " n " != " a "+" d "+" e "+" f; exit 1 } }' "$out"
# a missing source is a usage error (status 2), a folder without images a clear failure (1)
set +e
"$1" --backend cpu_generic > /dev/null 2>&1; [ $? -eq 2 ] || { echo "no source: not status 2"; exit 1; }
empty=$(mktemp -d)
"$1" --frames "$empty" --backend cpu_generic 2> "$out"; rc=$?
rmdir "$empty"
[ $rc -eq 1 ] && grep -q 'no .png or .jpg images' "$out" || { echo "empty folder: status $rc"; cat "$out"; exit 1; }
echo "openvla_orin smoke test: ok"
