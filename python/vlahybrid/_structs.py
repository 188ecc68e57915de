"""ctypes mirrors of the public structs and enums of include/vlahybrid/vlahybrid.h (0.5.0).

Field for field, in the header's order: ctypes lays a Structure out as the platform's C compiler
does, so sizes and offsets match as long as the lists match. tests/python/test_struct_layout.py
compares every offset and size against a C program compiled with the header (struct_layout.c).
Appending a field to a struct in the header means appending it here too.
"""
import ctypes
from ctypes import (POINTER, c_char, c_char_p, c_double, c_float, c_int, c_int32, c_int64, c_size_t,
                    c_uint8, c_uint32, c_uint64, c_void_p)

# C enums are int-sized on every ABI the library supports.
c_enum = c_int

MAX_ACTION_DIM = 32
MAX_TRAJECTORY_POINTS = 64
MAX_ACTION_EXTRAS = 8
MAX_ACTION_EXTRA_FLOATS = 1024
CAN_BUS_FLOATS = 18
COMMAND_NONE = -1
RESET_STATISTICS = 1

# vh_status: the numeric values are part of the ABI.
STATUS_NAMES = (
    "OK", "INVALID_ARGUMENT", "STRUCT_SIZE", "OUT_OF_MEMORY", "DEVICE_OUT_OF_MEMORY", "IO",
    "BAD_MODEL", "UNSUPPORTED", "BACKEND_NOT_FOUND", "BACKEND_ABI", "BACKEND_FAILED", "BUSY",
    "TIMEOUT", "DROPPED", "CANCELLED", "EXPIRED", "UNNORM_KEY", "BAD_FRAME", "INTERNAL", "SHUTDOWN",
    "FORKED",
)
OK = 0
ERR_INVALID_ARGUMENT = 1
ERR_TIMEOUT = 12
ERR_CANCELLED = 14
ERR_INTERNAL = 18

# The enum-typed parameters, by the names the Python API accepts (lower case, as in the C
# constants without their prefix).
QUEUE_POLICIES = {"drop_oldest": 0, "latest": 0, "reject": 1, "block": 2}
LOG_LEVELS = {"error": 0, "warn": 1, "info": 2, "debug": 3}
DECODE_POSITIONS = {"contiguous": 0, "openvla_hf440": 1}
EXECUTION_MODES = {"pipeline": 0, "serial": 1, "packed": 2}
ACTION_KINDS = {0: "values", 1: "trajectory"}

# void (*vh_log_fn)(void *user, vh_log_level level, const char *message)
LOG_FN = ctypes.CFUNCTYPE(None, c_void_p, c_enum, c_char_p)
# int (*vh_progress_fn)(void *user, const char *stage, double fraction)
PROGRESS_FN = ctypes.CFUNCTYPE(ctypes.c_int, c_void_p, c_char_p, ctypes.c_double)
# void (*vh_vision_tokens_fn)(void *user, uint64_t frame_id, const float *tokens, uint32_t rows, uint32_t width)
VISION_TOKENS_FN = ctypes.CFUNCTYPE(None, c_void_p, c_uint64, ctypes.POINTER(ctypes.c_float), c_uint32, c_uint32)


class SessionParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("model_path", c_char_p),
        ("backends", c_char_p),
        ("plugin_path", c_char_p),
        ("unnorm_key", c_char_p),
        ("queue_capacity", c_uint32),
        ("queue_policy", c_enum),
        ("n_threads", c_int32),
        ("log_fn", LOG_FN),
        ("log_user", c_void_p),
        ("log_level", c_enum),
        ("decode_positions", c_enum),
        ("gpu_memory_budget", c_uint64),
        # 0.2.0
        ("llm_split", c_int32),
        ("execution_mode", c_enum),
        ("split_zone", c_int32),
        ("trace_path", c_char_p),
        ("frames_in_flight", c_uint32),
        ("deadline_ms", c_uint32),
        ("warmup_frames", c_int32),
        ("cpu_affinity", c_char_p),
        # 0.3.0
        ("seed", c_uint64),
        # 0.4.0
        ("progress_fn", PROGRESS_FN),
        ("progress_user", c_void_p),
        # after 0.5.0
        ("vision_tokens_fn", VISION_TOKENS_FN),
        ("vision_tokens_user", c_void_p),
    ]


class CameraImage(ctypes.Structure):
    _fields_ = [
        ("rgb", POINTER(c_uint8)),
        ("width", c_uint32),
        ("height", c_uint32),
        ("stride", c_size_t),
        ("name", c_char_p),
    ]


class Frame(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("rgb", POINTER(c_uint8)),
        ("width", c_uint32),
        ("height", c_uint32),
        ("stride", c_size_t),
        ("instruction", c_char_p),
        ("tag", c_uint64),
        ("timestamp_ns", c_int64),
        # 0.2.0
        ("sequence", c_uint64),
        ("deadline_ns", c_int64),
        # 0.3.0
        ("n_cameras", c_uint32),
        ("cameras", POINTER(CameraImage)),
        ("lidar2img", POINTER(c_float)),
        ("intrinsics", POINTER(c_float)),
        ("extrinsics", POINTER(c_float)),
        ("ego_pose", POINTER(c_float)),
        ("can_bus", POINTER(c_float)),
        ("command", c_int32),
        ("command_timestamp_ns", c_int64),
        ("vision_tokens", POINTER(c_float)),
        ("n_vision_tokens", c_uint32),
        ("vision_token_width", c_uint32),
        ("noise", POINTER(c_float)),
        ("n_noise", c_uint32),
        # 0.4.0
        ("unnorm_key", c_char_p),
        # after 0.5.0
        ("stream", c_uint64),
    ]


class ActionExtraInfo(ctypes.Structure):
    _fields_ = [
        ("name", c_char * 24),
        ("offset", c_uint32),
        ("count", c_uint32),
    ]


class Action(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("frame_id", c_uint64),
        ("tag", c_uint64),
        ("timestamp_ns", c_int64),
        ("status", c_enum),
        ("action_dim", c_uint32),
        ("values", c_double * MAX_ACTION_DIM),
        ("token_ids", c_int32 * MAX_ACTION_DIM),
        ("submitted_ns", c_int64),
        ("started_ns", c_int64),
        ("finished_ns", c_int64),
        ("vision_ns", c_int64),
        ("prefill_ns", c_int64),
        ("decode_ns", c_int64),
        # 0.2.0
        ("sequence", c_uint64),
        ("deadline_ns", c_int64),
        ("episode", c_uint64),
        # 0.3.0
        ("kind", c_enum),
        ("n_points", c_uint32),
        ("trajectory", c_float * (MAX_TRAJECTORY_POINTS * 2)),
        ("n_extras", c_uint32),
        ("extra_info", ActionExtraInfo * MAX_ACTION_EXTRAS),
        ("extras", c_float * MAX_ACTION_EXTRA_FLOATS),
        # 0.5.0: the frame's own failure message
        ("message", c_char * 256),
    ]


class StageStats(ctypes.Structure):
    _fields_ = [
        ("backend", c_char * 32),
        ("first_block", c_uint32),
        ("n_blocks", c_uint32),
        ("passes", c_uint64),
        ("busy_ns", c_int64),
        ("handoff_ns", c_int64),
        ("prefill_block_ns", c_int64),
        ("decode_block_ns", c_int64),
    ]


class SessionInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("action_dim", c_uint32),
        ("n_llm_layers", c_uint32),
        ("n_prompt_image_tokens", c_uint32),
        ("backends", c_char * 128),
        ("unnorm_key", c_char * 128),
        ("host_weight_bytes", c_uint64),
        ("backend_weight_bytes", c_uint64),
        ("backend_work_bytes", c_uint64),
        # 0.2.0
        ("gpu_bytes", c_uint64),
        ("execution_mode", c_enum),
        ("frames_in_flight", c_uint32),
        ("n_stages", c_uint32),
        ("stages", StageStats * 4),
        ("llm_split", c_int32),
        ("split_min", c_uint32),
        ("split_max", c_uint32),
        ("split_changes", c_uint32),
        ("frames_completed", c_uint64),
        ("handoff_ns", c_int64),
    ]


class Latency(ctypes.Structure):
    _fields_ = [
        ("count", c_uint64),
        ("p50_ns", c_int64),
        ("p95_ns", c_int64),
        ("max_ns", c_int64),
        ("mean_ns", c_int64),
    ]


class SessionStats(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("submitted", c_uint64),
        ("rejected", c_uint64),
        ("completed", c_uint64),
        ("dropped", c_uint64),
        ("expired", c_uint64),
        ("cancelled", c_uint64),
        ("failed", c_uint64),
        ("pending", c_uint32),
        ("running", c_uint32),
        ("unpolled", c_uint32),
        ("episode", c_uint64),
        ("end_to_end", Latency),
        ("queue_wait", Latency),
        ("compute", Latency),
        ("vision", Latency),
        ("prefill", Latency),
        ("decode", Latency),
        ("n_stages", c_uint32),
        ("stage_pass", Latency * 4),
    ]


class PromptRequest(ctypes.Structure):  # 0.5.0
    _fields_ = [
        ("struct_size", c_size_t),
        ("instruction", c_char_p),
        ("command", c_int32),
    ]


class PromptRound(ctypes.Structure):  # 0.5.0
    _fields_ = [
        ("struct_size", c_size_t),
        ("ids", POINTER(c_int32)),
        ("ids_capacity", c_size_t),
        ("name", c_char * 16),
        ("n_ids", c_size_t),
        ("image_position", c_int64),
        ("n_image_rows", c_uint32),
    ]


# The C names of the mirrors, for the layout test.
C_NAMES = {
    "vh_session_params": SessionParams,
    "vh_camera_image": CameraImage,
    "vh_frame": Frame,
    "vh_action_extra_info": ActionExtraInfo,
    "vh_action": Action,
    "vh_stage_stats": StageStats,
    "vh_session_info": SessionInfo,
    "vh_latency": Latency,
    "vh_session_stats": SessionStats,
    "vh_prompt_request": PromptRequest,
    "vh_prompt_round": PromptRound,
}


def struct_to_dict(value):
    """A ctypes struct (nested structs and arrays included) as plain Python values."""
    if isinstance(value, ctypes.Structure):
        return {name: struct_to_dict(getattr(value, name)) for name, _ in value._fields_}
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, ctypes.Array):
        return [struct_to_dict(v) for v in value]
    return value
