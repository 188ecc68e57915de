"""vlahybrid.Session: a vh_session, its frames in and its actions out."""
import ctypes
import os
import threading
import time

from . import _frame
from . import _library as L
from . import _structs as S
from . import errors
from .action import Action

# A wait in vh_poll_action is cut into slices of this length, so that close() from another thread
# and Ctrl-C (Python handles signals between foreign calls) are noticed while a poll waits. The
# slices cost no latency: vh_poll_action returns as soon as the action is ready.
POLL_SLICE_MS = 100
# Session(...) waits for vh_session_create's thread in slices of this length, taking Ctrl-C
# between them.
CREATE_JOIN_SLICE_S = 0.05

STRING_PARAMS = ("model_path", "backends", "plugin_path", "unnorm_key", "trace_path", "cpu_affinity")
PATH_PARAMS = ("model_path", "plugin_path", "trace_path")
ENUM_PARAMS = {"queue_policy": S.QUEUE_POLICIES, "log_level": S.LOG_LEVELS,
               "decode_positions": S.DECODE_POSITIONS, "execution_mode": S.EXECUTION_MODES}
INT_PARAMS = {
    "queue_capacity": (0, 2**32 - 1), "n_threads": (-2**31, 2**31 - 1), "gpu_memory_budget": (0, 2**64 - 1),
    "llm_split": (-2**31, 2**31 - 1), "split_zone": (-2**31, 2**31 - 1), "frames_in_flight": (0, 2**32 - 1),
    "deadline_ms": (0, 2**32 - 1), "warmup_frames": (-2**31, 2**31 - 1), "seed": (0, 2**64 - 1),
}
# statuses of an answer that are the queue's doing, not a failure with a message of its own
QUEUE_OUTCOMES = (13, 14, 15)  # DROPPED, CANCELLED, EXPIRED


def _enum(name, value, names):
    if isinstance(value, str):
        try:
            return names[value.lower()]
        except KeyError:
            raise ValueError(f"{name} = {value!r}; one of {', '.join(names)}") from None
    value = _frame.integer(name, value, -2**31, 2**31 - 1)
    if value not in names.values():
        raise ValueError(f"{name} = {value}; one of {sorted(set(names.values()))} ({', '.join(names)})")
    return value


def _string(name, value):
    if name in PATH_PARAMS and isinstance(value, os.PathLike):
        value = os.fspath(value)
    if isinstance(value, str):
        value = os.fsencode(value) if name in PATH_PARAMS else value.encode("utf-8")
    if not isinstance(value, bytes):
        raise TypeError(f"{name}: a str, not {type(value).__name__}")
    if b"\0" in value:
        raise ValueError(f"{name} contains a NUL character")
    return value


def _latency(lat):
    return {name: getattr(lat, name) for name, _ in S.Latency._fields_}


class Session:
    """A loaded model on its backends (vh_session).

        with vlahybrid.Session("models/openvla-tiny", backends="cpu_generic") as s:
            action = s.predict(image, "pick up the red block")   # numpy float64 [7]

    Keyword arguments are the fields of vh_session_params (doc/api.md): queue_capacity,
    queue_policy ("latest"/"drop_oldest", "reject", "block"), n_threads, log_fn, log_user,
    log_level ("error", "warn", "info", "debug"), decode_positions ("contiguous",
    "openvla_hf440"), gpu_memory_budget, llm_split, execution_mode ("pipeline", "serial",
    "packed"), split_zone, trace_path, frames_in_flight, deadline_ms, warmup_frames,
    cpu_affinity, seed, progress_fn, progress_user, vision_tokens_fn. Enums also take their C values.
    vision_tokens_fn(frame_id, tokens) gets a copy (float32 numpy [rows, width]) of the vision
    tokens a camera front end made for each frame (Orion from cameras: 529 rows, det 0..272, map
    273..528), on a library thread before the frame's decision; it must not call into the session.
    log_fn(log_user, level, message) is called from library threads (with the GIL) and must not
    call into the session. progress_fn(progress_user, stage, fraction) is called while the model
    loads, on a thread of the binding's (stage a short name, fraction 0..1, ending at 1.0); a
    truthy return cancels the load, which then raises CancelledError; an exception it raises
    cancels the load and is raised by Session(...). Ctrl-C (KeyboardInterrupt) cancels a load
    too, at the library's next progress report, and is raised once the load is freed.

    Every method may be called from any thread; close() waits until the calls in progress on
    other threads have returned (a poll waiting notices within 0.1 s and raises
    SessionClosedError).
    """

    def __init__(self, model_path=None, backends=None, unnorm_key=None, **params):
        self._handle = None  # first, so that __del__ works whatever fails below
        self._cond = threading.Condition()
        self._active = 0            # calls on the handle in progress
        self._closing = False
        self._outstanding = 0       # frames submitted and not yet polled
        self._predict_lock = threading.Lock()
        self._abandoned = set()     # frames of predicts interrupted while waiting: poll skips them
        params.update(model_path=model_path, backends=backends, unnorm_key=unnorm_key)
        p = L.new(S.SessionParams)
        keep = []
        for name, value in params.items():
            if value is None:
                continue
            if name in STRING_PARAMS:
                value = _string(name, value)
                keep.append(value)
            elif name in ENUM_PARAMS:
                value = _enum(name, value, ENUM_PARAMS[name])
            elif name in INT_PARAMS:
                value = _frame.integer(name, value, *INT_PARAMS[name])
            elif name == "log_fn":
                value = self._log_callback(value, params.get("log_user"))
            elif name == "log_user":
                continue  # given to log_fn by the callback wrapper
            elif name in ("progress_fn", "progress_user"):
                continue  # _create always passes a callback of its own, which calls progress_fn
            elif name == "vision_tokens_fn":
                value = self._vision_tokens_callback(value)
            else:
                raise TypeError(f"Session: unknown parameter {name!r}")
            setattr(p, name, value)
        self._log_fn = p.log_fn if params.get("log_fn") is not None else None  # alive while the session is
        self._vision_tokens_fn = p.vision_tokens_fn if params.get("vision_tokens_fn") is not None else None
        self._handle = self._create(p, params.get("progress_fn"), params.get("progress_user"))

    @staticmethod
    def _vision_tokens_callback(fn):
        if not callable(fn):
            raise TypeError("vision_tokens_fn must be callable: vision_tokens_fn(frame_id, tokens)")

        def deliver(_user, frame_id, tokens, rows, width):
            import numpy as np
            fn(frame_id, np.ctypeslib.as_array(tokens, shape=(rows, width)).copy())
        return S.VISION_TOKENS_FN(deliver)

    @staticmethod
    def _log_callback(log_fn, log_user):
        if not callable(log_fn):
            raise TypeError("log_fn must be callable: log_fn(log_user, level, message)")

        def deliver(_user, level, message):
            log_fn(log_user, level, L.text(message))
        return S.LOG_FN(deliver)

    @staticmethod
    def _create(p, progress_fn, progress_user):
        """vh_session_create on a thread of its own, so that the main thread, waiting, takes
        Ctrl-C: a KeyboardInterrupt there cancels the load through the progress callback (the
        library frees what it made) and is raised once the create has returned. Python runs
        signal handlers only in the main thread and only between foreign calls, so without this
        the interrupt would wait for the whole load."""
        if progress_fn is not None and not callable(progress_fn):
            raise TypeError("progress_fn must be callable: progress_fn(progress_user, stage, fraction)")
        stop = threading.Event()
        raised = []  # what progress_fn raised: ctypes cannot carry an exception through C

        def deliver(_user, stage, fraction):
            if stop.is_set():
                return 1
            try:
                cancel = progress_fn is not None and progress_fn(progress_user, L.text(stage), fraction)
            except BaseException as e:  # KeyboardInterrupt and SystemExit too: raised after create
                raised.append(e)
                stop.set()
                return 1
            return 1 if cancel or stop.is_set() else 0
        p.progress_fn = S.PROGRESS_FN(deliver)  # alive until create returns (`p` is)
        handle = ctypes.c_void_p()
        result = {}

        def create():
            result["status"] = L.lib.vh_session_create(ctypes.byref(p), ctypes.byref(handle))
            result["message"] = L.text(L.lib.vh_last_error())  # this thread's, so read here

        worker = threading.Thread(target=create, name="vlahybrid-create")
        interrupt = None
        try:
            worker.start()
        except KeyboardInterrupt as e:  # before the load began, or during start()
            interrupt = e
            stop.set()
        while worker.is_alive():
            try:
                worker.join(CREATE_JOIN_SLICE_S)
            except KeyboardInterrupt as e:  # a second Ctrl-C still waits: the load is being freed
                interrupt = interrupt or e
                stop.set()
        status = result.get("status", S.ERR_INTERNAL)
        failure = interrupt or (raised[0] if raised else None)
        if failure is not None:
            if status == S.OK:  # the load ended before it saw the stop: undo it
                L.lib.vh_session_destroy(handle)
            raise failure
        if status != S.OK:
            raise errors.error(status, result.get("message", "vh_session_create did not return"))
        return handle

    # -- bookkeeping: no call may run on the handle during or after vh_session_destroy ---------
    def _enter(self):
        with self._cond:
            if self._closing or self._handle is None:
                raise errors.SessionClosedError()
            self._active += 1
            return self._handle

    def _leave(self):
        with self._cond:
            self._active -= 1
            self._cond.notify_all()

    def _check(self, status):
        """Raise the exception of a failed call, with this thread's detailed message (the library
        sets it on every failing call, so it is this call's)."""
        if status != S.OK:
            raise errors.error(status, L.text(L.lib.vh_last_error()))

    # -- frames in, actions out ----------------------------------------------------------------
    def submit(self, image, instruction, **fields):
        """Queue a frame; returns its id (1, 2, 3, ...). `image`: HxWx3 uint8 numpy array (any
        row stride) or a PIL image; None for a frame without one (Orion: vision_tokens).
        Fields: tag, timestamp_ns, sequence, deadline_ns, stream, and for driving models cameras,
        lidar2img, intrinsics, extrinsics, ego_pose, can_bus, command, command_timestamp_ns,
        vision_tokens, noise (doc/python.md). The library copies everything before returning.
        Raises BusyError when the queue is full under queue_policy "reject"."""
        frame, keep = _frame.build(image, instruction, fields)
        frame_id = ctypes.c_uint64()
        handle = self._enter()
        try:
            status = L.lib.vh_submit_frame(handle, ctypes.byref(frame), ctypes.byref(frame_id))
            self._check(status)
            with self._cond:
                self._outstanding += 1
        finally:
            self._leave()
        del keep  # only now may the buffers go
        return frame_id.value

    def poll(self, timeout_ms=-1):
        """The next answer, in submission order, as an Action. timeout_ms: 0 returns at once,
        < 0 waits without limit. Raises vlahybrid.TimeoutError when none is ready in time. An
        answer without an action (dropped, expired, cancelled, failed) is returned, not raised:
        check `action.ok` or call `action.raise_for_status()`."""
        timeout_ms = _frame.integer("timeout_ms", timeout_ms, -2**31, 2**31 - 1)
        a = L.new(S.Action)
        end = None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000
        handle = self._enter()
        try:
            while True:
                left_ms = POLL_SLICE_MS if end is None else max(0, int((end - time.monotonic()) * 1000))
                status = L.lib.vh_poll_action(handle, ctypes.byref(a), min(left_ms, POLL_SLICE_MS))
                if status == S.OK:
                    with self._cond:
                        if a.frame_id not in self._abandoned:
                            break
                        self._abandoned.discard(a.frame_id)
                        self._outstanding -= 1
                    continue
                if status != S.ERR_TIMEOUT:
                    self._check(status)
                if end is not None and time.monotonic() >= end:
                    # composed here: vh_last_error may still hold an earlier call's message
                    raise errors.TimeoutError(status, f"no action within {timeout_ms} ms")
                with self._cond:
                    if self._closing:
                        raise errors.SessionClosedError("the session was closed while poll waited")
            with self._cond:
                self._outstanding -= 1
            message = ""
            if a.status != S.OK:
                message = L.text(a.message) if a.message else \
                    L.text(L.lib.vh_status_string(a.status)) if a.status in QUEUE_OUTCOMES \
                    else L.text(L.lib.vh_session_last_error(handle))
        finally:
            self._leave()
        return Action.from_struct(a, message)

    def predict(self, image, instruction, **fields):
        """Run one frame and wait for it: the action values (numpy float64 [action_dim]), or for
        a trajectory model the waypoints (float32 [n_points, 2]). A frame without an action
        raises its status's exception (the Action is the exception's `.action`). Not to be mixed
        with submit()/poll() on the same session: it raises RuntimeError while frames submitted
        with submit() are unpolled. Concurrent predicts on one session run one at a time."""
        with self._predict_lock:
            with self._cond:
                if self._closing or self._handle is None:
                    raise errors.SessionClosedError()
                unpolled = self._outstanding - len(self._abandoned)
                if unpolled:
                    raise RuntimeError(f"predict: {unpolled} frame(s) from submit() are not "
                                       "polled yet; poll them first (predict takes the next answer)")
            frame_id = self.submit(image, instruction, **fields)
            try:
                action = self.poll(-1)
            except BaseException:  # interrupted (Ctrl-C, close): its answer is nobody's now
                with self._cond:
                    self._abandoned.add(frame_id)
                try:
                    self.cancel(frame_id)
                except errors.Error:
                    pass
                raise
            if action.frame_id != frame_id:
                raise RuntimeError(f"predict: got the answer to frame {action.frame_id}, not {frame_id}: "
                                   "another thread submitted frames meanwhile")
            return action.raise_for_status().result

    # -- control ---------------------------------------------------------------------------------
    def _call(self, function, *args):
        handle = self._enter()
        try:
            self._check(function(handle, *args))
        finally:
            self._leave()

    def cancel(self, frame_id):
        """Cancel a frame that has not started (it is answered CANCELLED in its place). Raises
        BusyError if it has started or been answered, InvalidArgumentError for an unknown id."""
        self._call(L.lib.vh_session_cancel, _frame.integer("frame_id", frame_id, 0, 2**64 - 1))

    def cancel_pending(self):
        """Cancel every frame not started; returns how many."""
        n = ctypes.c_uint32()
        self._call(L.lib.vh_session_cancel_pending, ctypes.byref(n))
        return n.value

    def shutdown(self):
        """Wake every thread blocked in submit or poll on this session (they raise ShutdownError),
        cancel the frames not started, wait for those running; later calls raise ShutdownError
        (info, stats and close still work). For a control program stopping while its own threads
        wait in the library (vh_session_shutdown)."""
        self._call(L.lib.vh_session_shutdown)

    def reset(self, statistics=False):
        """Start a new episode: frames not started are cancelled, the call waits for those
        started; with statistics=True the statistics start afresh too."""
        self._call(L.lib.vh_session_reset, S.RESET_STATISTICS if statistics else 0)

    def prompt_ids(self, instruction=None, command=None):
        """The prompt token ids the model is fed.

        prompt_ids(instruction): a list of ints, the ids of a model whose frames have one prompt
        round (OpenVLA: the instruction's prompt; Orion: its fixed prompt, the instruction ignored),
        as vh_session_prompt_ids.

        With a command, or without an instruction (the driving models' frames have none): every
        round of the prompt a frame with that instruction and command is fed, in run order, as
        vh_session_prompt_rounds: a list of dicts {"name", "ids" (numpy int32 array),
        "image_position" (the vision rows go before ids[image_position]; -1: none),
        "n_image_rows"}. Orion: one round "prompt"; MindDrive: "decision" (without the final speed
        token the model never runs), then "action"; OpenVLA (an instruction needed): one round
        "prompt", the image after BOS. command: None (VH_COMMAND_NONE) or 0..5; the driving
        models' prompts are the same for each."""
        if command is None and instruction is not None:
            encoded = _string("instruction", instruction)
            capacity = 256
            while True:
                ids = (ctypes.c_int32 * capacity)()
                count = ctypes.c_size_t()
                handle = self._enter()
                try:
                    status = L.lib.vh_session_prompt_ids(handle, encoded, ids, capacity, ctypes.byref(count))
                    if status == S.ERR_INVALID_ARGUMENT and count.value > capacity:
                        capacity = count.value
                        continue
                    self._check(status)
                finally:
                    self._leave()
                return list(ids[:count.value])
        import numpy as np
        request = L.new(S.PromptRequest)
        request.instruction = None if instruction is None else _string("instruction", instruction)
        request.command = S.COMMAND_NONE if command is None else _frame.integer("command", command, -2**31, 2**31 - 1)
        n_rounds, room = 4, [256] * 4
        while True:
            rounds = (S.PromptRound * n_rounds)()
            buffers = [np.zeros(room[i] if i < len(room) else 256, dtype=np.int32) for i in range(n_rounds)]
            for r, ids in zip(rounds, buffers):
                L.lib.vh_prompt_round_init_sized(ctypes.byref(r), ctypes.sizeof(r))
                r.ids = ids.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))
                r.ids_capacity = len(ids)
            got = ctypes.c_uint32()
            handle = self._enter()
            try:
                status = L.lib.vh_session_prompt_rounds(handle, ctypes.byref(request), rounds, n_rounds,
                                                        ctypes.byref(got))
                short = got.value > n_rounds or any(r.n_ids > r.ids_capacity for r in rounds[:got.value])
                if status == S.ERR_INVALID_ARGUMENT and short:
                    room = [max(r.n_ids, 1) for r in rounds[:min(got.value, n_rounds)]]
                    n_rounds = max(n_rounds, got.value)
                    continue
                self._check(status)
            finally:
                self._leave()
            return [{"name": L.text(r.name), "ids": ids[:r.n_ids].copy(), "image_position": r.image_position,
                     "n_image_rows": r.n_image_rows} for r, ids in zip(rounds[:got.value], buffers)]

    def info(self):
        """Facts about the loaded session (vh_session_info) as a dict."""
        info = L.new(S.SessionInfo)
        self._call(L.lib.vh_session_get_info, ctypes.byref(info))
        d = S.struct_to_dict(info)
        del d["struct_size"]
        d["stages"] = d["stages"][:min(info.n_stages, 4)]
        modes = {v: k for k, v in S.EXECUTION_MODES.items()}
        d["execution_mode"] = modes.get(info.execution_mode, info.execution_mode)
        return d

    def stats(self):
        """The session's statistics (vh_session_stats) as a dict; latencies as dicts of ns."""
        stats = L.new(S.SessionStats)
        self._call(L.lib.vh_session_get_stats, ctypes.byref(stats))
        d = S.struct_to_dict(stats)
        del d["struct_size"]
        d["stage_pass"] = d["stage_pass"][:min(stats.n_stages, 4)]
        return d

    def last_error(self):
        """The session's last detailed error message (any thread's call or a failed frame)."""
        handle = self._enter()
        try:
            return L.text(L.lib.vh_session_last_error(handle))
        finally:
            self._leave()

    # -- lifetime --------------------------------------------------------------------------------
    @property
    def closed(self):
        return self._handle is None

    def close(self):
        """Destroy the session: frames not started are cancelled, those in flight finish,
        unpolled answers are discarded. Waits for calls in progress on other threads. Idempotent."""
        with self._cond:
            if self._handle is None or self._closing:
                return
            self._closing = True
            while self._active:
                self._cond.wait()
            handle, self._handle = self._handle, None
            self._outstanding, self._abandoned = 0, set()  # destroy discards unpolled answers
        L.lib.vh_session_destroy(handle)
        self._log_fn = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            try:
                self.close()
            except Exception:
                pass
