/*
 * An Orion frame from its six cameras (a checkpoint with the camera front end, config.json's
 * front_end): the frame is checked and its cameras prepared as the agent does (prepare's part:
 * camera_preprocess.c, lidar2img after the same transforms), then the vision side runs on the first
 * stage (run_vision's part): the ViT on the six images, the 3-D position embedding when the rig's
 * lidar2img changed, the det and map heads in the stream's order with their memory banks, and the
 * 529 tokens [det 273 | map 256] become the prefill's vision rows. A frame that brings its own
 * vision tokens skips all of it (and leaves the banks alone). Each stream (vh_frame.stream) has its
 * own banks; a new episode (vh_session_reset) starts each afresh at its next frame.
 */
#ifndef VH_FAMILY_ORION_CAMERAS_H
#define VH_FAMILY_ORION_CAMERAS_H

#include "family/family.h"
#include "family/orion/orion_model.h"

#define VH_ORION_MAX_STREAMS 16        /* streams (vehicles) one session keeps the front end's memory of */

/* What the program keeps across frames: each stream's banks (vh_frame.stream) and the position
 * embedding the executor holds. */
typedef struct vh_orion_stream vh_orion_stream;
/* A frame's camera buffers (in its job). */
typedef struct vh_orion_cameras vh_orion_cameras;

vh_status vh_orion_stream_create(const vh_model *m, vh_orion_stream **out, vh_error *err);
void vh_orion_stream_free(vh_orion_stream *s);

vh_status vh_orion_cameras_create(const vh_model *m, vh_orion_cameras **out, vh_error *err);
void vh_orion_cameras_free(vh_orion_cameras *c);

/* At submit: a camera frame has what the front end needs (six cameras, calibration, ego pose,
 * can_bus). */
vh_status vh_orion_cameras_check(const vh_model *m, const vh_frame *f, vh_error *err);
/* prepare's part: the planes and lidar2img of each camera, the frame's clock and ego state. */
vh_status vh_orion_cameras_prepare(const vh_model *m, vh_orion_cameras *c, const vh_frame_input *in, vh_error *err);
/* run_vision's part: tokens [n_vision_tokens][hidden] from the prepared cameras. */
vh_status vh_orion_cameras_run(const vh_model *m, vh_orion_stream *s, const vh_orion_cameras *c,
                               const vh_vision_runner *r, float *tokens, vh_error *err);

#endif
