#!/bin/sh
# The example on cpu_generic with the tiny Orion and the tiny MindDrive, each with its camera front
# end, over a frame file written here: 3 camera frames of 2 interleaved streams (the bundled images
# as six cameras; stream 0 calibrated by lidar2img, stream 1 by intrinsics and extrinsics, as
# tests/tools/vh_run_frames.sh writes them), and 3 bad lines (not JSON, a missing image, a frame
# without its ego pose). Every good frame must be answered with status 0 and a trajectory, each bad
# line skipped with its message, the statistics and the memory printed, the exit status 0.
#   smoke_test.sh ORION_L20_XEON SOURCE_ROOT
set -eu
exe=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }
mkdir "$work/images"
cp "$src"/tests/fixtures/images/frames/frame_*.png "$work/images/"

# one line per frame: STREAM T (0.5 s apart) CALIBRATION (l2i or k+e); K of the 1600 x 900 rig times a
# camera's lidar2cam at yaw 60 c degrees
frame() {
    awk -v s="$1" -v t="$2" -v calib="$3" -v cmd="${4:-2}" -v pose="${5:-yes}" -v missing="${6:-}" 'BEGIN {
        pi = atan2(0, -1)
        K[0,0] = 1266; K[0,2] = 800; K[1,1] = 1266; K[1,2] = 450; K[2,2] = 1; K[3,3] = 1
        line = "{\"stream\": " s ", \"timestamp_ns\": " (1000000000 + 500000000 * t) ", \"command\": " cmd ", \"cameras\": ["
        for (c = 0; c < 6; c++) {
            yaw = c * pi / 3
            split("", E)
            E[0,0] = sin(yaw); E[0,1] = -cos(yaw); E[0,3] = 0
            E[1,2] = -1; E[1,3] = 1.5
            E[2,0] = cos(yaw); E[2,1] = sin(yaw); E[2,3] = 0.2
            E[3,3] = 1
            image = (missing != "" && c == 3) ? "images/missing.png" : "images/frame_" ((c + t + s) % 5) ".png"
            cam = "{\"name\": \"CAM_" c "\", \"image\": \"" image "\""
            if (calib == "l2i") cam = cam ", \"lidar2img\": " matrix("L")
            else cam = cam ", \"intrinsics\": " matrix("K") ", \"extrinsics\": " matrix("E")
            line = line (c ? ", " : "") cam "}"
        }
        line = line "]"
        if (pose == "yes") line = line ", \"ego_pose\": [[1, 0, 0, " 3 * t "], [0, 1, 0, " 10 * s "], [0, 0, 1, 1.8], [0, 0, 0, 1]]"
        line = line ", \"can_bus\": ["
        for (k = 0; k < 18; k++) line = line (k ? ", " : "") 0.1 * k
        print line "]}"
    }
    function matrix(which,    i, j, k, v, out) {
        out = "["
        for (i = 0; i < 4; i++) {
            out = out (i ? ", " : "") "["
            for (j = 0; j < 4; j++) {
                if (which == "K") v = K[i,j] + 0
                else if (which == "E") v = E[i,j] + 0
                else { v = 0; for (k = 0; k < 4; k++) v += K[i,k] * E[k,j] }
                out = out (j ? ", " : "") v
            }
            out = out "]"
        }
        return out "]"
    }'
}
{
    frame 0 0 l2i
    echo '{"stream": 1, "cameras": [ this is not JSON'
    frame 1 0 k+e
    frame 1 1 k+e 2 yes missing
    echo
    frame 1 1 k+e 2 no
    frame 0 1 l2i 3
} > "$work/frames.jsonl"

check() { # MODEL NAME
    out=$work/$2.out err=$work/$2.err
    set +e
    "$exe" --model "$1" --frames "$work" --backend cpu_generic --in-flight 2 --points 2 > "$out" 2> "$err"
    rc=$?
    set -e
    cat "$out" "$err"
    [ $rc -eq 0 ] || fail "$2: exit status $rc"
    [ "$(grep -c '^frame [0-9]* line [0-9]* stream [01] seq [0-9]*: status 0, [1-9][0-9]* points (' "$out")" -eq 3 ] \
        || fail "$2: not 3 frames answered with status 0 and a trajectory"
    grep -q '^frame 1 line 1 stream 0 ' "$out" && grep -q '^frame 2 line 3 stream 1 ' "$out" \
        && grep -q '^frame 3 line 7 stream 0 seq 1:' "$out" || fail "$2: frames out of order"
    grep -q '^frames: 6 lines, 3 skipped, 3 answered (3 ok, 0 failed), 2 stream(s)$' "$out" || fail "$2: the count line"
    grep -q '^statistics: 3 submitted, 3 completed, 0 failed' "$out" || fail "$2: no statistics"
    grep -q 'submit -> trajectory *p50 .* (3)$' "$out" && grep -q 'stage 0 cpu_generic pass' "$out" \
        || fail "$2: no latencies"
    grep -q '^memory: GPU 0.00 GB' "$out" || fail "$2: no memory line"
    grep -q 'skipped: line 2: not JSON' "$err" || fail "$2: the bad JSON line not reported"
    grep -q 'skipped: line 4: camera 3: .*missing.png: cannot open' "$err" || fail "$2: the missing image not reported"
    grep -q 'line 6 (stream 1) refused: .*ego_pose' "$err" || fail "$2: the frame without a pose not refused"
}
check "$src/tests/fixtures/orion/model-front" orion
grep -q 'status 0, 6 points' "$work/orion.out" || fail "orion: not 6 waypoints"
check "$src/tests/fixtures/minddrive/model-front" minddrive
grep -q 'status 0, 20 points .*speed decision [0-6];' "$work/minddrive.out" || fail "minddrive: no path and speed decision"

# no frames is a usage error (2); a file that does not exist a clear failure (1)
set +e
"$exe" --backend cpu_generic > /dev/null 2>&1; [ $? -eq 2 ] || fail "no --frames: not status 2"
"$exe" --frames "$work/none.jsonl" --backend cpu_generic 2> "$work/none.err"; rc=$?
set -e
[ $rc -eq 1 ] && grep -q 'none.jsonl: No such file' "$work/none.err" || fail "a missing file: status $rc"
echo "orion_l20_xeon smoke test: ok"
