/*
 * The cpu_generic block executor: fp32 activations over weights kept in the checkpoint's dtype
 * (read straight from the memory map), OpenBLAS for large GEMMs, portable C kernels for the rest.
 */
#ifndef VH_CPU_GENERIC_EXECUTOR_H
#define VH_CPU_GENERIC_EXECUTOR_H

#include "cpu_kernels.h"
#include "thread_pool.h"
#include "vlahybrid/backend.h"

/* One block as this executor runs it: the weights' views, with the small vectors (norm weights,
 * biases, LayerScale) converted to fp32 once. */
typedef struct cpu_block {
    const vh_block_desc *desc;
    float *vec[VH_BLOCK_MAX_TENSORS];  /* fp32 copies of 1-D tensors; NULL for matrices/absent */
} cpu_block;

/* Scratch for the vision towers, sized for one image of the largest tower. */
typedef struct vit_scratch {
    float *patches;                    /* [n_patches, 3 P P] im2col of the image */
    float *norm;                       /* [T, D] */
    float *qkv;                        /* [T, 3 D] */
    float *attn;                       /* [T, D] */
    float *proj;                       /* [T, D] attention output projection / MLP output */
    float *mlp;                        /* [T, H] */
} vit_scratch;

/* Scratch for the LLM, sized for max_rows rows. */
typedef struct llm_scratch {
    float *x;                          /* [max_rows, Dl] the hidden state (crosses executors) */
    float *norm;                       /* [max_rows, Dl] */
    float *q;                          /* [max_rows, Hq hd] */
    float *k, *v;                      /* [max_rows, Hkv hd] the rows' new keys and values */
    float *attn;                       /* [max_rows, Hq hd] */
    float *gate, *up;                  /* [max_rows, F] */
    int32_t *positions;                /* [max_rows] */
    float *head_in;                    /* [max_segments, Dl] last rows of the segments */
    float *logits;                     /* [max_segments, V] */
} llm_scratch;

struct vh_executor {
    vh_executor_params params;
    const vh_model_desc *model;
    vh_thread_pool *pool;
    vhk_matmul *matmul;
    cpu_block *blocks;                 /* [params.n_blocks], block i = model block first_block + i */

    /* vision: tokens of each tower for each image, then the projector's patch embeddings */
    float *vit_tokens[VH_MAX_TOWERS];  /* [max_images, n_prefix + n_patches, D_t] */
    float *patch_embeds;               /* [max_images, n_image_tokens, Dl] */
    vit_scratch vit;
    float *proj_in, *proj_hidden, *proj_out; /* [n_image_tokens, Dv], [.., H1], [.., Dl] */

    /* LLM */
    llm_scratch llm;
    uint32_t n_layers_held;            /* LLM blocks in this executor */
    uint32_t first_llm_layer;          /* decoder layer index of the first one */
    float *k_cache, *v_cache;          /* [n_layers_held, max_sequences, max_context, Hkv hd] */
    uint32_t last_rows;                /* rows of the last batch (read_hidden) */
    uint32_t max_segments;

    uint64_t weight_bytes, cache_bytes, work_bytes;
};

vh_status cpu_executor_create(const vh_executor_params *params, vh_executor **out, char *err, size_t err_size);
void cpu_executor_destroy(vh_executor *e);
vh_status cpu_executor_run(vh_executor *e, const vh_batch *batch, uint32_t first_block, uint32_t n_blocks,
                           char *err, size_t err_size);

/* Block kinds (vit_forward.c, llama_forward.c). Inputs were validated by cpu_executor_run. */
void cpu_vit_embed(vh_executor *e, const cpu_block *b, const vh_batch *batch);
void cpu_vit_block(vh_executor *e, const cpu_block *b, const vh_batch *batch);
void cpu_projector(vh_executor *e, const cpu_block *b, const vh_batch *batch);
void cpu_llm_embed(vh_executor *e, const cpu_block *b, const vh_batch *batch);
void cpu_llm_block(vh_executor *e, const cpu_block *b, const vh_batch *batch);
void cpu_llm_head(vh_executor *e, const cpu_block *b, const vh_batch *batch);

#endif
