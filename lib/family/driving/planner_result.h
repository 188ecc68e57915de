/*
 * A VAE + GRU planner's outputs (its batch's out_plan: preds [M][T][2] per-step offsets, then mu
 * [L], log_sigma [L]) into an action, as the released agents turn them into trajectories: every
 * mode's offsets summed step by step (torch's cumsum, in fp32), the chosen mode's points
 * nan_to_num'd. Orion's one planner and MindDrive's two.
 */
#ifndef VH_FAMILY_DRIVING_PLANNER_RESULT_H
#define VH_FAMILY_DRIVING_PLANNER_RESULT_H

#include <stdint.h>

#include "queue/frame_io.h"

/* The extras `modes_name` (M x T x 2 cumulative), `mu_name`, `ls_name` (L each), and the chosen
 * mode's T points into `chosen` (when not NULL). */
void vh_driving_planner_result(vh_frame_result *out, const float *plan, uint32_t n_modes, uint32_t n_steps,
                               uint32_t latent_dim, uint32_t mode, const char *modes_name, const char *mu_name,
                               const char *ls_name, float *chosen);

#endif
