/*
 * Orion (xiaomi-mlab/Orion, the closed-loop agent) as a model family, from the 529 vision tokens
 * on (../shared/specs/orion-minddrive.md §4-5, §6.2): a frame brings the vision tokens (529 x the
 * LLM's width, [256 scene | 16 history | 1 can-bus | 256 map]), the command (0..5) and optionally
 * the planner's noise; one prefill of the agent's 599-position prompt; the final-normed hidden
 * state at <waypoint_ego>; the VAE + GRU planner; the commanded mode's offsets summed into a
 * (steps, 2) trajectory in metres (the LiDAR frame: x right, y forward). No state crosses frames
 * here (the camera front end's memory banks, part 3, will).
 */
#ifndef VH_FAMILY_ORION_FAMILY_H
#define VH_FAMILY_ORION_FAMILY_H

#include "family/family.h"

extern const vh_family vh_family_orion;

/* The final-normed hidden state at <waypoint_ego> of a finished frame ([hidden] floats), for tests. */
const float *vh_orion_frame_feature(const vh_family_frame *frame);
/* The prompt's ids (the image's rows not included) and where the image's rows go. */
const int32_t *vh_orion_program_prompt(const vh_program *program, size_t *n_ids, size_t *image_index);

#endif
