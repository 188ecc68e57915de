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
    const char *instruction;           /* NUL-terminated */
    uint64_t episode;                  /* vh_session_reset starts a new one: state carried from
                                          frame to frame starts afresh */
} vh_frame_input;

/* A computed frame's outcome (copied into the caller's vh_action). */
typedef struct vh_frame_result {
    uint32_t action_dim;
    int32_t token_ids[VH_MAX_ACTION_DIM];
    double values[VH_MAX_ACTION_DIM];
    int64_t vision_ns, prefill_ns, decode_ns;
} vh_frame_result;

#endif
