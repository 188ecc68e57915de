#!/usr/bin/python3
"""Make the image fixtures and their reference data from the real reference implementations.

Run from the repository root with Debian's Python (numpy, PIL 9.4, torch 1.13):

    /usr/bin/python3 tests/image/make_image_reference.py

It writes, under tests/fixtures/images/:

  decode/<name>.png|.jpg    test files in every PNG/JPEG variant the decoder must handle
  decode/<name>.rowcrc      CRC-32 (zlib's) of each row of PIL.Image.open(file).convert("RGB"),
                            uint32 little-endian, one per row: exact yet small (JPEG output does
                            not compress, and the fixtures must stay under 3 MB)
  decode/manifest.txt       "<file> <width> <height> <reference>" per line
  resize/<src>_<W>x<H>.png  PIL Image.resize((W, H), Image.BICUBIC) of a source, saved losslessly
  resize/manifest.txt       "<source file> <W> <H> <reference file>"; paths relative to images/
  normalize/source.rgb.z    zlib of a 64x48 RGB8 image holding every value 0..255 in every channel
  normalize/<set>.f32.z     zlib of torch's to_tensor + normalize of it: float32 little-endian,
                            planar [3][48][64]
  normalize/manifest.txt    "<set> <mean0> <mean1> <mean2> <std0> <std1> <std2> <reference>",
                            the floats as C99 hexadecimal literals

The robot-camera demo frames in frames/ come from make_robot_frames.py (also used as resize
sources here). Everything is deterministic: rerunning rewrites identical files.

torchvision is not installed here, so to_tensor and normalize are done with the torch operations
torchvision 0.14 uses: from_numpy -> permute(2, 0, 1) -> .to(float32).div(255), then
.sub_(mean[:, None, None]).div_(std[:, None, None]) with mean/std as float32 tensors.
"""
import os
import struct
import sys
import warnings
import zlib

import numpy as np
import PIL
from PIL import Image
import torch

ROOT = os.path.join("tests", "fixtures", "images")


# ------------------------------------------------------------------------------------------------
# Synthetic content: gradients, hard black/white edges (they make bicubic overshoot and clip),
# one-pixel lines, and a block of seeded noise.

def synth(width, height, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    img = np.empty((height, width, 3))
    img[..., 0] = x * 255.0 / max(width - 1, 1)
    img[..., 1] = y * 255.0 / max(height - 1, 1)
    img[..., 2] = 128 + 100 * np.sin((x + 2 * y) * 0.11 + seed)
    # Hard edges: a white and a black rectangle.
    img[height // 5: height // 2, width // 6: width // 3] = 255
    img[height // 2: 3 * height // 4, width // 2: 3 * width // 4] = 0
    # One-pixel alternating columns in a strip.
    strip = (slice(3 * height // 4, height), slice(0, width // 3))
    img[strip] = np.where((x[strip] % 2 == 0)[..., None], 255.0, 0.0)
    # Noise block.
    ny0, ny1, nx0, nx1 = height // 8, height // 3, 2 * width // 3, width
    img[ny0:ny1, nx0:nx1] += rng.normal(0, 60, (ny1 - ny0, nx1 - nx0, 3))
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


# ------------------------------------------------------------------------------------------------
# A small independent PNG writer for the variants PIL cannot write (2/4-bit gray, 16-bit colour,
# Adam7 interlacing, short palettes). It cycles through all five row filters so the decoder's
# unfiltering is exercised too.

ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def pack_row(samples, bit_depth):
    """samples: 1-D array of sample values of one row -> bytes (MSB-first packing, big-endian 16)."""
    if bit_depth == 16:
        return samples.astype(">u2").tobytes()
    if bit_depth == 8:
        return samples.astype(np.uint8).tobytes()
    per_byte = 8 // bit_depth
    padded = np.zeros(-(-len(samples) // per_byte) * per_byte, dtype=np.uint16)
    padded[: len(samples)] = samples
    padded = padded.reshape(-1, per_byte)
    out = np.zeros(len(padded), dtype=np.uint16)
    for i in range(per_byte):
        out |= padded[:, i] << (8 - bit_depth * (i + 1))
    return out.astype(np.uint8).tobytes()


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def filter_rows(rows, bpp):
    """Filter packed rows, filter type = row index % 5."""
    out = bytearray()
    prior = bytes(len(rows[0])) if rows else b""
    for i, row in enumerate(rows):
        ftype = i % 5
        out.append(ftype)
        for j, v in enumerate(row):
            a = row[j - bpp] if j >= bpp else 0
            b = prior[j]
            c = prior[j - bpp] if j >= bpp else 0
            pred = [0, a, b, (a + b) // 2, paeth(a, b, c)][ftype]
            out.append((v - pred) & 0xFF)
        prior = row
    return bytes(out)


def write_png(path, samples, color_type, bit_depth, palette=None, trns=None, interlace=False):
    """samples: uint array [H, W, C] of raw sample values."""
    h, w, c = samples.shape
    assert c == CHANNELS[color_type]
    bpp = max(1, c * bit_depth // 8)
    data = b""
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    for x0, y0, dx, dy in passes:
        sub = samples[y0::dy, x0::dx]
        if sub.shape[0] == 0 or sub.shape[1] == 0:
            continue
        rows = [pack_row(sub[r].reshape(-1), bit_depth) for r in range(sub.shape[0])]
        data += filter_rows(rows, bpp)
    png = b"\x89PNG\r\n\x1a\n"
    png += png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 1 if interlace else 0))
    if palette is not None:
        png += png_chunk(b"PLTE", bytes(np.asarray(palette, dtype=np.uint8).reshape(-1)))
    if trns is not None:
        png += png_chunk(b"tRNS", trns)
    png += png_chunk(b"IDAT", zlib.compress(data, 9))
    png += png_chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


# ------------------------------------------------------------------------------------------------
# Decode fixtures.

def gray_of(rgb):
    return (rgb.astype(np.uint32).sum(axis=2) // 3).astype(np.uint16)


def random_palette(rng, n):
    return rng.integers(0, 256, (n, 3))


def make_decode_fixtures(out):
    """Write every test file; return [(file name, expect_pixels_or_None)]."""
    os.makedirs(out, exist_ok=True)
    files = []
    rng = np.random.default_rng(7)

    def pil_save(name, image, **kw):
        image.save(os.path.join(out, name), **kw)
        files.append(name)

    def raw_png(name, samples, color_type, bit_depth, **kw):
        write_png(os.path.join(out, name), samples, color_type, bit_depth, **kw)
        files.append(name)

    # 8-bit RGB at many sizes, written by PIL.
    for w, h in [(1, 1), (3, 2), (224, 224), (225, 223), (333, 197), (50, 700)]:
        pil_save("png_rgb8_%dx%d.png" % (w, h), Image.fromarray(synth(w, h, w * 31 + h)))

    base = synth(61, 47, 3)
    alpha = rng.integers(0, 256, (47, 61, 1)).astype(np.uint8)
    gray = gray_of(base).astype(np.uint8)
    pil_save("png_rgba8_61x47.png", Image.fromarray(np.concatenate([base, alpha], axis=2), "RGBA"))
    pil_save("png_gray8_61x47.png", Image.fromarray(gray, "L"))
    pil_save("png_gray8_trns_61x47.png", Image.fromarray(gray, "L"), transparency=int(gray[10, 10]))
    pil_save("png_la8_61x47.png", Image.fromarray(np.stack([gray, alpha[..., 0]], axis=2), "LA"))
    pil_save("png_rgb8_trns_61x47.png", Image.fromarray(base), transparency=tuple(int(v) for v in base[5, 5]))

    # Palette images: 8-bit (PIL), with tRNS, and packed 1/2/4-bit.
    for bits in (8, 4, 2, 1):
        n = 1 << bits
        pal = random_palette(rng, n)
        idx = (gray.astype(np.uint32) * n // 256).astype(np.uint8)
        im = Image.fromarray(idx, "P")
        im.putpalette(pal.astype(np.uint8).reshape(-1).tolist())
        pil_save("png_pal%d_61x47.png" % bits, im, bits=bits)
    pal = random_palette(rng, 256)
    im = Image.fromarray(gray, "P")
    im.putpalette(pal.astype(np.uint8).reshape(-1).tolist())
    pil_save("png_pal8_trns_61x47.png", im, transparency=bytes(rng.integers(0, 256, 100).astype(np.uint8)))
    # Short palettes: indices past the PLTE entries (PIL shows them as gray i,i,i).
    idx = np.array([[0, 1, 2, 3, 200, 255, 1]], dtype=np.uint8)
    raw_png("png_pal8_short_7x1.png", idx[..., None], 3, 8, palette=[[10, 20, 30], [40, 50, 60]])
    idx = (np.arange(4 * 3) % 4).reshape(3, 4).astype(np.uint8)
    raw_png("png_pal2_short_4x3.png", idx[..., None], 3, 2, palette=[[200, 10, 10], [10, 200, 10], [9, 9, 250]])

    # Low-bit gray, written by hand (1-bit also by PIL as mode "1").
    for bits in (1, 2, 4):
        samples = (gray.astype(np.uint32) >> (8 - bits)).astype(np.uint16)[..., None]
        raw_png("png_gray%d_61x47.png" % bits, samples, 0, bits)
    pil_save("png_mode1_61x47.png", Image.fromarray(gray > 127))

    # 16-bit: RGB, RGBA, gray (values across the whole 0..65535 range and a dark ramp), gray+alpha.
    wide = base.astype(np.uint16) * 257 + rng.integers(0, 257, base.shape).astype(np.uint16)
    raw_png("png_rgb16_61x47.png", wide, 2, 16)
    wide_alpha = rng.integers(0, 65536, (47, 61, 1)).astype(np.uint16)
    raw_png("png_rgba16_61x47.png", np.concatenate([wide, wide_alpha], axis=2), 6, 16)
    g16 = wide[..., 0].copy()
    g16[:, :20] = np.arange(47 * 20).reshape(47, 20) % 300  # dark values 0..299: PIL clips at 255
    raw_png("png_gray16_61x47.png", g16[..., None], 0, 16)
    raw_png("png_la16_61x47.png", np.stack([g16, wide_alpha[..., 0]], axis=2), 4, 16)

    # Adam7 interlaced, including sizes where some passes are empty.
    raw_png("png_interlaced_rgb8_61x47.png", base.astype(np.uint16), 2, 8, interlace=True)
    raw_png("png_interlaced_rgb8_1x1.png", base[:1, :1].astype(np.uint16), 2, 8, interlace=True)
    raw_png("png_interlaced_rgb8_3x2.png", base[:2, :3].astype(np.uint16), 2, 8, interlace=True)
    raw_png("png_interlaced_rgba16_61x47.png", np.concatenate([wide, wide_alpha], axis=2), 6, 16, interlace=True)
    raw_png("png_interlaced_gray16_61x47.png", g16[..., None], 0, 16, interlace=True)
    idx = (gray >> 4).astype(np.uint16)[..., None]
    raw_png("png_interlaced_pal4_61x47.png", idx, 3, 4, palette=random_palette(rng, 16), interlace=True)
    raw_png("png_interlaced_gray2_61x47.png", (gray >> 6).astype(np.uint16)[..., None], 0, 2, interlace=True)

    # JPEG: baseline 4:2:0 / 4:2:2 / 4:4:4, progressive, gray, CMYK (Adobe), odd sizes.
    for w, h in [(1, 1), (3, 2), (225, 223), (640, 480), (50, 700)]:
        pil_save("jpeg_rgb_%dx%d.jpg" % (w, h), Image.fromarray(synth(w, h, w + 7 * h)), quality=90)
    big = Image.fromarray(synth(333, 197, 11))
    pil_save("jpeg_rgb444_333x197.jpg", big, quality=92, subsampling=0)
    pil_save("jpeg_rgb422_333x197.jpg", big, quality=85, subsampling=1)
    pil_save("jpeg_progressive_333x197.jpg", big, quality=90, progressive=True)
    pil_save("jpeg_progressive_optimized_61x47.jpg", Image.fromarray(base), quality=75, progressive=True, optimize=True)
    pil_save("jpeg_gray_61x47.jpg", Image.fromarray(gray, "L"), quality=90)
    pil_save("jpeg_gray_progressive_61x47.jpg", Image.fromarray(gray, "L"), quality=90, progressive=True)
    cmyk = Image.fromarray(np.concatenate([base, alpha], axis=2), "RGBA").convert("CMYK")
    cmyk = Image.fromarray(np.array(cmyk) // 2 + np.array([0, 30, 60, 90], dtype=np.uint8), "CMYK")
    pil_save("jpeg_cmyk_61x47.jpg", cmyk, quality=90)
    return files


def write_decode_references(out, files):
    lines = []
    for name in files:
        with Image.open(os.path.join(out, name)) as im:
            rgb = np.asarray(im.convert("RGB"))
        h, w, _ = rgb.shape
        ref = name.rsplit(".", 1)[0] + ".rowcrc"
        crcs = [zlib.crc32(rgb[y].tobytes()) & 0xFFFFFFFF for y in range(h)]
        with open(os.path.join(out, ref), "wb") as f:
            f.write(struct.pack("<%dI" % h, *crcs))
        lines.append("%s %d %d %s" % (name, w, h, ref))
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("# file width height reference (row CRC-32s of PIL 9.4 Image.open(file).convert('RGB'))\n")
        f.write("\n".join(lines) + "\n")


def check_png_writer(out):
    """The hand-written PNGs must decode in PIL to the samples we meant (guards the writer)."""
    base = synth(61, 47, 3)
    with Image.open(os.path.join(out, "png_interlaced_rgb8_61x47.png")) as im:
        assert np.array_equal(np.asarray(im.convert("RGB")), base), "interlaced writer broken"
    gray = gray_of(base).astype(np.uint8)
    with Image.open(os.path.join(out, "png_gray4_61x47.png")) as im:
        assert np.array_equal(np.asarray(im), (gray >> 4) * 17), "4-bit gray writer broken"


# ------------------------------------------------------------------------------------------------
# Resize references.

def make_resize_references(root):
    out = os.path.join(root, "resize")
    os.makedirs(out, exist_ok=True)
    jobs = []
    sources = ["decode/png_rgb8_1x1.png", "decode/png_rgb8_3x2.png", "decode/png_rgb8_224x224.png",
               "decode/png_rgb8_225x223.png", "decode/png_rgb8_333x197.png", "decode/png_rgb8_50x700.png",
               "frames/frame_0.png", "frames/frame_3.png"]
    for s in sources:
        jobs.append((s, 224, 224))
    jobs += [("decode/png_rgb8_333x197.png", w, h) for w, h in
             [(100, 60), (400, 250), (224, 197), (333, 300), (333, 197), (1, 1), (7, 3), (1000, 13), (2, 197)]]
    jobs += [("decode/png_rgb8_1x1.png", 5, 7), ("decode/png_rgb8_3x2.png", 4, 9),
             ("decode/png_rgb8_50x700.png", 700, 50), ("frames/frame_0.png", 256, 192),
             ("frames/frame_0.png", 37, 29), ("frames/frame_3.png", 641, 479)]
    lines = []
    for src, w, h in jobs:
        with Image.open(os.path.join(root, src)) as im:
            rgb = im.convert("RGB")
        resized = rgb.resize((w, h), Image.BICUBIC)
        stem = os.path.basename(src).rsplit(".", 1)[0]
        ref = "resize/%s_%dx%d.png" % (stem, w, h)
        resized.save(os.path.join(root, ref), compress_level=9)
        with Image.open(os.path.join(root, ref)) as back:  # lossless round trip
            assert np.array_equal(np.asarray(back.convert("RGB")), np.asarray(resized))
        lines.append("%s %d %d %s" % (src, w, h, ref))
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("# source width height reference (PIL 9.4 Image.resize((width, height), Image.BICUBIC))\n")
        f.write("\n".join(lines) + "\n")


# ------------------------------------------------------------------------------------------------
# Normalisation references.

NORM_SETS = [
    ("dinov2", (0.484375, 0.455078125, 0.40625), (0.228515625, 0.2236328125, 0.224609375)),
    ("siglip", (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    ("imagenet", (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
]


def torch_to_tensor_normalize(rgb, mean, std):
    """What torchvision 0.14 TVF.to_tensor then TVF.normalize do for an RGB PIL image."""
    img = torch.from_numpy(np.array(rgb, np.uint8, copy=True))
    img = img.view(rgb.shape[0], rgb.shape[1], 3).permute((2, 0, 1)).contiguous()
    t = img.to(dtype=torch.float32).div(255)
    m = torch.as_tensor(mean, dtype=torch.float32).view(-1, 1, 1)
    s = torch.as_tensor(std, dtype=torch.float32).view(-1, 1, 1)
    t.sub_(m).div_(s)
    return t.numpy()


def make_normalize_references(root):
    out = os.path.join(root, "normalize")
    os.makedirs(out, exist_ok=True)
    h, w = 48, 64
    rng = np.random.default_rng(5)
    # Each channel holds a different permutation of 0..255 repeated, so every value meets every
    # channel and the planar layout is checked.
    rgb = np.stack([np.resize(rng.permutation(256), h * w).reshape(h, w) for _ in range(3)], axis=2)
    rgb = rgb.astype(np.uint8)
    with open(os.path.join(out, "source.rgb.z"), "wb") as f:
        f.write(zlib.compress(rgb.tobytes(), 9))
    lines = []
    for name, mean, std in NORM_SETS:
        planes = torch_to_tensor_normalize(rgb, mean, std)
        assert planes.dtype == np.float32 and planes.shape == (3, h, w)
        # The C code does (float)v / 255.0f, - mean, / std, one float32 rounding each: confirm
        # that torch agrees on every pixel (no fused or reciprocal arithmetic in torch's path).
        f32 = np.float32
        mine = ((rgb.astype(f32) / f32(255)) - np.asarray(mean, f32)) / np.asarray(std, f32)
        assert np.array_equal(mine.transpose(2, 0, 1).view(np.uint32), planes.view(np.uint32)), name
        ref = "normalize/%s.f32.z" % name
        with open(os.path.join(root, ref), "wb") as f:
            f.write(zlib.compress(planes.astype("<f4").tobytes(), 9))
        lines.append("%s %s %s %s" % (name, " ".join(float(f32(v)).hex() for v in mean),
                                      " ".join(float(f32(v)).hex() for v in std), ref))
    with open(os.path.join(out, "manifest.txt"), "w") as f:
        f.write("# set mean0 mean1 mean2 std0 std1 std2 reference; source normalize/source.rgb.z 64x48\n")
        f.write("\n".join(lines) + "\n")


def main():
    warnings.filterwarnings("ignore", "Palette images with Transparency")
    assert PIL.__version__ == "9.4.0", "references are defined by Pillow 9.4.0, found " + PIL.__version__
    root = sys.argv[1] if len(sys.argv) > 1 else ROOT
    if not os.path.isdir(os.path.join(root, "frames")):
        sys.exit("run tests/image/make_robot_frames.py first (frames/ is a resize source)")
    decode_dir = os.path.join(root, "decode")
    files = make_decode_fixtures(decode_dir)
    check_png_writer(decode_dir)
    write_decode_references(decode_dir, files)
    make_resize_references(root)
    make_normalize_references(root)
    total = 0
    for d, _, names in os.walk(root):
        total += sum(os.path.getsize(os.path.join(d, n)) for n in names)
    print("fixtures written under %s: %d files, %.2f MB" % (root, sum(len(n) for _, _, n in os.walk(root)), total / 1e6))


if __name__ == "__main__":
    main()
