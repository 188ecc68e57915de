/*
 * A VAE + GRU planner block (VH_BLOCK_VAE_GRU_PLANNER) from a checkpoint: Orion's planner, and
 * MindDrive's two (speed and path), share the released code's module structure
 * (distributions.py: DistributionModule, PredictModel; the ego_fut_decoder MLP), converted under
 * a prefix with the 1x1 convolutions squeezed to matrices (doc/orion-converter.md).
 */
#ifndef VH_FAMILY_DRIVING_VAE_GRU_PLANNER_H
#define VH_FAMILY_DRIVING_VAE_GRU_PLANNER_H

#include "model/checkpoint.h"
#include "vlahybrid/backend.h"

/* Fill w (by role) with the planner's tensors named `prefix` + "present_distribution.*",
 * "predict_model.*", "ego_fut_decoder.*", their shapes checked against p (feature_dim,
 * latent_dim, gru_layers, gru_hidden, n_modes set by the caller). */
vh_status vh_take_vae_gru_planner(const vh_checkpoint *ck, const char *prefix, const vh_planner_params *p,
                                  vh_tensor_view *w, vh_error *err);

#endif
