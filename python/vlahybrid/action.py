"""A frame's answer: vh_action as a Python object."""
from dataclasses import dataclass, field

import numpy as np

from . import _structs as S
from . import errors

TIMINGS = ("submitted_ns", "started_ns", "finished_ns", "vision_ns", "prefill_ns", "decode_ns")


@dataclass
class Action:
    """The answer to one submitted frame. `status` is 0 (OK) when the values are set; otherwise
    it says why there are none (DROPPED, CANCELLED, EXPIRED, BAD_FRAME, BACKEND_FAILED, ...) and
    `message` gives the detail. `raise_for_status()` turns such an answer into its exception."""
    frame_id: int
    tag: int
    status: int
    status_name: str
    kind: str                       # "values" (OpenVLA) or "trajectory" (Orion)
    values: np.ndarray              # float64 [action_dim]: the un-normalised action
    token_ids: np.ndarray           # int32 [action_dim]: the generated action tokens
    trajectory: np.ndarray          # float32 [n_points, 2]: (x, y) waypoints in metres
    extras: dict = field(default_factory=dict)  # name -> float32 array (Orion: "mu", ...)
    timings: dict = field(default_factory=dict)  # CLOCK_MONOTONIC ns: submitted_ns, started_ns, ...
    timestamp_ns: int = 0
    sequence: int = 0
    deadline_ns: int = 0
    episode: int = 0
    message: str = ""

    @property
    def ok(self):
        return self.status == S.OK

    @property
    def result(self):
        """What the model answered: the values, or for a trajectory model the waypoints."""
        return self.trajectory if self.kind == "trajectory" else self.values

    def raise_for_status(self):
        """Raise the status's exception (e.g. DroppedError) unless the action is OK."""
        if not self.ok:
            e = errors.error(self.status, self.message)
            e.action = self
            raise e
        return self

    @classmethod
    def from_struct(cls, a, message=""):
        dim = min(a.action_dim, S.MAX_ACTION_DIM)
        n_points = min(a.n_points, S.MAX_TRAJECTORY_POINTS)
        extras = {}
        for info in a.extra_info[:min(a.n_extras, S.MAX_ACTION_EXTRAS)]:
            if info.offset + info.count <= S.MAX_ACTION_EXTRA_FLOATS:
                extras[info.name.decode("utf-8", "replace")] = \
                    np.array(a.extras[info.offset:info.offset + info.count], dtype=np.float32)
        status = int(a.status)
        return cls(
            frame_id=a.frame_id, tag=a.tag, status=status,
            status_name=errors.error(status).status_name if status else "OK",
            kind=S.ACTION_KINDS.get(a.kind, str(a.kind)),
            values=np.array(a.values[:dim], dtype=np.float64),
            token_ids=np.array(a.token_ids[:dim], dtype=np.int32),
            trajectory=np.array(a.trajectory[:2 * n_points], dtype=np.float32).reshape(n_points, 2),
            extras=extras,
            timings={name: getattr(a, name) for name in TIMINGS},
            timestamp_ns=a.timestamp_ns, sequence=a.sequence, deadline_ns=a.deadline_ns, episode=a.episode,
            message=message)
