"""Shared by the Python binding's tests: skip without numpy, the fixture paths, image loading.

meson test runs them with /usr/bin/python3 and sets VH_SOURCE_ROOT, VH_TEST_DATA, VH_BACKEND_PATH,
VLAHYBRID_BUILD_DIR and PYTHONPATH (python/ of the source tree)."""
import json
import os
import struct
import sys
import zlib

SKIP = 77
if os.environ.get("VH_PYTHON_TESTS_SKIP"):
    print(os.environ["VH_PYTHON_TESTS_SKIP"], "- skipped")
    sys.exit(SKIP)
try:
    import numpy as np
except ImportError:
    print("numpy is not importable by", sys.executable, "- skipped")
    sys.exit(SKIP)


SOURCE_ROOT = os.environ.get("VH_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
TEST_DATA = os.environ.get("VH_TEST_DATA", os.path.join(SOURCE_ROOT, "tests", "fixtures"))
TINY_MODEL = os.path.join(SOURCE_ROOT, "models", "openvla-tiny")
TINY_B_MODEL = os.path.join(TEST_DATA, "models", "openvla-tiny-b")
BACKEND = "cpu_generic"
# as tests/session/test_openvla_fixtures.c: a step whose reference top-1/top-2 margin is below this
# may flip at fp32; the values are compared exactly where the tokens match
MIN_MARGIN = 2e-3


def reference(name):
    with open(os.path.join(TEST_DATA, "reference", name)) as f:
        return json.load(f)


def _png_rgb8(path):
    """An 8-bit RGB, non-interlaced PNG (the bundled frames) as HxWx3 uint8, without PIL: chunks,
    zlib, and the five row filters of the PNG specification (section 9)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", path
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    width, height, depth, color, _, _, interlace = header
    if (depth, color, interlace) != (8, 2, 0):
        raise ValueError(f"{path}: not an 8-bit RGB non-interlaced PNG")
    raw = zlib.decompress(idat)
    bpp, row_bytes = 3, width * 3
    out = bytearray(height * row_bytes)
    prior = bytearray(row_bytes)
    for y in range(height):
        start = y * (row_bytes + 1)
        kind, row = raw[start], bytearray(raw[start + 1:start + 1 + row_bytes])
        if kind == 1:
            for i in range(bpp, row_bytes):
                row[i] = (row[i] + row[i - bpp]) & 255
        elif kind == 2:
            row = bytearray((a + b) & 255 for a, b in zip(row, prior))
        elif kind == 3:
            for i in range(row_bytes):
                left = row[i - bpp] if i >= bpp else 0
                row[i] = (row[i] + ((left + prior[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(row_bytes):
                a = row[i - bpp] if i >= bpp else 0
                b, c = prior[i], prior[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out[y * row_bytes:(y + 1) * row_bytes] = row
        prior = row
    return np.frombuffer(bytes(out), dtype=np.uint8).reshape(height, width, 3)


def load_rgb(relative):
    """An RGB8 PNG under the source root as an HxWx3 uint8 array (PIL when present)."""
    path = os.path.join(SOURCE_ROOT, relative)
    try:
        from PIL import Image
    except ImportError:
        return _png_rgb8(path)
    with Image.open(path) as im:
        assert im.mode == "RGB", f"{path}: {im.mode}"
        return np.asarray(im.convert("RGB"))


def rgb8_cases(ref):
    """The reference's cases whose image is an 8-bit RGB PNG (decoded the same everywhere; the
    JPEG and grey+alpha cases test the C decoders, not the binding)."""
    names = {"frame_0.png", "frame_1.png", "frame_2.png", "frame_3.png", "frame_4.png",
             "png_rgb8_224x224.png"}
    return [c for c in ref["cases"] if c["image"] in names]
