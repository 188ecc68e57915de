#!/usr/bin/python3
"""Write tests/fixtures/safetensors/spec_small.safetensors and its expected values.

The `safetensors` Python package is not installed on the machine that made this fixture, so the
file is written here byte by byte as the format specifies (huggingface/safetensors README,
"Format"; safetensors/src/tensor.rs):
  - 8 bytes: N, the header length, unsigned 64-bit little-endian;
  - N bytes: a UTF-8 JSON object {"__metadata__": {str: str}, name: {"dtype", "shape",
    "data_offsets": [begin, end]}}, padded with spaces (0x20) to a multiple of 8 bytes, as the
    reference writer does;
  - the byte buffer: every tensor's little-endian, row-major bytes; data_offsets are relative to
    its start, contiguous from 0, and the last one ends at the end of the file.
Like the reference writer, tensor data is ordered by decreasing dtype alignment, then by name;
unlike it, the header lists the tensors by name, so header order differs from data order (the
format allows any order).
Element bytes come from numpy (F16 and integers) and torch (BF16, round to nearest even), not from
vlahybrid. The expected values, written to spec_small.expected.json, are the exact values those
bytes hold, as JSON numbers (Python's repr of a double round-trips exactly).

Run: /usr/bin/python3 tests/model/make_safetensors_fixture.py   (from the source root)
"""
import json
import math
import os
import struct

import numpy as np
import torch

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "safetensors")

# The reference implementation's dtype order (safetensors/src/tensor.rs, enum Dtype), which is
# increasing alignment; the writer sorts data by it, decreasing.
DTYPE_ORDER = ["BOOL", "F4", "F6_E2M3", "F6_E3M2", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0",
               "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16", "U16", "F16", "BF16", "I32", "U32", "F32",
               "C64", "F64", "I64", "U64"]


def bf16(values):
    """BF16 bytes and their exact values, rounded by torch."""
    t = torch.tensor(values, dtype=torch.float32).to(torch.bfloat16)
    raw = t.view(torch.int16).numpy().astype("<i2").tobytes()
    return raw, [float(v) for v in t.to(torch.float32).tolist()]


def numpy_tensor(values, np_dtype):
    a = np.array(values, dtype=np_dtype)
    exact = [int(v) if np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_ else float(v)
             for v in a.reshape(-1).tolist()]
    return a.astype(a.dtype.newbyteorder("<")).tobytes(), exact


def tensors():
    """name -> (dtype, shape, little-endian bytes, exact values in row-major order)."""
    out = {}
    raw, exact = numpy_tensor([[0.5, -1.25, 3.0], [0.1, 1e-3, -7e20]], np.float32)
    out["a.f32"] = ("F32", [2, 3], raw, exact)
    raw, exact = bf16([1.0, -2.5, 0.1, 3.14159265])
    out["b.bf16"] = ("BF16", [4], raw, exact)
    raw, exact = numpy_tensor([[0.1, -65504.0], [6e-6, 1.5]], np.float16)  # 6e-6: subnormal
    out["c.f16"] = ("F16", [2, 2], raw, exact)
    raw, exact = numpy_tensor([-1, 2 ** 40, -(2 ** 62)], np.int64)
    out["d.i64"] = ("I64", [3], raw, exact)
    raw, exact = numpy_tensor([0, 1, 127, 128, 255], np.uint8)
    out["e.u8"] = ("U8", [5], raw, exact)
    raw, exact = numpy_tensor([True, False, True], np.bool_)
    out["f.bool"] = ("BOOL", [3], raw, exact)
    raw, exact = numpy_tensor(-123456, np.int32)
    out["g.i32"] = ("I32", [], raw, exact)
    raw, exact = numpy_tensor([math.pi, -1e300], np.float64)
    out["h.f64"] = ("F64", [2], raw, exact)
    out["i.empty"] = ("F32", [0, 4], b"", [])
    raw, exact = numpy_tensor([-128, 0, 127], np.int8)
    out["j.i8"] = ("I8", [3], raw, exact)
    raw, exact = numpy_tensor([[-32768], [32767]], np.int16)
    out["k.i16"] = ("I16", [2, 1], raw, exact)
    raw, exact = numpy_tensor([0, 2 ** 63 - 1], np.uint64)
    out["l.u64"] = ("U64", [2], raw, exact)
    return out


def main():
    ts = tensors()
    data_order = sorted(ts, key=lambda n: (-DTYPE_ORDER.index(ts[n][0]), n))
    offsets, buffer = {}, b""
    for name in data_order:
        offsets[name] = [len(buffer), len(buffer) + len(ts[name][2])]
        buffer += ts[name][2]

    header = {"__metadata__": {"format": "pt", "writer": "make_safetensors_fixture.py"}}
    for name in sorted(ts):
        dtype, shape, _, _ = ts[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": offsets[name]}
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)

    os.makedirs(OUT_DIR, exist_ok=True)
    with open(os.path.join(OUT_DIR, "spec_small.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        f.write(buffer)
    expected = {name: {"dtype": ts[name][0], "shape": ts[name][1], "values": ts[name][3]}
                for name in sorted(ts)}
    with open(os.path.join(OUT_DIR, "spec_small.expected.json"), "w") as f:
        json.dump({"metadata": header["__metadata__"], "tensors": expected}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
