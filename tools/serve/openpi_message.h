/* openpi's wire messages, without the network: a msgpack observation decoded into the fields an
 * OpenVLA frame needs, and the metadata and action dicts encoded as openpi's server sends them.
 *
 * Arrays travel as openpi_client/msgpack_numpy.py writes them: a map with bin keys
 *   {b"__ndarray__": True, b"data": <bin>, b"dtype": "<f8", b"shape": [d0, d1, ...]}
 * and numpy scalars as {b"__npgeneric__": True, b"data": value, b"dtype": "<U5"}. Keys are
 * accepted as msgpack str or bin everywhere (Python packs str keys as str and bytes keys as bin);
 * what we send uses bin for the ndarray's own keys and str for the dict keys, as openpi does.
 *
 * Used by vh-serve (tools/serve/policy_server.c) and by the fuzz target fuzz/fuzz_openpi_message.c.
 * Nothing here touches a socket; every function is thread-safe (no shared state).
 */
#ifndef VH_SERVE_OPENPI_MESSAGE_H
#define VH_SERVE_OPENPI_MESSAGE_H

#include <stddef.h>
#include <stdint.h>

/* msgpack objects (maps, arrays, scalars) one message may declare. An observation holds a few
 * dozen; the cap bounds what msgpack-c allocates for a hostile message (it reserves an array's
 * elements when it reads the array's header). */
#define VH_OPENPI_MAX_OBJECTS 65536u
/* msgpack-c's own nesting limit; deeper messages are refused before it sees them. */
#define VH_OPENPI_MAX_DEPTH 32u
/* The longest prompt accepted, in bytes of UTF-8. */
#define VH_OPENPI_MAX_PROMPT_BYTES 4096u
/* The largest image side (the library's own limit on vh_frame.width / height). */
#define VH_OPENPI_MAX_IMAGE_SIDE 16384u

/* Which keys of the observation dict hold what (vh-serve's --image-key, --prompt-key). */
typedef struct vh_openpi_keys {
    const char *image;          /* "observation/image,image": the first of these keys present */
    const char *prompt;         /* "prompt" */
    const char *default_prompt; /* used when the observation has no prompt; NULL: it is required */
} vh_openpi_keys;

/* A decoded observation. rgb points into the message buffer (HWC input) or into owned_rgb (CHW
 * input, transposed): keep the message alive until the frame is submitted. */
typedef struct vh_openpi_observation {
    const uint8_t *rgb;        /* height x width x 3, rows packed */
    uint32_t width, height;
    int channels_first;        /* the array came as 3 x H x W */
    char *prompt;              /* NUL-terminated copy */
    char *unnorm_key;          /* the observation's "unnorm_key", or NULL when absent */
    uint8_t *owned_rgb;        /* freed by vh_openpi_observation_free */
} vh_openpi_observation;

/* Decode one observation message. Returns 0 and fills *obs, or -1 with *obs empty and a one-line
 * reason in why[0 .. why_size) (malformed msgpack, not a map, a key missing or repeated, an image
 * that is not a uint8 HxWx3 / 3xHxW array or whose data does not match its shape, a prompt that
 * is not a string, ...). Every size is checked before it is used; nothing is read outside
 * msg[0 .. len). */
int vh_openpi_decode_observation(const uint8_t *msg, size_t len, const vh_openpi_keys *keys,
                                 vh_openpi_observation *obs, char *why, size_t why_size);

/* Free what a decoded observation owns and empty it; an empty one is accepted. */
void vh_openpi_observation_free(vh_openpi_observation *obs);

/* A growable byte buffer whose first `headroom` bytes are left free for a transport's header
 * (libwebsockets wants LWS_PRE bytes before the payload): the message is data[headroom .. size). */
typedef struct vh_openpi_buffer {
    uint8_t *data;
    size_t size, capacity, headroom;
} vh_openpi_buffer;

/* What the server tells a client on connect (openpi sends its policy's metadata dict). */
typedef struct vh_openpi_metadata {
    const char *server_version;   /* vh_version() */
    const char *model;            /* the model folder's name */
    const char *model_path;
    uint32_t action_dim;
    const char *actions_dtype;    /* "float64" or "float32" */
    const char *backends;         /* "cpu_generic", "cuda,cpu_amx", ... */
    const char *execution_mode;   /* "serial", "pipeline", "packed" */
    uint32_t frames_in_flight;
    const char *unnorm_key;
    const vh_openpi_keys *keys;
    uint64_t max_message_bytes;
} vh_openpi_metadata;

/* Both encoders reset `out` (keeping its headroom) and return 0, or -1 when memory runs out. */
int vh_openpi_encode_metadata(const vh_openpi_metadata *meta, vh_openpi_buffer *out);

/* The answer to one observation, as openpi's server sends policy.infer()'s dict:
 *   {"actions": ndarray [1, action_dim] (<f8, or <f4 when as_float32),
 *    "policy_timing": {"infer_ms": compute_ms},
 *    "server_timing": {"infer_ms": infer_ms, "prev_total_ms": prev_total_ms (only when >= 0)}} */
typedef struct vh_openpi_action {
    const double *values;
    uint32_t action_dim;
    int as_float32;
    double infer_ms;       /* observation submitted -> action ready (queueing included) */
    double compute_ms;     /* the frame's own computation (started -> ready) */
    double prev_total_ms;  /* the client's previous request: first byte in -> answer out; < 0: none */
} vh_openpi_action;

int vh_openpi_encode_action(const vh_openpi_action *action, vh_openpi_buffer *out);

void vh_openpi_buffer_free(vh_openpi_buffer *buf);

#endif
