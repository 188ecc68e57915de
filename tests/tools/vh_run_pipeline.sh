#!/bin/sh
# vh-run on two CPU stages, pipelined, gives the same actions as serially and as one stage, and so
# does packed decoding
# (the bundled model and frames; the timing fields are dropped before comparing).
# usage: vh_run_pipeline.sh VH_RUN
set -eu
vh_run=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/built_program.sh"
vh_run=$(built_program "$vh_run" "$out")
actions() { sed 's/,"vision_ms".*//' "$1"; }

"$vh_run" --json --backend cpu_generic > "$out/one.json"
"$vh_run" --json --backend cpu_generic,cpu_generic --split 2 --mode serial > "$out/serial.json"
"$vh_run" --json --backend cpu_generic,cpu_generic --split 2 --mode pipeline --trace "$out/trace.json" > "$out/pipeline.json"
"$vh_run" --json --backend cpu_generic,cpu_generic --split 1 --mode pipeline > "$out/pipeline1.json"
"$vh_run" --json --backend cpu_generic --mode packed > "$out/packed.json"
"$vh_run" --json --backend cpu_generic,cpu_generic --split 1 --mode packed > "$out/packed2.json"

frames=$(wc -l < "$out/one.json")
[ "$frames" -ge 3 ] || { echo "only $frames frames"; exit 1; }
grep -q '"status":"ok"' "$out/one.json" || { echo "no action"; exit 1; }
actions "$out/one.json" > "$out/one.actions"
for run in serial pipeline pipeline1 packed packed2; do
    if ! actions "$out/$run.json" | cmp -s - "$out/one.actions"; then
        echo "vh-run $run differs from one stage:"
        actions "$out/$run.json" | diff "$out/one.actions" - || true
        exit 1
    fi
done
grep -q '"traceEvents"' "$out/trace.json" || { echo "no trace written"; exit 1; }
echo "$frames frames: one stage, serial split 2, pipeline split 2 and 1, packed (one and two stages) give the same actions"
