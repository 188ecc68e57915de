/*
 * MindDrive's decision half as blocks (from the 529 vision tokens on; xiaomi-mlab/MindDrive,
 * ../shared/specs/orion-minddrive.md §7):
 *   EMBED_LOOKUP         the prompts' token rows; the vision tokens come with each frame
 *                        (VH_PASS_USES_VISION_ROWS)
 *   TRANSFORMER x n      Qwen2's decoder layers: Llama's features (vh_begin_llama_layer) with q/k/v
 *                        biases, grouped-query attention, RoPE theta 1e6, and the two LoRA experts as
 *                        LoRA sets 0 and 1 on one base (VH_PASS_USES_ADAPTER_SETS)
 *   READOUT              model.norm only: final-normed hidden rows (VH_PASS_USES_HIDDEN_ROWS); the
 *                        decision's 7 logits are dot products with the tied embedding's speed rows
 *   VAE_GRU_PLANNER x 2  the speed planner (on <waypoint_ego>) and the path planner (on
 *                        <path_waypoint_ego>), on the action round's segment only
 *                        (VH_PASS_USES_PLAN_SEGMENTS)
 * With config.json's front_end, the camera front end's blocks come first (family/driving/front_end.h,
 * Orion's: the ViT, the position encoder, the det and map heads, whose 529 tokens of the LLM's width
 * are the prompts' vision rows).
 * Slots: vision.embeds -> rows -> outputs; a KV state per layer.
 * Checkpoint names are the converter's (doc/minddrive-converter.md).
 */
#ifndef VH_FAMILY_MINDDRIVE_MODEL_H
#define VH_FAMILY_MINDDRIVE_MODEL_H

#include "family/minddrive/minddrive_config.h"
#include "model/model.h"

typedef struct vh_minddrive_model {
    vh_minddrive_config config;
    vh_tensor_view embed;              /* model.embed_tokens [V, H]: the tied head's rows */
    uint32_t speed_planner_block, path_planner_block;
    vh_front_end_graph front;          /* config.front_end.present: the vision side's blocks */
} vh_minddrive_model;

vh_status vh_minddrive_load(vh_model *m, const char *dir, const char *config_text, size_t config_len,
                            const char *config_path, vh_error *err);
void vh_minddrive_unload(vh_model *m);

static inline const vh_minddrive_model *vh_minddrive_model_of(const vh_model *m)
{
    return (const vh_minddrive_model *)m->family_model;
}

#endif
