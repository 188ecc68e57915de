/*
 * A loaded model, generic: the checkpoint folder's weights (memory-mapped), the block list the
 * backends run and its phases. This layer knows no family: a family (lib/family/family.h) fills
 * the model as it loads it (lib/family/model_load.h), and what else it parsed (its config,
 * tokenizer, statistics) stays behind `family_model`, opaque here and to the core.
 *
 * Phases of the block list, in order:
 *   [0, llm_embed_block)             the vision side: run once per frame on the first stage
 *   llm_embed_block                  rows in: token ids and vision embeddings -> hidden rows
 *   [llm_first_block, head_block)    the chain of LLM blocks: the part two stages may split
 *   [head_block, n_blocks)           what reads the chain's last rows (norm, head): the last stage
 */
#ifndef VH_MODEL_MODEL_H
#define VH_MODEL_MODEL_H

#include "model/checkpoint.h"
#include "vlahybrid/backend.h"

struct vh_family;

#define VH_MODEL_MAX_ROLES VH_MAX_ROLES
#define VH_MODEL_MAX_SLOTS 96

/* What a family fills for each block (vh_model_begin_block); vh_model_finish_blocks turns it into
 * the block's ABI descriptor (the present tensors, tagged with their roles). */
typedef struct vh_model_block {
    vh_tensor_view by_role[VH_MODEL_MAX_ROLES]; /* [role]: data NULL when absent */
    vh_tensor_view listed[VH_MODEL_MAX_ROLES];  /* the descriptor's tensors */
    union {
        vh_block_params none;
        vh_patch_embed_params patch;
        vh_transformer_params transformer;
        vh_chain_params chain;
        vh_planner_params planner;
        vh_mln_params mln;
    } params;                          /* the kind's parameters (struct_size set by begin_block) */
} vh_model_block;

typedef struct vh_model {
    const struct vh_family *family;    /* the family that loaded it (lib/family), opaque here */
    void *family_model;                /* the family's own (config, tokenizer): opaque to the core */
    vh_checkpoint *checkpoint;
    vh_model_desc desc;                /* desc.blocks points to `blocks` */
    vh_block_desc *blocks;             /* [desc.n_blocks] */
    vh_model_block *block_data;        /* [desc.n_blocks] what the descriptors point into */
    vh_slot_desc slots[VH_MODEL_MAX_SLOTS]; /* desc.slots: the graph's named activations */
    vh_query_set_desc query_sets[VH_MODEL_MAX_SLOTS]; /* desc.query_sets: one per QUERIES slot */
    vh_state_desc *states;             /* [desc.n_blocks] room; desc.states/n_states: those named */
    char (*state_names)[24];           /* [desc.n_blocks] the states' names */
    uint32_t llm_embed_block, llm_first_block, head_block;
    uint32_t max_positions;            /* the LLM's context (max_position_embeddings) */
} vh_model;

/* Frees the generic parts (the block list, the checkpoint) and m itself; the family freed
 * family_model before (lib/family/model_load.h: vh_model_free). NULL-safe. */
void vh_model_release(vh_model *model);

/* The blocks the first stage always runs before the LLM rows (the vision side). */
static inline uint32_t vh_model_vision_blocks(const vh_model *m) { return m->llm_embed_block; }

/* Room for n_blocks blocks (zeroed); desc.blocks/n_blocks follow. */
vh_status vh_model_alloc_blocks(vh_model *m, uint32_t n_blocks, vh_error *err);
/* The slot named `name` (a string that outlives the model, a literal), added with its kind and
 * tower the first time; its index. */
uint32_t vh_model_slot(vh_model *m, const char *name, uint32_t kind, uint32_t tower);
/* The QUERIES slot `name` of `rows` x `width` a frame (its own query set), added the first time;
 * its index (VH_MODEL_MAX_SLOTS when the name exists with another shape or there is no room: the
 * blocks that name it are refused). */
uint32_t vh_model_query_slot(vh_model *m, const char *name, uint32_t rows, uint32_t width);
/* A new KV-cache state for block `owner`, named "<prefix><layer>.kv"; its index. */
uint32_t vh_model_kv_state(vh_model *m, const char *prefix, uint32_t layer);
/* Block `index`: its kind, first input slot, output slot and state (VH_NO_STATE: none); the
 * family then fills the returned block's by_role tensors and its parameters, and adds further
 * inputs with vh_model_add_input. */
vh_model_block *vh_model_begin_block(vh_model *m, uint32_t index, uint32_t kind, uint32_t input, uint32_t output,
                                     uint32_t state);
void vh_model_add_input(vh_model *m, uint32_t index, uint32_t slot);
/* After every block is filled: the descriptors list each block's present tensors with their roles. */
void vh_model_finish_blocks(vh_model *m);

#endif
