"""vlahybrid: run Vision-Language-Action models on the GPU and the CPU, from Python.

A pure-Python binding (ctypes and numpy) over the C library libvlahybrid.so.0; doc/python.md
describes it. The GIL is released while the library works.

    import vlahybrid
    with vlahybrid.Session("models/openvla-tiny", backends="cpu_generic") as s:
        values = s.predict(image, "pick up the red block")   # numpy float64 [7]
"""
import sys

try:
    import numpy  # noqa: F401  (the package's one dependency: say clearly which interpreter lacks it)
except ImportError as e:
    raise ImportError(
        f"vlahybrid needs numpy, which this interpreter, {sys.executable} (Python "
        f"{sys.version.split()[0]}), cannot import ({e}). Install it for this interpreter "
        f"(`{sys.executable} -m pip install numpy`), or run an interpreter that has it: on Debian "
        "/usr/bin/python3 with python3-numpy (meson's -Dpython_interpreter picks the one that "
        "`meson test` and `meson devenv` use)") from e

from . import _library
from ._structs import STATUS_NAMES
from .action import Action
from .errors import (BackendAbiError, BackendFailedError, BackendNotFoundError, BadFrameError, BadModelError,
                     BusyError, CancelledError, DeviceOutOfMemoryError, DroppedError, Error, ExpiredError,
                     FileError, ForkedError, InternalError, InvalidArgumentError, OutOfMemoryError, SessionClosedError,
                     ShutdownError, StructSizeError, TimeoutError, UnnormKeyError, UnsupportedError)
from .session import Session

__all__ = [
    "Session", "Action", "version", "version_number", "library_path", "status_string", "STATUS_NAMES",
    "Error", "InvalidArgumentError", "StructSizeError", "OutOfMemoryError", "DeviceOutOfMemoryError",
    "FileError", "BadModelError", "UnsupportedError", "BackendNotFoundError", "BackendAbiError",
    "BackendFailedError", "BusyError", "TimeoutError", "DroppedError", "CancelledError", "ExpiredError",
    "UnnormKeyError", "BadFrameError", "InternalError", "ShutdownError", "ForkedError", "SessionClosedError",
]


def version():
    """The loaded library's version, "0.5.0"."""
    return _library.text(_library.lib.vh_version())


def version_number():
    """The loaded library's version as major * 10000 + minor * 100 + patch."""
    return _library.lib.vh_version_number()


def library_path():
    """The file (or soname) the library was loaded from."""
    return _library.path


def status_string(status):
    """The library's English description of a status number."""
    return _library.text(_library.lib.vh_status_string(int(status)))


__version__ = version()
