/*
 * Orion's decision half as blocks (the LLM and the planner, from the 529 vision tokens on):
 *   EMBED_LOOKUP         the prompt's token rows; the vision tokens come with each frame
 *                        (VH_PASS_USES_VISION_ROWS)
 *   TRANSFORMER x n      Llama decoder layers of Vicuna-7B shapes (vh_begin_llama_layer), LoRA merged
 *                        by the converter or kept apart as LoRA set 0
 *   READOUT              model.norm only: the final-normed hidden state at <waypoint_ego>
 *                        (VH_PASS_USES_HIDDEN_ROWS); no LM head is ever evaluated
 *   VAE_GRU_PLANNER      present_distribution, predict_model, ego_fut_decoder (VH_PASS_USES_PLANS)
 * Slots: vision.embeds -> rows -> outputs; a KV state per layer.
 * Checkpoint names are the converter's (doc/orion-converter.md): model.*, planner.<original name>.
 */
#ifndef VH_FAMILY_ORION_MODEL_H
#define VH_FAMILY_ORION_MODEL_H

#include "family/orion/orion_config.h"
#include "model/model.h"

typedef struct vh_orion_model {
    vh_orion_config config;
    uint32_t planner_block;
    vh_front_end_graph front;          /* config.front_end.present: the vision side's blocks */
} vh_orion_model;

vh_status vh_orion_load(vh_model *m, const char *dir, const char *config_text, size_t config_len,
                        const char *config_path, vh_error *err);
void vh_orion_unload(vh_model *m);

static inline const vh_orion_config *vh_orion_config_of(const vh_model *m)
{
    return &((const vh_orion_model *)m->family_model)->config;
}

#endif
