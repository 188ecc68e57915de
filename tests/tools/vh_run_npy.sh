#!/bin/sh
# .npy inputs (issue 25): numpy (/usr/bin/python3, the independent writer) saves arrays at test time.
# The reader (tools/npy_file.c, through npy_dump) gives back numpy's own float32 values bit for bit:
# '<f4' in format versions 1.0, 2.0 and 3.0, every one of the 65536 float16 bit patterns converted
# as numpy's astype(float32) converts them (subnormals, infinities, NaN payloads), a leading batch
# dimension of 1; raw float32 files still read. Broken files are refused with a message naming
# the problem: truncated, bad magic, wrong dtype, big-endian, wrong shape, Fortran order, an
# unknown header key, bytes after the array; 150 seeded corruptions are read or refused, never a
# crash (the sanitized CI build sees any bad access). Then vh-run on the tiny Orion model: tokens and noise
# as .npy (float32 and float16) give the same trajectory as the raw float32 of the same values,
# and a bad .npy stops it with status 2 before the model loads.
# usage: vh_run_npy.sh VH_RUN NPY_DUMP ORION_FIXTURE_DIR
set -eu
py=/usr/bin/python3
[ -x "$py" ] && "$py" -c "import numpy" 2>/dev/null || { echo "no numpy in $py: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/built_program.sh"
vh_run=$(built_program "$1" "$work")
dump=$(built_program "$2" "$work")
fix=$3
fail() { echo "FAILED: $*"; exit 1; }

"$py" - "$work" <<'PY'
import sys, numpy as np
from numpy.lib import format as npf
w = sys.argv[1]
rng = np.random.default_rng(25)
a = rng.standard_normal((3, 5)).astype('<f4')
for v in [(1, 0), (2, 0), (3, 0)]:
    with open(f"{w}/v{v[0]}.npy", "wb") as f:
        npf.write_array(f, a, version=v)
a.tofile(f"{w}/a.f32")
np.save(f"{w}/batch.npy", a.reshape(1, 3, 5))
np.save(f"{w}/a.npy", a)
# every float16 bit pattern, and numpy's float32 of each
h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view('<f2').reshape(256, 256)
np.save(f"{w}/half.npy", h)
with np.errstate(invalid="ignore"):
    h.astype('<f4').tofile(f"{w}/half_want.f32")
# broken files
raw = open(f"{w}/a.npy", "rb").read()
open(f"{w}/truncated.npy", "wb").write(raw[:-3])
open(f"{w}/badmagic.npy", "wb").write(b"\x93NUMPZ" + raw[6:])
open(f"{w}/trailing.npy", "wb").write(raw + b"\0\0\0\0")
np.save(f"{w}/f8.npy", a.astype('<f8'))
np.save(f"{w}/i4.npy", a.astype('<i4'))
np.save(f"{w}/bigendian.npy", a.astype('>f4'))
np.save(f"{w}/shape.npy", a.reshape(5, 3))
np.save(f"{w}/fortran.npy", np.asfortranarray(a))
hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 5), 'extra': 1, }"
hdr = hdr + " " * (64 - 10 - len(hdr) - 1) + "\n"
open(f"{w}/extrakey.npy", "wb").write(b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr.encode() + a.tobytes())
PY

echo "== the reader against numpy"
for f in v1 v2 v3 batch a; do
    "$dump" "$work/$f.npy" "$work/$f.out" 3 5 || fail "$f.npy refused"
    cmp -s "$work/$f.out" "$work/a.f32" || fail "$f.npy: other values than numpy's"
done
"$dump" "$work/a.f32" "$work/raw.out" 3 5 && cmp -s "$work/raw.out" "$work/a.f32" || fail "raw float32"
"$dump" "$work/half.npy" "$work/half.out" 256 256 || fail "float16 refused"
cmp -s "$work/half.out" "$work/half_want.f32" || fail "float16: other float32 values than numpy's astype(float32)"

refused() { # NAME DIMS WORDS: npy_dump refuses NAME.npy with a message containing WORDS
    name=$1 dims=$2 words=$3
    set +e
    # shellcheck disable=SC2086
    "$dump" "$work/$name.npy" "$work/x.out" $dims 2> "$work/$name.err"
    rc=$?
    set -e
    [ $rc = 2 ] || fail "$name.npy: exit status $rc"
    grep -q "$words" "$work/$name.err" || fail "$name.npy: $(cat "$work/$name.err")"
}
refused truncated "3 5" "truncated"
refused badmagic "3 5" "not a .npy file"
refused trailing "3 5" "bytes after the array"
refused f8 "3 5" "dtype '<f8'"
refused i4 "3 5" "dtype '<i4'"
refused bigendian "3 5" "big-endian"
refused shape "3 5" "has shape (5, 3); the array are 3 x 5"
refused fortran "3 5" "Fortran order"
refused extrakey "3 5" "unknown key 'extra'"
refused a "15" "has shape (3, 5)"

echo "== seeded corruptions of a .npy file: read or refused, never a crash"
"$py" - "$work" <<'PY'
import random, sys
w = sys.argv[1]
raw = open(f"{w}/v1.npy", "rb").read()
rng = random.Random(2025)
for i in range(150):
    b = bytearray(raw)
    kind = i % 3
    if kind == 0:  # bytes of the header changed
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(0, 128)] = rng.randrange(256)
    elif kind == 1:  # cut anywhere
        b = b[:rng.randrange(0, len(b))]
    else:  # header text replaced by printable noise
        for k in range(10, 10 + rng.randint(1, 60)):
            b[k] = rng.choice(b"{}()',: 0123456789TrueFalsdcpoh<f4")
    open(f"{w}/fuzz_{i}.npy", "wb").write(bytes(b))
PY
i=0
while [ $i -lt 150 ]; do
    set +e
    "$dump" "$work/fuzz_$i.npy" "$work/x.out" 3 5 2> "$work/fuzz.err"
    rc=$?
    set -e
    [ $rc = 0 ] || [ $rc = 2 ] || fail "fuzz_$i.npy: exit status $rc $(cat "$work/fuzz.err")"
    [ $rc = 0 ] || [ -s "$work/fuzz.err" ] || fail "fuzz_$i.npy refused without a message"
    i=$((i + 1))
done

echo "== vh-run: Orion vision tokens and noise as .npy"
"$py" - "$fix" "$work" <<'PY'
import json, sys, numpy as np
fix, w = sys.argv[1:]
cfg = json.load(open(f"{fix}/model/config.json"))
n, width = cfg["vision_tokens"], cfg["text_config"]["hidden_size"]
t = np.fromfile(f"{fix}/tokens_1.f32", dtype='<f4').reshape(n, width)
np.save(f"{w}/tokens.npy", t)
np.save(f"{w}/tokens_half.npy", t.astype('<f2'))
t.astype('<f2').astype('<f4').tofile(f"{w}/tokens_half.f32")
eps = np.random.default_rng(3).standard_normal(cfg["planner"]["latent_dim"]).astype('<f4')
eps.tofile(f"{w}/eps.f32")
np.save(f"{w}/eps.npy", eps.reshape(1, -1))
np.save(f"{w}/eps_half.npy", eps.astype('<f2'))
eps.astype('<f2').astype('<f4').tofile(f"{w}/eps_half.f32")
PY
answer() { # OUT ARGS...: the frame's JSON line without the file names and timings
    out=$1
    shift
    "$vh_run" --json --backend cpu_generic --model "$fix/model" "$@" 2> "$work/run.err" \
        | sed 's/"vision_tokens":"[^"]*",//; s/"noise":"[^"]*",//; s/"[a-z_]*_ms":[^,}]*//g' > "$work/$out" \
        || fail "vh-run $*: $(cat "$work/run.err")"
    grep -q '"status":"ok"' "$work/$out" || fail "vh-run $*: $(cat "$work/$out")"
}
answer raw.json --vision-tokens "$fix/tokens_1.f32" --noise "$work/eps.f32"
answer npy.json --vision-tokens "$work/tokens.npy" --noise "$work/eps.npy"
cmp -s "$work/raw.json" "$work/npy.json" || fail "float32 .npy inputs: another answer than the raw files'"
answer half_raw.json --vision-tokens "$work/tokens_half.f32" --noise "$work/eps_half.f32"
answer half_npy.json --vision-tokens "$work/tokens_half.npy" --noise "$work/eps_half.npy"
cmp -s "$work/half_raw.json" "$work/half_npy.json" || fail "float16 .npy inputs: another answer than numpy's float32 of them"
! cmp -s "$work/raw.json" "$work/half_raw.json" || fail "float16 rounding changed nothing: the comparison shows nothing"
for bad in fortran shape; do
    set +e
    "$vh_run" --verbose --backend cpu_generic --model "$fix/model" --vision-tokens "$work/$bad.npy" > /dev/null 2> "$work/bad.err"
    rc=$?
    set -e
    [ $rc = 2 ] && grep -q "$bad.npy.*vision tokens" "$work/bad.err" || fail "vh-run on $bad.npy: $rc $(cat "$work/bad.err")"
    ! grep -q "\[debug\]\|\[info\]" "$work/bad.err" || fail "$bad.npy refused after the load started"
done
set +e
"$vh_run" --backend cpu_generic --model "$fix/model" --vision-tokens "$fix/tokens_1.f32" --noise "$work/tokens.npy" > /dev/null 2> "$work/noise.err"
rc=$?
set -e
[ $rc = 2 ] && grep -q "planner's noise" "$work/noise.err" || fail "tokens as noise: $rc $(cat "$work/noise.err")"
echo "ok"
