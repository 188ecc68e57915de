"""The library's statuses as exceptions.

Every failing call raises an Error (or a subclass chosen by its status) carrying `.status` (the
vh_status number), `.status_name` ("BAD_MODEL"), `.description` (vh_status_string: "the checkpoint
...") and `.message` (the library's detailed message: vh_last_error / vh_session_last_error).
"""
import builtins

from . import _library as L
from . import _structs as S


class Error(Exception):
    """A vlahybrid call failed, or a frame has no action. Subclasses name the useful statuses."""

    def __init__(self, status, message=""):
        self.status = int(status)
        self.status_name = S.STATUS_NAMES[self.status] if 0 <= self.status < len(S.STATUS_NAMES) \
            else f"STATUS_{self.status}"
        self.description = L.text(L.lib.vh_status_string(self.status))
        self.message = message or self.description
        super().__init__(self.status, self.message)

    def __str__(self):
        return f"{self.message} [VH_ERR_{self.status_name}]"


class InvalidArgumentError(Error, ValueError):
    """INVALID_ARGUMENT: a NULL, a zero size, a value out of range."""


class StructSizeError(Error):
    """STRUCT_SIZE: the library does not know a struct size this package passed."""


class OutOfMemoryError(Error, MemoryError):
    """OUT_OF_MEMORY: a host allocation failed."""


class DeviceOutOfMemoryError(Error):
    """DEVICE_OUT_OF_MEMORY: a device allocation failed or gpu_memory_budget is too small."""


class FileError(Error):
    """IO: a file could not be opened, read or mapped."""


class BadModelError(Error):
    """BAD_MODEL: the checkpoint folder is malformed, truncated or inconsistent."""


class UnsupportedError(Error):
    """UNSUPPORTED: well-formed, but a model kind or option this version lacks."""


class BackendNotFoundError(Error):
    """BACKEND_NOT_FOUND: no plugin of that name in the search path."""


class BackendAbiError(Error):
    """BACKEND_ABI: a plugin built for an incompatible backend ABI."""


class BackendFailedError(Error):
    """BACKEND_FAILED: a backend failed to initialise or to run a step."""


class BusyError(Error):
    """BUSY: the queue is full (queue_policy "reject"), or the frame to cancel has started."""


class TimeoutError(Error, builtins.TimeoutError):
    """TIMEOUT: no result within poll's timeout (also a builtins.TimeoutError)."""


class DroppedError(Error):
    """DROPPED: the frame was displaced by a newer one (queue_policy "latest")."""


class CancelledError(Error):
    """CANCELLED: the frame was cancelled (cancel, cancel_pending, reset, close)."""


class ExpiredError(Error):
    """EXPIRED: the frame's deadline passed before it started."""


class UnnormKeyError(Error):
    """UNNORM_KEY: unnorm_key missing (the model has several datasets) or not in its norm_stats."""


class BadFrameError(Error, ValueError):
    """BAD_FRAME: the frame's image or instruction is unusable."""


class InternalError(Error):
    """INTERNAL: a bug in the library: please report it with the message."""


class ShutdownError(Error):
    """SHUTDOWN: the session was shut down (shutdown()); only info, stats and close remain."""


class ForkedError(Error):
    """FORKED: the session was used in a child of fork(); only the process that created it can."""


class SessionClosedError(Error, ValueError):
    """A call on a session after close() (or while close() runs); no C call was made."""

    def __init__(self, message="the session is closed"):
        super().__init__(S.ERR_INVALID_ARGUMENT, message)

    def __reduce__(self):
        return type(self), (self.message,)


_BY_STATUS = {
    1: InvalidArgumentError, 2: StructSizeError, 3: OutOfMemoryError, 4: DeviceOutOfMemoryError,
    5: FileError, 6: BadModelError, 7: UnsupportedError, 8: BackendNotFoundError, 9: BackendAbiError,
    10: BackendFailedError, 11: BusyError, 12: TimeoutError, 13: DroppedError, 14: CancelledError,
    15: ExpiredError, 16: UnnormKeyError, 17: BadFrameError, 18: InternalError, 19: ShutdownError,
    20: ForkedError,
}


def error(status, message=""):
    """The exception for a status: its subclass if it has one, else Error."""
    return _BY_STATUS.get(int(status), Error)(status, message)
