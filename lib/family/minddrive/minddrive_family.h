/*
 * MindDrive (xiaomi-mlab/MindDrive, the closed-loop agent) as a model family, from the 529 vision
 * tokens on (../shared/specs/orion-minddrive.md §7): a frame brings the vision tokens (529 x the
 * LLM's width), the command (0..5) and optionally the two planners' noise (speed, then path). One
 * pass runs both rounds side by side, each a segment on its own KV slot with its own LoRA expert
 * over the same base weights: the decision round (the speed meta-action: log-softmax over the 7
 * speed tokens' logits at position -2) and the action round (the hidden rows at <waypoint_ego>
 * and <path_waypoint_ego>, each feeding its VAE + GRU planner). The action: the path (the
 * command's path mode, summed into points) as the trajectory, the speed decision in values[0],
 * the speed trajectory (the decided mode) and the planners' modes and latents as extras.
 */
#ifndef VH_FAMILY_MINDDRIVE_FAMILY_H
#define VH_FAMILY_MINDDRIVE_FAMILY_H

#include "family/family.h"

extern const vh_family vh_family_minddrive;

/* A finished frame's final-normed hidden rows, for tests: [4][hidden] = the decision row (twice),
 * the speed planner's feature, the path planner's feature. */
const float *vh_minddrive_frame_hidden(const vh_family_frame *frame);
/* A round's prompt ids (the vision rows not included; the decision round without its final speed
 * token) and where the vision rows go. round 0: decision, 1: action. */
const int32_t *vh_minddrive_program_prompt(const vh_program *program, int round, size_t *n_ids, size_t *image_index);

#endif
