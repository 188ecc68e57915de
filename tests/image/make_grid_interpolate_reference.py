#!/usr/bin/python3
"""References for lib/image/grid_interpolate.c: torch.nn.functional.interpolate(mode="bicubic",
align_corners=False) in float32 on the CPU (Debian's python3-torch 1.13), up and down, non-square.

    /usr/bin/python3 tests/image/make_grid_interpolate_reference.py

Writes tests/fixtures/images/grid_interpolate.json: the source grid [h, w, channels] (channels last,
as the library takes it) and each case's output size and values.
"""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    rng = np.random.default_rng(4004)
    h, w, c = 5, 7, 3
    src = rng.normal(0.0, 1.0, (h, w, c)).astype(np.float32)
    x = torch.from_numpy(src).permute(2, 0, 1).unsqueeze(0)             # [1, c, h, w]
    cases = []
    for oh, ow in ((9, 4), (3, 11), (5, 7), (1, 1), (14, 20)):
        y = F.interpolate(x, size=(oh, ow), mode="bicubic", align_corners=False)
        cases.append(dict(out_h=oh, out_w=ow, values=y[0].permute(1, 2, 0).reshape(-1).tolist()))
    out = dict(source="torch %s F.interpolate(mode='bicubic', align_corners=False), float32, CPU" % torch.__version__,
               h=h, w=w, channels=c, grid=src.reshape(-1).tolist(), cases=cases)
    with open(os.path.join(ROOT, "tests", "fixtures", "images", "grid_interpolate.json"), "w") as f:
        json.dump(out, f)
        f.write("\n")


if __name__ == "__main__":
    main()
