#!/usr/bin/python3
"""References for lib/image/bilinear_resize.c: cv2.resize(img, (dw, dh), interpolation=cv2.INTER_LINEAR)
on float32 HWC images (Debian's python3-opencv 4.6, as mmcv.imresize calls it for Orion's 640 x 320 ->
640 x 640 stretch): up, down, one axis only, non-integer factors.

    /usr/bin/python3 tests/image/make_cv2_resize_reference.py

Writes tests/fixtures/images/cv2_resize.json.
"""
import json
import os

import cv2
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    rng = np.random.default_rng(5005)
    h, w = 6, 8
    img = (rng.uniform(0.0, 255.0, (h, w, 3))).astype(np.float32)
    cases = []
    for dw, dh in ((8, 12), (8, 16), (13, 9), (5, 3), (3, 11), (1, 1), (8, 6)):
        out = cv2.resize(img, (dw, dh), interpolation=cv2.INTER_LINEAR)
        cases.append(dict(dw=dw, dh=dh, values=out.reshape(-1).astype(float).tolist()))
    doc = dict(source="OpenCV %s cv2.resize INTER_LINEAR, float32" % cv2.__version__, w=w, h=h, channels=3,
               image=img.reshape(-1).astype(float).tolist(), cases=cases)
    with open(os.path.join(ROOT, "tests", "fixtures", "images", "cv2_resize.json"), "w") as f:
        json.dump(doc, f)
        f.write("\n")


if __name__ == "__main__":
    main()
