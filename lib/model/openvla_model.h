/*
 * An OpenVLA checkpoint folder as a list of blocks: config.json (+ preprocessor_config.json) and the
 * memory-mapped safetensors weights, mapped onto the block kinds of the plugin ABI
 * (include/vlahybrid/backend.h) with every tensor's name, dtype and shape checked.
 *
 * Block order: for each tower t: VIT_EMBED, VIT x (depth - 1); PROJECTOR; LLM_EMBED; LLM x n_layers;
 * LLM_HEAD. The last ViT block of each tower is never computed: OpenVLA takes the output of the
 * second-to-last block (timm get_intermediate_layers(n={depth - 2})).
 */
#ifndef VH_MODEL_OPENVLA_MODEL_H
#define VH_MODEL_OPENVLA_MODEL_H

#include "model/checkpoint.h"
#include "model/openvla_config.h"

typedef struct vh_model {
    vh_openvla_config config;
    vh_checkpoint *checkpoint;
    vh_model_desc desc;                /* desc.blocks points to `blocks` */
    vh_block_desc *blocks;
    uint32_t tower_first_block[VH_MAX_TOWERS];
    uint32_t projector_block, llm_embed_block, llm_first_block, head_block;
} vh_model;

/* Load and validate the folder. On failure *model is NULL and err names the file and tensor. */
vh_status vh_model_load(const char *dir, vh_model **model, vh_error *err);
void vh_model_free(vh_model *model);

/* Index of the first block of each stage, for planning. */
static inline uint32_t vh_model_vision_blocks(const vh_model *m) { return m->llm_embed_block; }

#endif
