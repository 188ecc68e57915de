/*
 * A submitted frame, checked and copied: the structural checks every frame passes whatever its
 * model (sizes, strides, counts, pointers that go with counts, finite numbers, the command's
 * range), and the copy the frame queue keeps until the frame is answered (the caller keeps its
 * buffers). What a model needs of a frame is its family's check (lib/family/family.h).
 */
#ifndef VH_SESSION_FRAME_COPY_H
#define VH_SESSION_FRAME_COPY_H

#include "queue/frame_queue.h"

#define VH_MAX_IMAGE_SIDE 16384u
#define VH_MAX_INSTRUCTION_BYTES 8192u
#define VH_MAX_CAMERAS 16u
#define VH_MAX_VISION_TOKEN_FLOATS (64u << 20) /* 256 MB of tokens: far beyond any model's */
#define VH_MAX_NOISE_FLOATS 4096u

/* VH_OK, or VH_ERR_BAD_FRAME / VH_ERR_INVALID_ARGUMENT with a message naming the field. */
vh_status vh_frame_check_structure(const vh_frame *frame, vh_error *err);

/* The record of a checked frame (NULL: out of memory). */
vh_frame_record *vh_frame_copy(const vh_frame *frame);

#endif
