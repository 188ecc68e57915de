#!/usr/bin/python3
"""Make synthetic robot-camera-like demo frames (640x480 RGB PNG) for tests and examples.

Each frame shows a wall, a table seen in perspective with a wood-grain texture, a few coloured
blocks with shading and shadows, a grey gripper, vignetting and sensor noise. Deterministic:
the same seed gives the same bytes. Run with /usr/bin/python3 (needs numpy and PIL):

    /usr/bin/python3 tests/image/make_robot_frames.py tests/fixtures/images/frames
"""
import os
import sys

import numpy as np
from PIL import Image

W, H = 640, 480


def table_and_wall(rng, horizon, wall_rgb, wood_rgb):
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    img = np.zeros((H, W, 3))
    # Wall: smooth vertical light gradient.
    wall = np.array(wall_rgb)[None, None, :] * (0.75 + 0.25 * (y / H))[..., None]
    # Table: perspective coordinates (depth grows toward the horizon).
    depth = 1.0 / np.maximum(y - horizon + 8.0, 1.0)
    u = (x - W / 2) * depth * 40.0
    v = depth * 4000.0
    grain = 0.5 + 0.5 * np.sin(u * 0.22 + 2.0 * np.sin(v * 0.03) + 0.8 * np.sin(u * 0.05 + v * 0.015))
    light = 0.65 + 0.35 * np.exp(-((x - W * 0.6) ** 2 + (y - H * 0.7) ** 2) / (2 * 260.0 ** 2))
    wood = np.array(wood_rgb)[None, None, :] * (0.85 + 0.15 * grain)[..., None] * light[..., None]
    on_table = (y >= horizon)[..., None]
    img = np.where(on_table, wood, wall)
    # Table edge highlight.
    edge = np.abs(y - horizon) < 2.0
    img[edge] = img[edge] * 1.3 + 20
    return img


def draw_block(img, cx, cy, size, rgb, rng):
    """An axis-aligned box seen slightly from above: top face, front face, shadow."""
    s = size
    h = int(s * 0.55)
    x0, x1 = int(cx - s / 2), int(cx + s / 2)
    top0, top1 = int(cy - s * 0.35), int(cy)
    front1 = top1 + h
    # Soft shadow to the lower right.
    yy, xx = np.mgrid[0:H, 0:W]
    d = np.maximum(np.maximum(x0 + 10 - xx, xx - (x1 + 14)), np.maximum(top0 + 12 - yy, yy - (front1 + 10)))
    shadow = np.clip(1.0 - d / 12.0, 0, 1) * 0.45
    img *= (1.0 - shadow)[..., None]
    c = np.array(rgb, dtype=np.float64)
    img[top0:top1, x0:x1] = c * 1.1 + rng.normal(0, 2, (top1 - top0, x1 - x0, 3))
    ramp = np.linspace(0.85, 0.6, front1 - top1)[:, None, None]
    img[top1:front1, x0:x1] = c * ramp + rng.normal(0, 2, (front1 - top1, x1 - x0, 3))
    # Sharp dark outline (exercises ringing/clipping in the resize).
    img[top0:front1, x0:x0 + 2] *= 0.3
    img[top0:front1, x1 - 2:x1] *= 0.3
    img[top1:top1 + 1, x0:x1] = np.minimum(img[top1:top1 + 1, x0:x1] * 1.5 + 40, 255)


def draw_gripper(img, gx, gy, open_px):
    metal = np.array([150.0, 152.0, 158.0])
    img[0:gy, gx - 14:gx + 14] = metal * 0.9
    img[0:gy, gx - 14:gx - 11] = metal * 0.6
    for side in (-1, 1):
        fx = gx + side * open_px
        img[gy - 10:gy + 45, fx - 6:fx + 6] = metal * 0.75
        img[gy - 10:gy + 45, fx - 6:fx - 4] = metal * 0.5
    img[gy - 14:gy - 6, gx - open_px - 6:gx + open_px + 6] = metal * 0.8


def make_frame(seed):
    rng = np.random.default_rng(seed)
    horizon = int(rng.integers(120, 190))
    wall = rng.uniform(150, 215, 3)
    wood = np.array([150, 105, 65]) * rng.uniform(0.8, 1.2) + rng.uniform(-15, 15, 3)
    img = table_and_wall(rng, horizon, wall, wood)
    colours = [(200, 40, 35), (40, 150, 60), (40, 70, 190), (220, 190, 40), (230, 120, 30), (130, 60, 160)]
    order = rng.permutation(len(colours))[: int(rng.integers(3, 5))]
    for i in order:
        cx = rng.uniform(90, W - 90)
        cy = rng.uniform(horizon + 70, H - 80)
        size = 40 + (cy - horizon) * 0.25
        draw_block(img, cx, cy, size, colours[i], rng)
    draw_gripper(img, int(rng.uniform(200, 440)), int(rng.uniform(120, 220)), int(rng.uniform(18, 34)))
    # Vignetting and sensor noise.
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    r2 = ((x - W / 2) / (W / 2)) ** 2 + ((y - H / 2) / (H / 2)) ** 2
    img *= (1.0 - 0.18 * r2)[..., None]
    img += rng.normal(0, 0.6, (H, W, 1))  # luminance noise, like a real sensor after ISP
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/images/frames"
    os.makedirs(out, exist_ok=True)
    for i in range(5):
        path = os.path.join(out, "frame_%d.png" % i)
        Image.fromarray(make_frame(1000 + i), "RGB").save(path, optimize=False, compress_level=9)
        print(path, os.path.getsize(path))


if __name__ == "__main__":
    main()
