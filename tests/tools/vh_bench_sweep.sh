#!/bin/sh
# vh-bench's sweeps on the bundled tiny model over two CPU stages: every combination of the lists
# runs once a round; the rounds alternate their order; the table's medians and paired ratios equal
# what the per-run lines give when recomputed here; CSV has a row a run; bad lists and unknown
# options are refused before anything loads.
# vh-bench-plot draws the CSV where matplotlib exists and says how to get it where it does not.
# usage: vh_bench_sweep.sh VH_BENCH VH_BENCH_PLOT
set -eu
vh_bench=$1
plot=$2
py=/usr/bin/python3
[ -x "$py" ] || { echo "no $py: skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. "$(dirname "$0")/built_program.sh"
vh_bench=$(built_program "$vh_bench" "$out")
two="--backend cpu_generic,cpu_generic --frames 4 --warmup 1"

# JSON: a line a run, then the sweep's table
"$vh_bench" $two --split 1,2 --mode serial,pipeline --rounds 3 --json > "$out/sweep.json" 2> "$out/sweep.err" ||
    { cat "$out/sweep.err"; exit 1; }
"$py" - "$out/sweep.json" <<'PY'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs, table = lines[:-1], lines[-1]
assert len(runs) == 2 * 2 * 3, len(runs)
assert all(r["failures"] == 0 and r["frames"] == 4 and r["frames_per_s"] > 0 for r in runs)
# per split, the rounds run the modes forwards, then backwards, then forwards
for split in (1, 2):
    order = [(r["round"], r["mode"]) for r in runs if r["llm_split"] == split]
    assert order == [(1, "serial"), (1, "pipeline"), (2, "pipeline"), (2, "serial"), (3, "serial"), (3, "pipeline")], order
rows = {(r["llm_split"], r["mode"]): r for r in table["sweep"]}
assert table["rounds"] == 3 and len(rows) == 4, table
for (split, mode), row in rows.items():
    mine = [r for r in runs if r["llm_split"] == split and r["mode"] == mode]
    fps = [r["frames_per_s"] for r in mine]
    assert row["runs"] == 3 and abs(row["frames_per_s"] - statistics.median(fps)) < 1e-9 * max(fps), (row, fps)
    assert row["frames_per_s_min"] == min(fps) and row["frames_per_s_max"] == max(fps)
    if mode == "serial":
        assert "ratio_to_first_mode" not in row, row
    else:
        serial = {r["round"]: r["frames_per_s"] for r in runs if r["llm_split"] == split and r["mode"] == "serial"}
        ratios = [r["frames_per_s"] / serial[r["round"]] for r in mine]
        assert abs(row["ratio_to_first_mode"] - statistics.median(ratios)) < 1e-9, (row, ratios)
print("sweep: %d runs, table rows and paired ratios as recomputed" % len(runs))
PY

# CSV: a header and a row a run
"$vh_bench" $two --split 1 --mode serial,packed --frames-in-flight 2,3 --format csv > "$out/sweep.csv" 2> "$out/csv.err" ||
    { cat "$out/csv.err"; exit 1; }
"$py" - "$out/sweep.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
got = [(r["mode"], r["frames_in_flight"]) for r in rows]
assert got == [("serial", "1"), ("serial", "1"), ("packed", "2"), ("packed", "3")], got
assert all(r["llm_split"] == "1" and r["failures"] == "0" and float(r["actions_per_s"]) > 0 for r in rows), rows
assert all(float(r["rss_mb"]) > 0 for r in rows), rows
print("csv: %d rows" % len(rows))
PY

# the plot: a PNG with matplotlib; without it, status 3 and what to install; a CSV that is not
# vh-bench's, status 2
rc=0
"$py" "$plot" "$out/sweep.csv" "$out/sweep.png" > "$out/plot.out" 2>&1 || rc=$?
if "$py" -c 'import matplotlib' 2> /dev/null; then
    [ "$rc" -eq 0 ] && head -c 8 "$out/sweep.png" | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a' ||
        { echo "plot: rc $rc"; cat "$out/plot.out"; exit 1; }
    echo "plot: a PNG"
else
    [ "$rc" -eq 3 ] && grep -q "python3-matplotlib" "$out/plot.out" || { echo "plot: rc $rc"; cat "$out/plot.out"; exit 1; }
    echo "plot: no matplotlib, said so"
fi
printf 'a,b\n1,2\n' > "$out/other.csv"
rc=0
"$py" "$plot" "$out/other.csv" "$out/x.png" > "$out/plot.out" 2>&1 || rc=$?
[ "$rc" -eq 2 ] && grep -q "not vh-bench" "$out/plot.out" || { echo "plot of another CSV: rc $rc"; cat "$out/plot.out"; exit 1; }

# refusals: exit status 2 and the reason, before a model loads
refuse() { # EXPECTED-TEXT ARGS...
    want=$1
    shift
    rc=0
    "$vh_bench" "$@" > /dev/null 2> "$out/refuse.err" || rc=$?
    [ "$rc" -eq 2 ] && grep -q -- "$want" "$out/refuse.err" || { echo "vh-bench $*: rc $rc"; cat "$out/refuse.err"; exit 1; }
}
refuse "unknown option --jsn" --jsn
refuse "unknown option --frams" --frams 3
refuse "--mode is" --mode serial,fast
refuse "empty or overlong" --split 1,,2
refuse "needs a number" --frames-in-flight 2,40
refuse "combinations" --split 0,1,2,3,4,5,6,7 --mode serial,pipeline,packed --frames-in-flight 1,2,3
refuse "--format is" --format xml
"$vh_bench" --version | grep -q "^vh-bench (vlahybrid [0-9]" || { echo "--version"; exit 1; }
echo "refusals ok"
