/*
 * vlahybrid: run Vision-Language-Action models on the GPU and the CPU of one computer.
 *
 * The session API in five calls:
 *
 *     vh_session_params p;  vh_session_params_init(&p);
 *     p.model_path = "/models/openvla-7b";  p.unnorm_key = "bridge_orig";
 *     vh_session *s;
 *     if (vh_session_create(&p, &s) != VH_OK) fprintf(stderr, "%s\n", vh_last_error());
 *     vh_frame f;  vh_frame_init(&f);  f.rgb = pixels;  f.width = 640;  ...
 *     uint64_t id;  vh_submit_frame(s, &f, &id);          // camera thread
 *     vh_action a;  vh_action_init(&a);
 *     vh_poll_action(s, &a, -1);                           // control thread
 *     vh_session_destroy(s);
 *
 * Conventions
 * - Every function returns a vh_status (VH_OK == 0) unless it is a getter that cannot fail.
 * - Structs that cross the API carry their own size in `struct_size`; fill it with the matching
 *   *_init() (an inline function here, so it records the size your program was compiled with).
 *   The library reads and writes only the first `struct_size` bytes, so fields can be appended in
 *   later versions without breaking programs built against this header.
 * - Handles are opaque. The library keeps no global state besides the per-thread last-error text:
 *   each session loads its own plugins.
 * - The library never writes to stdout or stderr: messages go to the log callback, if one is set.
 */
#ifndef VLAHYBRID_H
#define VLAHYBRID_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(VH_BUILDING_LIBRARY) && defined(__GNUC__)
#define VH_API __attribute__((visibility("default")))
#else
#define VH_API
#endif

#define VH_VERSION_MAJOR 0
#define VH_VERSION_MINOR 5
#define VH_VERSION_PATCH 0
#define VH_VERSION_NUMBER (VH_VERSION_MAJOR * 10000 + VH_VERSION_MINOR * 100 + VH_VERSION_PATCH)

/* The version of the library loaded at run time, as VH_VERSION_NUMBER and as "0.2.0". */
VH_API unsigned vh_version_number(void);
VH_API const char *vh_version(void);

/* ------------------------------------------------------------------------------------------------
 * Status codes. The numeric values are part of the ABI and never change.
 */
typedef enum vh_status {
    VH_OK = 0,
    VH_ERR_INVALID_ARGUMENT = 1,     /* a NULL, a zero size, a value out of range */
    VH_ERR_STRUCT_SIZE = 2,          /* struct_size is not one this library knows (forgot *_init?) */
    VH_ERR_OUT_OF_MEMORY = 3,        /* a host allocation failed */
    VH_ERR_DEVICE_OUT_OF_MEMORY = 4, /* a device allocation failed or the memory budget is too small */
    VH_ERR_IO = 5,                   /* a file could not be opened, read or mapped */
    VH_ERR_BAD_MODEL = 6,            /* the checkpoint folder is malformed, truncated or inconsistent */
    VH_ERR_UNSUPPORTED = 7,          /* well-formed, but a model kind or option this version lacks */
    VH_ERR_BACKEND_NOT_FOUND = 8,    /* no plugin of that name in the search path */
    VH_ERR_BACKEND_ABI = 9,          /* a plugin built for an incompatible backend ABI */
    VH_ERR_BACKEND_FAILED = 10,      /* a backend failed to initialise or to run a step */
    VH_ERR_BUSY = 11,                /* the submit queue is full (policy VH_QUEUE_REJECT), or the
                                        frame to cancel has already started */
    VH_ERR_TIMEOUT = 12,             /* vh_poll_action: no result within the timeout */
    VH_ERR_DROPPED = 13,             /* result status: the frame was displaced by a newer one */
    VH_ERR_CANCELLED = 14,           /* result status: the frame was cancelled (vh_session_cancel*,
                                        vh_session_reset, vh_session_shutdown, destroy) */
    VH_ERR_EXPIRED = 15,             /* result status: the frame's deadline passed before it started */
    VH_ERR_UNNORM_KEY = 16,          /* unnorm_key missing (several datasets) or not in norm_stats */
    VH_ERR_BAD_FRAME = 17,           /* the frame's image or instruction is unusable */
    VH_ERR_INTERNAL = 18,            /* a bug: please report it with the message */
    /* Added in 0.4.0: */
    VH_ERR_SHUTDOWN = 19,            /* the session was shut down (vh_session_shutdown) */
    /* Added in 0.5.0: */
    VH_ERR_FORKED = 20               /* the session was used in a child of fork(): only its creating
                                        process can use it (doc/api.md, "fork") */
} vh_status;

/* A static English description of a status ("invalid argument"); never NULL. */
VH_API const char *vh_status_string(vh_status status);

/* The detailed message of the last failed vlahybrid call made by the calling thread
 * (any session, and vh_session_create). Never NULL; "" when there was none. The text stays
 * valid until the calling thread's next failing call. */
VH_API const char *vh_last_error(void);

/* ------------------------------------------------------------------------------------------------
 * Logging: silent unless a callback is set. The callback may be called from any library thread
 * (including plugin threads), must be thread-safe, and must not call back into the session.
 */
typedef enum vh_log_level {
    VH_LOG_ERROR = 0,
    VH_LOG_WARN = 1,
    VH_LOG_INFO = 2,
    VH_LOG_DEBUG = 3
} vh_log_level;

typedef void (*vh_log_fn)(void *user, vh_log_level level, const char *message);

/* ------------------------------------------------------------------------------------------------
 * Session parameters.
 */
typedef enum vh_queue_policy {
    /* "latest": a new frame displaces the oldest frame that has not started; that frame is
     * answered with status VH_ERR_DROPPED. vh_submit_frame never blocks. The default: a control
     * loop gets its newest frame computed next. */
    VH_QUEUE_DROP_OLDEST = 0,
    VH_QUEUE_LATEST = VH_QUEUE_DROP_OLDEST,
    /* vh_submit_frame returns VH_ERR_BUSY and accepts nothing while the queue is full. */
    VH_QUEUE_REJECT = 1,
    /* vh_submit_frame waits until there is room. */
    VH_QUEUE_BLOCK = 2
} vh_queue_policy;

/* RoPE positions of the action tokens after the first. The prompt (BOS, image patches, text)
 * always takes positions 0 .. N-1. */
typedef enum vh_decode_positions {
    /* Decode step k (k >= 1) at position N + k - 1: contiguous, as the model was trained and as
     * transformers' generate() numbers them. The default. */
    VH_DECODE_POSITIONS_CONTIGUOUS = 0,
    /* Decode step k at position T + k - 1, T = the text prompt's length: what OpenVLA's own
     * predict_action gives under its pinned transformers 4.40, whose generate() counts only the
     * text tokens (cache_position) and so skips the image patches. Choose it to reproduce
     * actions computed with that stack. */
    VH_DECODE_POSITIONS_OPENVLA_HF440 = 1
} vh_decode_positions;

/* How a session runs its frames through the model's stages. */
typedef enum vh_execution_mode {
    /* Two backends: several frames in flight, one thread per stage: while the second stage runs
     * frame t's token step, the first runs frame t+1's (vision, prefill or step). Results are
     * identical to SERIAL with the same backends and split. The default (one backend: serial). */
    VH_EXECUTION_PIPELINE = 0,
    /* One frame at a time; each of its passes goes through the stages in turn. */
    VH_EXECUTION_SERIAL = 1,
    /* Cross-request packed decoding: every forward pass carries the prefills of the newest frames
     * (one with the default frames_in_flight, the action's length; more with more) and one decode
     * row of each frame in flight, so the weights are read once for all of them. Higher
     * throughput, longer latency per frame; a frame's action is returned as soon as its own
     * tokens exist, whatever arrives after it. With two backends every pass carries every frame
     * in flight (the second stage reads its weights once for all of them), and while the second
     * stage runs a pass the first runs the new frames' vision and prefill for the next. */
    VH_EXECUTION_PACKED = 2
} vh_execution_mode;

/* Progress of vh_session_create (llama.cpp's progress_callback): `stage` is a short name of what is
 * being done ("loading weights", "backend cuda", "warm-up"), `fraction` the share of the whole
 * create done, in [0, 1], never decreasing, 1.0 at the last call of a create that succeeds. Return
 * 0 to go on, nonzero to abort: vh_session_create then frees everything and returns
 * VH_ERR_CANCELLED. Called on the thread that runs the create: the caller's, or with cpu_affinity
 * set, the library thread it starts on those CPUs while the caller waits (calls never overlap).
 * It must not call back into the library's session functions. */
typedef int (*vh_progress_fn)(void *user, const char *stage, double fraction);

/* Added after 0.5.0. The vision tokens a model's camera front end made for a frame (Orion from
 * cameras: 529 rows [det scene 256 | history 16 | can-bus 1 | map 256] of the LLM's width), so that a
 * program can compare the front end with a dump of the released agent's. Called on the session's
 * worker thread once per frame whose tokens the front end made (not for frames that bring their own
 * vision tokens, nor for warm-up frames), after the front end and before the frame's decision, in
 * submission order; `frame_id` is the id vh_submit_frame gave. `tokens` [rows][width] is valid
 * during the call only. It must return promptly (the frame waits) and must not call back into the
 * session. */
typedef void (*vh_vision_tokens_fn)(void *user, uint64_t frame_id, const float *tokens, uint32_t rows, uint32_t width);

typedef struct vh_session_params {
    size_t struct_size;          /* set by vh_session_params_init() */
    const char *model_path;      /* Hugging Face checkpoint folder (config.json, *.safetensors, ...) */
    const char *backends;        /* "cpu_generic", "cuda,cpu_amx", ... NULL: the best one available */
    const char *plugin_path;     /* plugin file or folder searched before VH_BACKEND_PATH; may be NULL */
    const char *unnorm_key;      /* norm_stats dataset; NULL with several: each frame names its own */
    uint32_t queue_capacity;     /* frames waiting to start; default 2, at least 1 */
    vh_queue_policy queue_policy;/* what submit does when the queue is full; default DROP_OLDEST */
    int32_t n_threads;           /* CPU threads for each CPU backend; 0: all CPUs the session may use
                                    (cpu_affinity, else the creating thread's CPUs; beside a
                                    GPU stage: all but one, left to the GPU stage's thread) */
    vh_log_fn log_fn;            /* NULL: silent */
    void *log_user;              /* passed to log_fn */
    vh_log_level log_level;      /* most verbose level delivered; default VH_LOG_INFO */
    vh_decode_positions decode_positions; /* default VH_DECODE_POSITIONS_CONTIGUOUS */
    uint64_t gpu_memory_budget;  /* bytes a GPU backend may take (weights + KV + workspace); 0: the
                                    whole card. Too small: VH_ERR_DEVICE_OUT_OF_MEMORY at create. */
    /* Added in 0.2.0 (a caller built with the 0.1.0 header passes the shorter struct_size,
       which is accepted: these fields then take their defaults): */
    int32_t llm_split;           /* with two backends named ("cuda,cpu_amx"): how many of the LLM's
                                    blocks run on the first, which also runs the vision towers,
                                    projector and embedding; the second runs the rest and the LM
                                    head. 0..n_layers. Default -1: chosen at create. With a
                                    gpu_memory_budget and a GPU first: as many blocks as fit the
                                    budget (weights, KV cache, work space, as the backend counts
                                    them). Otherwise: the split balancing the two stages' per-block
                                    costs, measured on both backends at create (and cached, see
                                    doc/architecture.md). Ignored with one backend. */
    vh_execution_mode execution_mode; /* default VH_EXECUTION_PIPELINE; one backend: serial */
    int32_t split_zone;          /* two backends: LLM blocks on each side of the split held by both
                                    stages, inside which the split follows the measured stage times
                                    frame by frame. Default -1: 0 with an explicit llm_split, 2
                                    when the split is chosen. */
    const char *trace_path;      /* write a Chrome trace (JSON, for Perfetto) of the stages' work
                                    here at destroy; NULL: the VH_TRACE environment variable, if set */
    uint32_t frames_in_flight;   /* pipeline and packed: frames between their first and last pass
                                    at once, each with its own KV cache slot on every stage (1..32).
                                    Default 0: pipeline, as many as stages (more hide the passes'
                                    ping-pong between the stages better); packed, the action's
                                    length (7 for OpenVLA: a frame enters with each pass); with
                                    two stages twice (length + 1), 16 (two frames enter a pass,
                                    and two more wait with their first stage done). Packed with
                                    more: a pass takes up to ceil(frames_in_flight / length)
                                    new frames at once, ceil(frames_in_flight / (length + 1))
                                    with two stages (vision and prefills batched). */
    uint32_t deadline_ms;        /* a frame must start within this many milliseconds of its
                                    submission, else it is answered VH_ERR_EXPIRED without being
                                    computed. 0: no deadline (default). A frame's own deadline_ns
                                    takes precedence. */
    int32_t warmup_frames;       /* frames run and discarded inside vh_session_create, so that the
                                    first real frame pays no first-use costs (plans, kernel
                                    selection, graphs, primitive caches). -1 (default): what the
                                    execution mode needs; 0: none; at most 64. They are not
                                    counted anywhere and take no frame ids. */
    const char *cpu_affinity;    /* the CPUs every thread of the session may run on (its own and
                                    the CPU backends'), as Linux writes CPU lists: "0-7,16". NULL
                                    or "": the CPUs of the thread calling vh_session_create. The
                                    calling thread's own affinity is never changed. (cpu_generic's
                                    OpenBLAS keeps the thread pool it made when first loaded into
                                    the process: doc/api.md, "A good neighbour".) */
    /* Added in 0.3.0 (callers built with the 0.1 or 0.2 header pass their shorter struct_size;
       these then take their defaults): */
    uint64_t seed;               /* driving models that sample (Orion's planner draws its latent at
                                    inference): a frame without its own noise gets noise from this
                                    seed and the frame's sequence number, so runs repeat. Default 0. */
    /* Added in 0.4.0 (callers built with older headers pass their shorter struct_size; these then
       take their defaults): */
    vh_progress_fn progress_fn;  /* vh_session_create's progress (see vh_progress_fn); NULL: none */
    void *progress_user;         /* passed to progress_fn */
    /* Added after 0.5.0 (callers built with the 0.4 or 0.5 header pass their shorter struct_size): */
    vh_vision_tokens_fn vision_tokens_fn; /* each frame's front-end tokens (see vh_vision_tokens_fn); NULL: none */
    void *vision_tokens_user;    /* passed to vision_tokens_fn */
} vh_session_params;

VH_API void vh_session_params_init_sized(vh_session_params *params, size_t struct_size);
/* Fill defaults and struct_size. Always call this before setting fields. */
static inline void vh_session_params_init(vh_session_params *params)
{
    vh_session_params_init_sized(params, sizeof *params);
}

/* ------------------------------------------------------------------------------------------------
 * Frames in, actions out.
 */
/* One camera's image of a multi-camera frame (0.3.0). */
typedef struct vh_camera_image {
    const uint8_t *rgb;        /* RGB8, row-major, 3 bytes a pixel; copied on submit */
    uint32_t width, height;    /* pixels, 1..16384 */
    size_t stride;             /* bytes per row; 0: width * 3 */
    const char *name;          /* "CAM_FRONT", ...; may be NULL */
} vh_camera_image;

#define VH_CAN_BUS_FLOATS 18
#define VH_COMMAND_NONE (-1)

typedef struct vh_frame {
    size_t struct_size;        /* set by vh_frame_init() */
    const uint8_t *rgb;        /* RGB8 pixels, row-major, 3 bytes a pixel; copied on submit */
    uint32_t width, height;    /* pixels; each at least 1 and at most 16384 */
    size_t stride;             /* bytes from one row to the next; 0 means width * 3 */
    const char *instruction;   /* UTF-8 task text, e.g. "pick up the red block"; copied on submit */
    uint64_t tag;              /* the caller's own value, returned in the action */
    int64_t timestamp_ns;      /* the caller's capture time, returned in the action */
    /* Added in 0.2.0 (a caller built with the 0.1.0 header passes the shorter struct_size; these
       then read as 0): */
    uint64_t sequence;         /* the caller's sequence number (e.g. the camera's frame counter),
                                  returned in the action */
    int64_t deadline_ns;       /* CLOCK_MONOTONIC time by which the frame must have started, else
                                  it is answered VH_ERR_EXPIRED without being computed. 0: the
                                  session's deadline_ms, if any. */
    /* Added in 0.3.0, for driving models (doc/api.md, "Driving models"): every pointer is copied
       on submit; NULL / 0 when absent. Which of them a model needs is its family's to say; a
       frame that lacks what its model needs is refused at submit with VH_ERR_BAD_FRAME. */
    uint32_t n_cameras;
    const vh_camera_image *cameras;   /* [n_cameras] */
    const float *lidar2img;    /* [n_cameras][16] row-major 4x4 per camera, or NULL */
    const float *intrinsics;   /* [n_cameras][16] row-major 4x4 (3x3 in the top left), or NULL */
    const float *extrinsics;   /* [n_cameras][16] row-major 4x4 (lidar2cam), or NULL */
    const float *ego_pose;     /* [16] row-major 4x4 lidar-to-global pose, or NULL */
    const float *can_bus;      /* [VH_CAN_BUS_FLOATS] or NULL */
    int32_t command;           /* high-level command 0..5 (CARLA RoadOption - 1: left, right,
                                  straight, lane follow, change lane left, change lane right);
                                  VH_COMMAND_NONE (-1, the default) when not given */
    int64_t command_timestamp_ns; /* when the command was issued (the caller's clock), 0: unknown */
    const float *vision_tokens;   /* precomputed vision tokens [n_vision_tokens][vision_token_width]
                                     fp32, for users with their own perception stack (Orion: the 529
                                     tokens of its QT-Former heads, width 4096) */
    uint32_t n_vision_tokens, vision_token_width;
    const float *noise;        /* a sampling model's noise for this frame (Orion: 32 floats, the
                                  planner's epsilon), or NULL: drawn from the session's seed */
    uint32_t n_noise;
    /* Added in 0.4.0 (callers with older headers pass the shorter struct_size: the session's key
       applies): */
    const char *unnorm_key;    /* the dataset whose statistics un-normalise this frame's action, as
                                  HF's predict_action takes it per call; copied on submit. NULL:
                                  the session's unnorm_key. One the model lacks (or one whose
                                  action has another length than the session's) is refused at
                                  submit with VH_ERR_UNNORM_KEY. */
    /* Added after 0.5.0 (callers with 0.5.0 headers pass the shorter struct_size: stream 0): */
    uint64_t stream;           /* the caller's stream (a vehicle, a robot) the frame belongs to: a
                                  model that keeps state across frames (Orion's camera front end)
                                  keeps it per stream, frames of one stream in submission order */
} vh_frame;

VH_API void vh_frame_init_sized(vh_frame *frame, size_t struct_size);
static inline void vh_frame_init(vh_frame *frame) { vh_frame_init_sized(frame, sizeof *frame); }

#define VH_MAX_ACTION_DIM 32
#define VH_MAX_TRAJECTORY_POINTS 64
#define VH_MAX_ACTION_EXTRAS 8
#define VH_MAX_ACTION_EXTRA_FLOATS 1024

typedef enum vh_action_kind {
    VH_ACTION_VALUES = 0,      /* values[0 .. action_dim): an end-effector action (OpenVLA) */
    VH_ACTION_TRAJECTORY = 1   /* trajectory[0 .. 2 n_points): waypoints (Orion) */
} vh_action_kind;

/* One named extra output of an action: extras[offset .. offset + count). */
typedef struct vh_action_extra_info {
    char name[24];             /* Orion: "mode_trajectories" (6 modes x 6 points x 2, cumulative),
                                  "mu", "log_sigma" (32 each) */
    uint32_t offset, count;
} vh_action_extra_info;

typedef struct vh_action {
    size_t struct_size;        /* set by vh_action_init() */
    uint64_t frame_id;         /* the id vh_submit_frame gave the frame */
    uint64_t tag;              /* the frame's tag */
    int64_t timestamp_ns;      /* the frame's timestamp */
    vh_status status;          /* VH_OK, or why there is no action (DROPPED, CANCELLED, ...) */
    uint32_t action_dim;       /* values used in `values` and `token_ids` (7 for OpenVLA) */
    double values[VH_MAX_ACTION_DIM];     /* un-normalised action */
    int32_t token_ids[VH_MAX_ACTION_DIM]; /* the generated action token ids */
    /* Timings, CLOCK_MONOTONIC nanoseconds. */
    int64_t submitted_ns, started_ns, finished_ns;
    int64_t vision_ns;         /* image preprocessing, vision towers and projector */
    int64_t prefill_ns;        /* the LLM over the prompt, up to the first action token */
    int64_t decode_ns;         /* the remaining action tokens */
    /* Added in 0.2.0 (a caller with the 0.1.0 header gets the fields above): */
    uint64_t sequence;         /* the frame's sequence */
    int64_t deadline_ns;       /* the deadline that applied (CLOCK_MONOTONIC), 0: none */
    uint64_t episode;          /* vh_session_reset calls made before the frame was submitted */
    /* Added in 0.3.0 (callers with older headers get the fields above): what the action is. */
    vh_action_kind kind;       /* VH_ACTION_VALUES (action_dim values, OpenVLA) or
                                  VH_ACTION_TRAJECTORY (n_points (x, y) waypoints) */
    uint32_t n_points;
    float trajectory[VH_MAX_TRAJECTORY_POINTS * 2]; /* (x, y) in metres in the model's frame (Orion:
                                  the current LiDAR frame, x right, y forward), cumulative */
    uint32_t n_extras;         /* the family's extras, named in extra_names (vh_action_extra) */
    vh_action_extra_info extra_info[VH_MAX_ACTION_EXTRAS];
    float extras[VH_MAX_ACTION_EXTRA_FLOATS];
    /* Added in 0.5.0 (callers with older headers get the fields above): this frame's own failure
     * message, NUL-terminated; "" on success and for DROPPED, CANCELLED and EXPIRED. */
    char message[256];
} vh_action;

VH_API void vh_action_init_sized(vh_action *action, size_t struct_size);

/* The extra named `name` of an action (0.3.0 fields): a pointer into action->extras and its float
 * count, or NULL when the action has no such extra. */
static inline const float *vh_action_extra(const vh_action *action, const char *name, uint32_t *count)
{
    for (uint32_t i = 0; i < action->n_extras && i < VH_MAX_ACTION_EXTRAS; i++) {
        const vh_action_extra_info *e = &action->extra_info[i];
        uint32_t k = 0;
        while (k < sizeof e->name && e->name[k] && e->name[k] == name[k]) k++;
        if ((k == sizeof e->name || !e->name[k]) && !name[k] && e->offset + e->count <= VH_MAX_ACTION_EXTRA_FLOATS) {
            if (count) *count = e->count;
            return action->extras + e->offset;
        }
    }
    if (count) *count = 0;
    return NULL;
}
static inline void vh_action_init(vh_action *action) { vh_action_init_sized(action, sizeof *action); }

/* ------------------------------------------------------------------------------------------------
 * Sessions.
 */
typedef struct vh_session vh_session;

/* Load the model, load and initialise the backends, warm up, and start the worker thread.
 * On failure returns the status, sets *session to NULL, and leaves the message in vh_last_error()
 * (and in the log callback). Thread-safe: sessions are independent. */
VH_API vh_status vh_session_create(const vh_session_params *params, vh_session **session);

/* Added in 0.4.0. Shut the session down while other threads may be inside it, so that it can
 * then be destroyed (as zmq_ctx_shutdown, or gRPC's Shutdown):
 *   - every thread blocked in vh_submit_frame (VH_QUEUE_BLOCK, queue full) or vh_poll_action is
 *     woken and returns VH_ERR_SHUTDOWN;
 *   - from then on every call on the session returns VH_ERR_SHUTDOWN at once (checked right after
 *     the NULL-session check, before any other argument), except vh_session_get_info,
 *     vh_session_get_stats, vh_session_last_error, vh_session_shutdown and vh_session_destroy;
 *   - every accepted frame is answered exactly once: frames not yet started VH_ERR_CANCELLED;
 *     frames already started run to their end (an action, or the error that ends them) before
 *     this returns. These answers are counted in vh_session_get_stats but can no longer be
 *     polled (results not polled before the shutdown are discarded at destroy).
 * Blocks until the frames already started are answered (at most frames_in_flight frames'
 * compute). Returns VH_OK (also when called again: idempotent), VH_ERR_INVALID_ARGUMENT for NULL.
 * Thread-safe: any thread, any number of times, concurrently with every call but destroy; not
 * from the log callback. Once it has returned and the program's own threads have left the
 * library's calls, vh_session_destroy is safe. */
VH_API vh_status vh_session_shutdown(vh_session *session);

/* Stop the session: frames not yet started are answered VH_ERR_CANCELLED and dropped with the
 * session, the frames in flight (up to frames_in_flight) finish, results not yet polled are
 * discarded, threads are joined, everything is freed. No other call on this session may run at
 * the same time or after. NULL is accepted and ignored. To see every frame's answer, call
 * vh_session_cancel_pending and poll until vh_session_get_stats shows nothing pending, running
 * or unpolled, then destroy. */
VH_API void vh_session_destroy(vh_session *session);

/* Queue a frame. The image and the instruction are copied; the caller keeps its buffers.
 * On VH_OK, *frame_id (if not NULL) receives the frame's id (1, 2, 3, ... per session), and the
 * frame will yield exactly one vh_action, in submission order. On VH_ERR_BUSY (policy REJECT)
 * or any other error nothing was queued. Thread-safe; may block only with VH_QUEUE_BLOCK. */
VH_API vh_status vh_submit_frame(vh_session *session, const vh_frame *frame, uint64_t *frame_id);

/* Take the next result, in submission order. timeout_ms: 0 returns at once, < 0 waits without
 * limit. Returns VH_OK with *action filled (check action->status: VH_OK means values are set),
 * or VH_ERR_TIMEOUT when no result was ready in time. Thread-safe. A frame whose deadline passes
 * while it waits is answered VH_ERR_EXPIRED by the time it is next in line, not later. */
VH_API vh_status vh_poll_action(vh_session *session, vh_action *action, int32_t timeout_ms);

/* Cancel one frame that has not started: it is answered VH_ERR_CANCELLED (in its place in the
 * submission order). VH_ERR_BUSY if it has already started or been answered (nothing changes),
 * VH_ERR_INVALID_ARGUMENT if the session never gave that id. Thread-safe. */
VH_API vh_status vh_session_cancel(vh_session *session, uint64_t frame_id);

/* Cancel every frame that has not started; each is answered VH_ERR_CANCELLED. *n_cancelled (if
 * not NULL) receives how many. Frames already started finish. Thread-safe. */
VH_API vh_status vh_session_cancel_pending(vh_session *session, uint32_t *n_cancelled);

/* Flags of vh_session_reset. */
#define VH_RESET_STATISTICS 1u   /* also start the statistics (vh_session_get_stats) afresh */

/* Start a new episode without reloading anything: every frame not yet started is answered
 * VH_ERR_CANCELLED, the call waits until the frames already started are answered, and frames
 * submitted from then on carry the next episode number (vh_action.episode). Results not yet
 * polled stay pollable. OpenVLA keeps no model state from one frame to the next (each frame's
 * KV cache is rebuilt from its own prompt), so nothing of an episode reaches the next; the
 * split scheduler keeps its measurements of the machine. Call it from the submitting thread:
 * a frame submitted while it runs belongs to either episode. Thread-safe. */
VH_API vh_status vh_session_reset(vh_session *session, uint32_t flags);

/* The detailed message of the session's last error, from any thread (a call that failed, or a
 * frame that failed in a worker thread), copied under the session's lock. Never NULL; valid until
 * the calling thread's next call. */
VH_API const char *vh_session_last_error(vh_session *session);

/* The prompt token ids the session would feed the model for `instruction` (BOS, the OpenVLA
 * prompt, and the trailing 29871), into ids[0 .. capacity). *count receives the full length even
 * when it exceeds capacity (then VH_ERR_INVALID_ARGUMENT is returned). Thread-safe. Models whose
 * frames have one prompt round answer with its ids (Orion: its fixed prompt, the instruction
 * ignored); MindDrive's two rounds: VH_ERR_UNSUPPORTED (vh_session_prompt_rounds gives each, and
 * every round's image position). */
VH_API vh_status vh_session_prompt_ids(vh_session *session, const char *instruction, int32_t *ids,
                                       size_t capacity, size_t *count);

/* One stage of a session: a backend and the blocks it holds. */
typedef struct vh_stage_stats {
    char backend[32];
    uint32_t first_block, n_blocks;   /* the executor's blocks (model order; stages overlap in the zone) */
    uint64_t passes;                  /* prefill and decode passes run */
    int64_t busy_ns;                  /* time spent in them (hand-off included) */
    int64_t handoff_ns;               /* ... of which handing hidden states in and out */
    int64_t prefill_block_ns;         /* smoothed cost of one LLM block in a prefill pass (0: none) */
    int64_t decode_block_ns;          /* ... in a one-token decode pass */
} vh_stage_stats;

/* Facts about the loaded session. */
typedef struct vh_session_info {
    size_t struct_size;        /* set by vh_session_info_init() */
    uint32_t action_dim;       /* values per action */
    uint32_t n_llm_layers;     /* decoder blocks */
    uint32_t n_prompt_image_tokens; /* patch embeddings spliced into the prompt */
    char backends[128];        /* the backends in use, comma-separated, e.g. "cpu_generic" */
    char unnorm_key[128];      /* the norm_stats dataset in use */
    uint64_t host_weight_bytes;   /* checkpoint bytes mapped */
    uint64_t backend_weight_bytes;/* bytes the backends made resident (copies, conversions) */
    uint64_t backend_work_bytes;  /* KV caches and activation buffers */
    /* Added in 0.2.0 (a caller with the 0.1.0 header passes the shorter struct_size and gets
       the fields above): */
    uint64_t gpu_bytes;           /* device memory the GPU stages hold (weights + KV + work space) */
    vh_execution_mode execution_mode;
    uint32_t frames_in_flight;    /* at most this many frames between their first and last pass */
    uint32_t n_stages;
    vh_stage_stats stages[4];     /* the first n_stages (at most 4) */
    int32_t llm_split;            /* two stages: LLM blocks on the first for the next frame; else -1 */
    uint32_t split_min, split_max;/* the dynamic zone the split moves in */
    uint32_t split_changes;       /* how often the scheduler moved it */
    uint64_t frames_completed;    /* frames that ran to an action */
    int64_t handoff_ns;           /* hidden-state hand-off between stages, all frames */
} vh_session_info;

VH_API void vh_session_info_init_sized(vh_session_info *info, size_t struct_size);
static inline void vh_session_info_init(vh_session_info *info)
{
    vh_session_info_init_sized(info, sizeof *info);
}
VH_API vh_status vh_session_get_info(vh_session *session, vh_session_info *info);

/* ------------------------------------------------------------------------------------------------
 * Statistics, readable at any time from any thread.
 */
#define VH_STATS_WINDOW 1024  /* percentiles are over this many most recent samples */

typedef struct vh_latency {
    uint64_t count;            /* samples (since create, or the last reset with VH_RESET_STATISTICS) */
    int64_t p50_ns, p95_ns;    /* nearest-rank percentiles of the last VH_STATS_WINDOW samples:
                                  the ceil(p/100 * n)-th smallest; 0 without samples */
    int64_t max_ns;            /* the largest sample of all */
    int64_t mean_ns;           /* the mean of all */
} vh_latency;

typedef struct vh_session_stats {
    size_t struct_size;        /* set by vh_session_stats_init() */
    /* Frames, counted when they are answered (whether or not polled yet): */
    uint64_t submitted;        /* accepted by vh_submit_frame */
    uint64_t rejected;         /* refused with VH_ERR_BUSY */
    uint64_t completed;        /* answered with an action (VH_OK) */
    uint64_t dropped;          /* answered VH_ERR_DROPPED (displaced under VH_QUEUE_LATEST) */
    uint64_t expired;          /* answered VH_ERR_EXPIRED */
    uint64_t cancelled;        /* answered VH_ERR_CANCELLED */
    uint64_t failed;           /* answered with any other error (vh_session_last_error says why) */
    /* Now: */
    uint32_t pending;          /* accepted, not started */
    uint32_t running;          /* started, not answered */
    uint32_t unpolled;         /* answered, not polled */
    uint64_t episode;          /* the current episode (vh_session_reset calls so far) */
    /* Latencies of the frames answered with an action, end to end and by part: */
    vh_latency end_to_end;     /* submitted -> action ready (finished_ns - submitted_ns) */
    vh_latency queue_wait;     /* submitted -> started */
    vh_latency compute;        /* started -> action ready */
    vh_latency vision, prefill, decode; /* the vh_action fields of the same names */
    /* Per stage of the plan (vh_session_info.stages): the time of each pass on that stage, a
     * frame's prefill or token step (serial, pipeline) or a packed pass's part (packed). */
    uint32_t n_stages;
    vh_latency stage_pass[4];
} vh_session_stats;

VH_API void vh_session_stats_init_sized(vh_session_stats *stats, size_t struct_size);
static inline void vh_session_stats_init(vh_session_stats *stats)
{
    vh_session_stats_init_sized(stats, sizeof *stats);
}
VH_API vh_status vh_session_get_stats(vh_session *session, vh_session_stats *stats);

/* ------------------------------------------------------------------------------------------------
 * Added in 0.5.0: every round of a frame's prompt, as the model is fed it, so that a program can
 * check it against its own agent's (doc/api.md, "Prompt rounds").
 */
/* What the frame would carry that decides its prompt. */
typedef struct vh_prompt_request {
    size_t struct_size;        /* set by vh_prompt_request_init() */
    const char *instruction;   /* OpenVLA: the frame's instruction (required). Orion, MindDrive:
                                  ignored, as in their frames (their prompts are fixed) */
    int32_t command;           /* driving models: the frame's command 0..5, or VH_COMMAND_NONE (the
                                  default; Orion's and MindDrive's prompts are the same for every
                                  command); another value is refused. OpenVLA: ignored */
} vh_prompt_request;

VH_API void vh_prompt_request_init_sized(vh_prompt_request *request, size_t struct_size);
static inline void vh_prompt_request_init(vh_prompt_request *request)
{
    vh_prompt_request_init_sized(request, sizeof *request);
}

/* One round: one prompt the frame's passes run (OpenVLA and Orion one, MindDrive two). */
typedef struct vh_prompt_round {
    size_t struct_size;        /* set by vh_prompt_round_init() */
    /* The caller's: */
    int32_t *ids;              /* room for ids_capacity token ids; may be NULL when that is 0 */
    size_t ids_capacity;
    /* The library's: */
    char name[16];             /* "prompt" (OpenVLA, Orion), "decision", "action" (MindDrive) */
    size_t n_ids;              /* the round's ids, also when more than ids_capacity */
    int64_t image_position;    /* the vision rows go before ids[image_position] (n_ids: after the
                                  last); -1: the round has none */
    uint32_t n_image_rows;     /* how many: image patches (OpenVLA) or vision tokens (529) */
} vh_prompt_round;

VH_API void vh_prompt_round_init_sized(vh_prompt_round *round, size_t struct_size);
static inline void vh_prompt_round_init(vh_prompt_round *round) { vh_prompt_round_init_sized(round, sizeof *round); }

/* Every round of the prompt a frame with `request`'s instruction and command is fed, in the order
 * the model runs them: rounds[i] (i < capacity, each set up by vh_prompt_round_init, all of one
 * struct_size) receives round i's name, ids, image position and vision row count. *n_rounds
 * receives how many rounds the frame has. When capacity is below that, or a round's ids exceed its
 * ids_capacity: VH_ERR_INVALID_ARGUMENT, with every count filled in and the ids that fit copied, so
 * a second call with that much room succeeds. OpenVLA: one round "prompt", the ids of
 * vh_session_prompt_ids, image_position 1. Orion: one round "prompt". MindDrive: "decision" (its
 * final speed token, which the model never runs, left out), then "action". Thread-safe. */
VH_API vh_status vh_session_prompt_rounds(vh_session *session, const vh_prompt_request *request,
                                          vh_prompt_round *rounds, uint32_t capacity, uint32_t *n_rounds);

#ifdef __cplusplus
}
#endif
#endif /* VLAHYBRID_H */
