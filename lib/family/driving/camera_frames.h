/*
 * A driving frame from its six cameras, for a family with the camera front end (config.json's
 * front_end: Orion, MindDrive): the frame is checked and its cameras prepared as the agent does
 * (prepare's part: camera_preprocess.c, lidar2img after the same transforms), then the vision side
 * runs on the first stage (run_vision's part): the ViT on the six images, the 3-D position
 * embedding when the rig's lidar2img changed, the det and map heads in the stream's order with
 * their memory banks, and the 529 tokens [det 273 | map 256] become the prefill's vision rows. A
 * frame that brings its own vision tokens skips all of it (and leaves the banks alone). Each stream
 * (vh_frame.stream) has its own banks; a new episode (vh_session_reset) starts each afresh at its
 * next frame. (MindDrive's agent runs the map head first; the det head's use of the map head's
 * output is its agent-forecast branch only, which feeds no token and no bank: the order is free.)
 */
#ifndef VH_FAMILY_DRIVING_CAMERA_FRAMES_H
#define VH_FAMILY_DRIVING_CAMERA_FRAMES_H

#include "family/driving/front_end.h"
#include "family/family.h"

#define VH_CAMERA_MAX_STREAMS 16       /* streams (vehicles) one session keeps the front end's memory of */

/* The model's front end as the family holds it. */
typedef struct vh_camera_front {
    const char *frame_name;            /* in messages: "an Orion frame", "a MindDrive frame" */
    const vh_front_end_config *config;
    const vh_front_end_graph *graph;
    uint32_t n_slots;                  /* the model's slots (vh_model_desc.n_slots) */
} vh_camera_front;

/* What the program keeps across frames: each stream's banks (vh_frame.stream) and the position
 * embedding the executor holds. */
typedef struct vh_camera_stream vh_camera_stream;
/* A frame's camera buffers (in its job). */
typedef struct vh_camera_frame vh_camera_frame;

vh_status vh_camera_stream_create(const vh_camera_front *fe, vh_camera_stream **out, vh_error *err);
void vh_camera_stream_free(vh_camera_stream *s);

vh_status vh_camera_frame_create(const vh_camera_front *fe, vh_camera_frame **out, vh_error *err);
void vh_camera_frame_free(vh_camera_frame *c);

/* At submit: a camera frame has what the front end needs (six cameras, calibration, ego pose,
 * can_bus). */
vh_status vh_camera_frame_check(const vh_camera_front *fe, const vh_frame *f, vh_error *err);
/* prepare's part: the planes and lidar2img of each camera, the frame's clock and ego state. */
vh_status vh_camera_frame_prepare(const vh_camera_front *fe, vh_camera_frame *c, const vh_frame_input *in,
                                  vh_error *err);
/* run_vision's part: tokens [n_vision_tokens][out_dims] from the prepared cameras. */
vh_status vh_camera_frame_run(const vh_camera_front *fe, vh_camera_stream *s, const vh_camera_frame *c,
                              const vh_vision_runner *r, float *tokens, vh_error *err);

#endif
