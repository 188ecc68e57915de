/*
 * What a frame carries in (the session's copy of the caller's vh_frame) and what a computed frame
 * gives back, in the core's own terms. The frame queue holds both; a model family reads the one
 * (lib/family/family.h: prepare) and writes the other (result).
 */
#ifndef VH_QUEUE_FRAME_IO_H
#define VH_QUEUE_FRAME_IO_H

#include <stddef.h>

#include "vlahybrid/vlahybrid.h"

/* A frame's inputs. Views: valid while the frame's record is (until the frame has started, for
 * the pixels). */
typedef struct vh_frame_input {
    const uint8_t *rgb;                /* [height rows of `stride` bytes] RGB8 */
    uint32_t width, height;
    size_t stride;
    const char *instruction;           /* NUL-terminated, or NULL */
    const char *unnorm_key;            /* the frame's dataset (checked at submit), or NULL: the session's */
    uint64_t episode;                  /* vh_session_reset starts a new one: state carried from
                                          frame to frame starts afresh */
    uint64_t sequence;                 /* the caller's sequence number (seeds sampling models) */
    int64_t timestamp_ns;              /* the caller's capture time (a driving model's clock) */
    uint64_t stream;                   /* the caller's stream (state kept across frames is per stream) */
    /* driving models (vh_frame's 0.3.0 fields; NULL / 0 when absent) */
    uint32_t n_cameras;
    const vh_camera_image *cameras;
    const float *lidar2img, *intrinsics, *extrinsics; /* [n_cameras][16] each */
    const float *ego_pose;             /* [16] */
    const float *can_bus;              /* [VH_CAN_BUS_FLOATS] */
    int32_t command;                   /* VH_COMMAND_NONE or 0..5 */
    int64_t command_timestamp_ns;
    const float *vision_tokens;        /* [n_vision_tokens][vision_token_width] */
    uint32_t n_vision_tokens, vision_token_width;
    const float *noise;                /* [n_noise] */
    uint32_t n_noise;
} vh_frame_input;

/* A computed frame's outcome (copied into the caller's vh_action). */
typedef struct vh_frame_result {
    vh_action_kind kind;
    uint32_t action_dim;
    int32_t token_ids[VH_MAX_ACTION_DIM];
    double values[VH_MAX_ACTION_DIM];
    uint32_t n_points;
    float trajectory[VH_MAX_TRAJECTORY_POINTS * 2];
    uint32_t n_extras;
    vh_action_extra_info extra_info[VH_MAX_ACTION_EXTRAS];
    float extras[VH_MAX_ACTION_EXTRA_FLOATS];
    int64_t vision_ns, prefill_ns, decode_ns;
} vh_frame_result;

/* Append an extra named `name` of `count` floats to a result; the pointer to fill, or NULL when
 * the result has no room left. */
float *vh_frame_result_add_extra(vh_frame_result *r, const char *name, uint32_t count);

#endif
