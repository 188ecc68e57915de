"""Finding and loading libvlahybrid.so.0, and the prototypes of its functions.

The library is looked for, in this order:
 1. the file named by the environment variable VLAHYBRID_LIBRARY;
 2. the library installed with this package: meson writes its path relative to the package's
    folder into _install_paths.py at install time (relative, so an installed tree can be moved or
    staged with DESTDIR);
 3. a build tree: VLAHYBRID_BUILD_DIR (set by `meson test` and `meson devenv`), whose lib/ holds
    the freshly built library;
 4. the system's loader: "libvlahybrid.so.0" on the usual search path (LD_LIBRARY_PATH, ld.so.cache).

ctypes.CDLL (not PyDLL) releases the GIL around every foreign call, so other Python threads run
while the library works (a poll waiting, a predict computing).
"""
import ctypes
import os
from ctypes import POINTER, c_char_p, c_int32, c_size_t, c_uint32, c_uint64, c_void_p

from . import _structs as S

SONAME = "libvlahybrid.so.0"


def _candidates():
    """(where it came from, path) in the order they are tried."""
    explicit = os.environ.get("VLAHYBRID_LIBRARY")
    if explicit:
        yield "VLAHYBRID_LIBRARY", explicit
        return  # an explicit choice that fails must not silently fall back to another library
    try:
        from . import _install_paths
    except ImportError:  # running from the source tree: no install paths were generated
        _install_paths = None
    if _install_paths is not None:
        here = os.path.dirname(os.path.abspath(__file__))
        yield "the install", os.path.normpath(os.path.join(here, _install_paths.LIBRARY_FROM_PACKAGE))
    build_dir = os.environ.get("VLAHYBRID_BUILD_DIR")
    if build_dir:
        yield "VLAHYBRID_BUILD_DIR", os.path.join(build_dir, "lib", SONAME)
    yield "the system loader", SONAME


def _load():
    tried = []
    for origin, path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} ({origin}): no such file")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(f"{path} ({origin}): {e}")
    raise ImportError("vlahybrid: cannot load the C library; tried:\n  " + "\n  ".join(tried))


lib, path = _load()

_Session = c_void_p  # vh_session *, opaque


def _declare(name, restype, *argtypes):
    try:
        f = getattr(lib, name)
    except AttributeError:  # an older library than these mirrors: say so, not which symbol
        raise ImportError(f"vlahybrid: {path} is version {lib.vh_version().decode()} and lacks {name}; "
                          "this package needs 0.5.0 or later") from None
    f.restype = restype
    f.argtypes = list(argtypes)


_declare("vh_version_number", ctypes.c_uint)
_declare("vh_version", c_char_p)
_declare("vh_status_string", c_char_p, S.c_enum)
_declare("vh_last_error", c_char_p)
_declare("vh_session_params_init_sized", None, POINTER(S.SessionParams), c_size_t)
_declare("vh_frame_init_sized", None, POINTER(S.Frame), c_size_t)
_declare("vh_action_init_sized", None, POINTER(S.Action), c_size_t)
_declare("vh_session_info_init_sized", None, POINTER(S.SessionInfo), c_size_t)
_declare("vh_session_stats_init_sized", None, POINTER(S.SessionStats), c_size_t)
_declare("vh_session_create", S.c_enum, POINTER(S.SessionParams), POINTER(_Session))
_declare("vh_session_destroy", None, _Session)
_declare("vh_submit_frame", S.c_enum, _Session, POINTER(S.Frame), POINTER(c_uint64))
_declare("vh_poll_action", S.c_enum, _Session, POINTER(S.Action), c_int32)
_declare("vh_session_cancel", S.c_enum, _Session, c_uint64)
_declare("vh_session_cancel_pending", S.c_enum, _Session, POINTER(c_uint32))
_declare("vh_session_reset", S.c_enum, _Session, c_uint32)
_declare("vh_session_shutdown", S.c_enum, _Session)
_declare("vh_session_last_error", c_char_p, _Session)
_declare("vh_session_prompt_ids", S.c_enum, _Session, c_char_p, POINTER(c_int32), c_size_t, POINTER(c_size_t))
_declare("vh_session_get_info", S.c_enum, _Session, POINTER(S.SessionInfo))
_declare("vh_session_get_stats", S.c_enum, _Session, POINTER(S.SessionStats))
_declare("vh_prompt_request_init_sized", None, POINTER(S.PromptRequest), c_size_t)
_declare("vh_prompt_round_init_sized", None, POINTER(S.PromptRound), c_size_t)
_declare("vh_session_prompt_rounds", S.c_enum, _Session, POINTER(S.PromptRequest), POINTER(S.PromptRound), c_uint32,
         POINTER(c_uint32))


def text(value):
    """A C string from the library as str (the library's texts are UTF-8)."""
    return value.decode("utf-8", "replace") if value is not None else ""


def new(struct_type):
    """A struct filled with the library's defaults and struct_size, as the C *_init() does."""
    value = struct_type()
    init = {
        S.SessionParams: lib.vh_session_params_init_sized,
        S.Frame: lib.vh_frame_init_sized,
        S.Action: lib.vh_action_init_sized,
        S.SessionInfo: lib.vh_session_info_init_sized,
        S.SessionStats: lib.vh_session_stats_init_sized,
        S.PromptRequest: lib.vh_prompt_request_init_sized,
        S.PromptRound: lib.vh_prompt_round_init_sized,
    }[struct_type]
    init(ctypes.byref(value), ctypes.sizeof(value))
    return value


# The header these mirrors follow; later 0.x libraries only append fields, so they accept them.
HEADER_VERSION_NUMBER = 500


def _check_defaults():
    """The mirrors must put the defaults where the library writes them: a cheap guard against
    a struct that drifted from the header (the layout test compares every offset)."""
    if lib.vh_version_number() < HEADER_VERSION_NUMBER:
        raise ImportError(f"vlahybrid: {path} is version {text(lib.vh_version())}; this package "
                          "needs 0.5.0 or later")
    p = new(S.SessionParams)
    f = new(S.Frame)
    i = new(S.SessionInfo)
    got = {
        "vh_session_params.struct_size": p.struct_size == ctypes.sizeof(S.SessionParams),
        "vh_session_params.queue_capacity": p.queue_capacity == 2,
        "vh_session_params.log_level": p.log_level == S.LOG_LEVELS["info"],
        "vh_session_params.llm_split": p.llm_split == -1,
        "vh_session_params.split_zone": p.split_zone == -1,
        "vh_session_params.warmup_frames": p.warmup_frames == -1,
        "vh_frame.command": f.command == S.COMMAND_NONE,
        "vh_session_info.llm_split": i.llm_split == -1,
    }
    wrong = [name for name, ok in got.items() if not ok]
    if wrong:
        raise ImportError(f"vlahybrid: {path} does not fill {', '.join(wrong)} where this package's "
                          "struct mirrors expect them: the package and the library do not match")


_check_defaults()
