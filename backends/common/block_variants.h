/*
 * The block kinds the executors run, one table for every backend: what a plugin tells the core
 * (vh_kind_support: roles, parameters, options, wiring) and what an executor needs to know of
 * each kind to validate a batch and size its buffers. A backend's own kind table (the function
 * of its kind file that runs each) follows this table's order.
 */
#ifndef VH_BLOCK_VARIANTS_H
#define VH_BLOCK_VARIANTS_H

#include "vlahybrid/backend.h"

#define VH_N_BLOCK_VARIANTS 7
#define VH_BLOCK_VARIANT_BATCH_OPTIONS (VH_BATCH_HIDDEN_ROWS | VH_BATCH_SEGMENT_EMBEDS | VH_BATCH_PLAN | \
                                        VH_BATCH_SEGMENT_ADAPTERS | VH_BATCH_PLAN_SEGMENTS)

typedef struct vh_block_variant {
    uint32_t kind;                     /* vh_block_kind */
    int uses_images, uses_pixels, uses_rows; /* the parts of a batch it reads */
    int in_tower;                      /* a vision tower's block: vh_vit_params (tower, layer), its tokens */
    int projects;                      /* the projector: the towers' tokens to patch embeddings */
    int llm_layer;                     /* an LLM layer: vh_llm_params (layer, LoRA scale), LoRA pairs by set */
    int attends;                       /* has attention: an LLM layer's over its KV cache, a ViT block's over
                                          its tower's tokens */
    int has_state;                     /* keeps a KV cache (state slot) */
    int is_head;                       /* writes the batch's outputs */
    int is_planner;                    /* reads the head's hidden rows, writes the plans */
} vh_block_variant;

/* The same kinds in the same order: what the plugin table (vh_backend_iface.kinds) lists. */
extern const vh_kind_support vh_block_variant_support[VH_N_BLOCK_VARIANTS];
extern const vh_block_variant vh_block_variants[VH_N_BLOCK_VARIANTS];

/* The kind's index in the tables, or -1. */
int vh_block_variant_index(uint32_t kind);

/* What an executor keeps of a block's parameters (its kind's: the descriptor was checked by
 * vh_block_check): the tower and layer of a tower's block, the layer and LoRA scale of an LLM
 * layer, a planner's parameters; fields of other kinds are left as they are. */
void vh_block_variant_read_params(const vh_block_variant *v, const vh_block_desc *d, uint32_t *tower,
                                  uint32_t *layer, float *lora_scale, vh_planner_params *plan);

#endif
