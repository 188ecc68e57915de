"""Images and float arrays from Python to the pointers a vh_frame takes.

Everything is checked here, before the library sees it, and raised as ValueError / TypeError. The
returned objects own the memory the pointers point into: the caller keeps them alive until
vh_submit_frame returns (the library copies on submit).
"""
import ctypes
import sys

import numpy as np

MAX_SIDE = 16384  # vh_frame: width and height at most 16384


def _from_pil(image):
    """A PIL image as an HxWx3 uint8 array, if `image` is one. A PIL image means PIL is imported
    already: the binding never imports it (nor pays for a failed import on every frame)."""
    Image = sys.modules.get("PIL.Image")
    if Image is None or not isinstance(image, Image.Image):
        return None
    return np.asarray(image.convert("RGB"))


def is_chw(shape):
    """Whether a 3-D image shape is channels first (3, height, width), as torchvision's tensors
    are: the first axis is 3 and the last is not. (3, W, 3) is read as height 3, channels last."""
    return len(shape) == 3 and shape[0] == 3 and shape[2] != 3


class Pixels:
    """An RGB8 image ready for a vh_frame: pointer, width, height, stride, and its owner."""

    def __init__(self, image, what="image"):
        array = _from_pil(image)
        if array is None:
            if isinstance(image, np.ndarray):
                array = image
            elif hasattr(image, "__array__") and not isinstance(image, (list, tuple)):
                array = np.asarray(image)  # a torch tensor on the CPU, an array-like of another library
            else:
                raise TypeError(f"{what}: a numpy array (height x width x 3 or 3 x height x width, uint8) "
                                f"or a PIL image, not {type(image).__name__}")
        if array.dtype != np.uint8:
            raise ValueError(f"{what}: dtype {array.dtype}; RGB8 images are uint8")
        if is_chw(array.shape):
            array = array.transpose(1, 2, 0)  # a view; copied packed below
        if array.ndim != 3 or array.shape[2] != 3:
            raise ValueError(f"{what}: shape {array.shape}; expected (height, width, 3) or (3, height, "
                             "width), RGB")
        height, width = array.shape[0], array.shape[1]
        if not (1 <= width <= MAX_SIDE and 1 <= height <= MAX_SIDE):
            raise ValueError(f"{what}: {width} x {height} pixels; each side must be 1 .. {MAX_SIDE}")
        # The library reads rows of width * 3 packed bytes, `stride` bytes apart: a view with
        # packed pixels and rows going down (a crop, a padded buffer) goes as it is; any other
        # layout (flipped, transposed, a channel view) is copied into a packed array.
        rs, ps, cs = array.strides
        if not (cs == 1 and ps == 3 and rs >= 3 * width):
            array = np.ascontiguousarray(array)
            rs = array.strides[0]
        self.array = array  # keeps the memory alive
        self.width, self.height, self.stride = width, height, rs
        self.pointer = array.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))


def floats(values, what, shape=None, allow_none=True):
    """A float32 C-contiguous copy or view of `values`, and a pointer to it; (None, None) for
    None. `shape`: the expected shape, None in a position meaning any length."""
    if values is None:
        if allow_none:
            return None, None
        raise ValueError(f"{what} is required")
    array = np.ascontiguousarray(values, dtype=np.float32)
    if shape is not None:
        ok = array.ndim == len(shape) and all(s is None or s == n for s, n in zip(shape, array.shape))
        if not ok:
            want = " x ".join("N" if s is None else str(s) for s in shape)
            raise ValueError(f"{what}: shape {array.shape}; expected {want}")
    return array, array.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
