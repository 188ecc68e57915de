/*
 * The blocks the executors run, one table for every backend: the vocabulary's kinds and feature
 * sets they implement (vh_kind_support: roles, parameters, slot kinds, features, what the core is
 * told) and what an executor needs to know of each to validate a batch and size its buffers. A
 * transformer layer is one kind with two implementations here (a tower's layer on image tokens,
 * a decoder layer on the rows with a KV cache), told apart by its features. A backend's own kind
 * table (the function of its kind file that runs each) follows this table's order.
 */
#ifndef VH_BLOCK_VARIANTS_H
#define VH_BLOCK_VARIANTS_H

#include "vlahybrid/backend.h"

#define VH_N_BLOCK_VARIANTS 14
#define VH_BLOCK_VARIANT_BATCH_OPTIONS (VH_BATCH_HIDDEN_ROWS | VH_BATCH_SEGMENT_EMBEDS | VH_BATCH_PLAN | \
                                        VH_BATCH_SEGMENT_ADAPTERS | VH_BATCH_SEGMENT_PLANS | \
                                        VH_BATCH_SLOT_INPUTS)
/* LoRA sets a decoder layer may hold here (of VH_TF_MAX_LORA_SETS in the vocabulary). */
#define VH_BLOCK_VARIANT_LORA_SETS 2

typedef struct vh_block_variant {
    uint32_t kind;                     /* vh_block_kind */
    int uses_images, uses_pixels, uses_rows; /* the parts of a batch it reads */
    int in_tower;                      /* a vision tower's block: its slot's tower, its tokens */
    int projects;                      /* the MLP chain: the towers' tokens to image embeddings */
    int llm_layer;                     /* a decoder layer on the rows: its LoRA pairs by set */
    int attends;                       /* has attention: a decoder layer's over its KV cache, a tower
                                          layer's over its image's tokens */
    int has_state;                     /* keeps a KV cache (its state) */
    int is_head;                       /* writes the batch's outputs (the read-out) */
    int is_planner;                    /* reads the read-out's rows, writes the plans */
    int rope_2d;                       /* a tower layer with 2-D RoPE, SiLU-gated MLP, maybe windows */
    int on_queries;                    /* writes a query set, once per frame of the batch */
    int gathers;                       /* reads a frame's images' tokens (kept from an earlier run) */
} vh_block_variant;

/* The same entries in the same order: what the plugin table (vh_backend_iface.kinds) lists. */
extern const vh_kind_support vh_block_variant_support[VH_N_BLOCK_VARIANTS];
extern const vh_block_variant vh_block_variants[VH_N_BLOCK_VARIANTS];

/* The entry that runs block d of model m (the first of the table that matches its kind, slot
 * kinds and features, as vh_block_check picks it), or -1. */
int vh_block_variant_of(const vh_model_desc *m, const vh_block_desc *d);

/* What an executor keeps of a block's parameters (the descriptor was checked by vh_block_check). */
typedef struct vh_block_info {
    uint32_t tower;                    /* a tower's block: the tower of its token slot */
    uint32_t layer;                    /* a transformer layer's index in its chain */
    float norm_eps;                    /* a transformer layer's norms */
    float rope_theta;                  /* a decoder layer's positions, a 2-D RoPE's */
    uint32_t rope_grid;                /* a 2-D RoPE's position scale (vh_transformer_params) */
    uint32_t window;                   /* a windowed layer's window side; 0: full attention */
    float lora_scale;                  /* a decoder layer's LoRA adapters' alpha / r (every set) */
    uint32_t chain_layers;             /* the MLP chain's linear layers */
    uint32_t patch_flags;              /* the patch embedding's VH_PATCH_* */
    vh_planner_params plan;            /* a planner's parameters */
    uint32_t n_heads;                  /* a layer on query sets: its heads */
    uint32_t mask_prefix;              /* its mask's prefix (0: no mask) */
    uint32_t tf_flags;                 /* a transformer layer's VH_TF_* */
    uint32_t chain_activation;         /* an MLP chain's vh_chain_activation */
    uint32_t chain_norm_after;         /* its LayerNorms (bit i: after layer i) */
} vh_block_info;

void vh_block_variant_read_params(const vh_model_desc *m, const vh_block_desc *d, vh_block_info *info);

/* A decoder layer on query sets (the query-set TRANSFORMER kinds), as both backends run it: its
 * rows, keys (self-attention: the rows, then any extra key rows; cross-attention: the key set's),
 * width, MLP hidden width (0: no MLP), heads; whether positions are added, extra keys read, the
 * keys cross. Inputs in order: the rows; with positions theirs; then the key rows and theirs. */
typedef struct vh_query_layer_shape {
    int64_t R, K, D, F, heads;
    int pos, extra, cross;
} vh_query_layer_shape;
vh_query_layer_shape vh_query_layer_shape_of(const vh_model_desc *m, const vh_block_desc *d, const vh_block_info *info);

/* The variants' flags OR-ed over blocks [first, first + n) of m (a vh_block_variant whose int
 * fields are 1 where any block has them). */
vh_block_variant vh_block_variants_held(const vh_model_desc *m, uint32_t first, uint32_t n);

/* The tensors block `index` (variant v) needs for the features it was given are there: a tower's
 * layer its fused q|k|v and biases, a decoder layer its seven projections; else 0 with why. */
/* A block on query sets (v->on_queries) fits its slots: the widths of its inputs and output match
 * its tensors, row counts agree, heads divide the width, a layer's inputs are those its flags name;
 * else 0 with why (naming the block and what differs). Its tensors are there (checked before). */
int vh_block_variant_query_shapes_valid(const vh_model_desc *m, const vh_block_desc *d, uint32_t index,
                                        const char *backend, char *why, size_t why_size);

int vh_block_variant_tensors_present(const vh_block_variant *v, const vh_block_desc *d, uint32_t index,
                                     const char *backend, char *why, size_t why_size);

#endif
