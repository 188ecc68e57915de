/*
 * The CPU block executor shared by the CPU backends (cpu_generic, cpu_amx): fp32 activations,
 * portable kernels (backends/cpu_kernels) on the backend's own thread pool, and linear
 * layers through the backend's cpu_linear_ops. Weights stay in the checkpoint's memory map unless
 * the backend's `prepare` makes its own copy.
 */
#ifndef VH_CPU_EXECUTOR_H
#define VH_CPU_EXECUTOR_H

#include "cpu_kernels.h"
#include "cpu_linear.h"
#include "cpu_profile.h"
#include "block_variants.h"
#include "thread_pool.h"
#include "vlahybrid/backend.h"

#define CPU_MAX_ROLES VH_MAX_ROLES

struct cpu_kind;

/* One block as this executor runs it, its tensors by role (data NULL: absent): the descriptor's
 * tensors, its matrices as 2-D views with whatever the backend prepared for them, and its small
 * vectors (norm weights, biases, LayerScale) converted to fp32 once. */
typedef struct cpu_block {
    const vh_block_desc *desc;
    const vh_block_variant *variant;          /* what the executor knows of its kind */
    const struct cpu_kind *kind;              /* how this backend runs it */
    vh_block_info info;                       /* what it keeps of the kind's parameters */
    uint32_t state;                           /* desc->state */
    uint32_t lora_sets;                       /* LLM: bit s set where it holds a pair of LoRA set s */
    float *scratch;                           /* a kind's own scratch (the planner's), or NULL */
    vh_tensor_view t[CPU_MAX_ROLES];          /* [role] */
    vh_tensor_view mat[CPU_MAX_ROLES];        /* [role] 2-D [out, in] views; data NULL for non-matrices */
    void *prepared[CPU_MAX_ROLES];            /* the backend's form of each matrix, or NULL */
    float *vec[CPU_MAX_ROLES];                /* fp32 copies of 1-D tensors; NULL otherwise */
    /* LLM, where the backend fuses (cpu_linear_ops.prepare_fused) and no LoRA is kept apart: q|k|v
     * as one matrix, gate|up as a gated pair (their own prepared[] stay NULL); else NULL. */
    void *fused_qkv, *fused_gate_up;
    float *qkv_bias;                          /* fused, with q/k/v biases (Qwen2): [(Hq + 2 Hkv) hd], else NULL */
} cpu_block;

/* How the CPU executor runs a block kind (cpu_kind_table.c, in the order of vh_block_variants;
 * a file per kind). */
typedef struct cpu_kind {
    uint64_t matrix_roles;             /* roles that are linear-layer weights */
    void (*run)(vh_executor *e, const cpu_block *b, const vh_batch *batch);
    /* floats of scratch the block needs (allocated once at create), or NULL: none */
    uint64_t (*scratch_floats)(const vh_executor *e, const cpu_block *b);
} cpu_kind;

extern const cpu_kind cpu_kinds[VH_N_BLOCK_VARIANTS];

/* Scratch for the vision towers, sized for one image of the largest tower. */
typedef struct vit_scratch {
    float *patches;                    /* [n_patches, 3 P P] im2col of the image */
    float *norm;                       /* [T, D] */
    float *qkv;                        /* [T, 3 D] */
    float *attn;                       /* [T, D] */
    float *proj;                       /* [T, D] attention output projection / MLP output */
    float *mlp;                        /* [T, H] */
} vit_scratch;

/* Scratch for the LLM, sized for max_rows rows (norm, q, k, v and up only where an LLM block runs
 * unfused, qkv only where one runs fused). */
typedef struct llm_scratch {
    float *x;                          /* [max_rows, Dl] the hidden state (crosses executors) */
    float *norm;                       /* [max_rows, Dl] */
    float *q;                          /* [max_rows, Hq hd] */
    float *k, *v;                      /* [max_rows, Hkv hd] the rows' new keys and values */
    float *attn;                       /* [max_rows, Hq hd] */
    float *gate, *up;                  /* [max_rows, F] */
    float *qkv;                        /* [max_rows, (Hq + 2 Hkv) hd] fused q | k | v (or NULL) */
    int32_t *positions;                /* [max_rows] */
    float *head_in;                    /* [max_segments, Dl] last rows of the segments */
    float *lora_a, *lora_b;            /* [max_rows, r], [max_rows, max(q, Dl)]: LoRA kept apart (r: the
                                          largest rank of either set) */
    float *logits;                     /* [max_segments, V] */
} llm_scratch;

struct vh_executor {
    vh_executor_params params;
    const vh_model_desc *model;
    vh_thread_pool *pool;
    const cpu_linear_ops *ops;
    void *linear;                      /* the ops' context */
    vh_status failed;                  /* first failure of a linear layer in this run */
    char failure[256];
    cpu_block *blocks;                 /* [params.n_blocks], block i = model block first_block + i */

    /* vision: tokens of each tower for each image, then the projector's patch embeddings */
    float *vit_tokens[VH_MAX_TOWERS];  /* [max_images, n_prefix + n_patches, D_t] */
    float *patch_embeds;               /* [max_images, n_image_tokens, Dl] */
    vit_scratch vit;
    float *proj_in, *proj_hidden, *proj_out; /* [n_image_tokens, Dv], [.., H1], [.., Dl] */

    /* query sets: the QUERIES slots the held blocks read or write, [max_frames, rows, width] each */
    float **query_data;                /* [model n_slots], NULL where none */

    /* LLM */
    llm_scratch llm;
    uint32_t n_layers_held;            /* LLM blocks in this executor */
    uint32_t first_state;              /* state slot of the first one (its KV cache is the first) */
    float *k_cache, *v_cache;          /* [n_layers_held, max_sequences, max_context, Hkv hd] */
    uint32_t last_rows;                /* rows of the last batch (read_hidden) */
    float *bound_x;                    /* bind_hidden: the next run's rows, in the core's memory */
    int last_run_bound;                /* the last run worked in the core's memory: nothing to read */
    uint32_t max_segments;

    uint64_t weight_bytes, cache_bytes, work_bytes;
    cpu_profile profile;               /* VH_CPU_PROFILE=1: where the LLM blocks' time goes */
};

/* The executor functions of the plugin ABI; a CPU plugin passes its linear ops to create. */
vh_status cpu_bind_hidden(vh_executor *e, float *rows, uint32_t n_rows, char *err, size_t err_size);
vh_status cpu_read_slot(vh_executor *e, uint32_t slot, uint32_t image, float *dst, size_t n_floats, char *err,
                        size_t err_size);
vh_status cpu_executor_create(const vh_executor_params *params, const cpu_linear_ops *ops, vh_executor **out,
                              char *err, size_t err_size);
void cpu_executor_destroy(vh_executor *e);
vh_status cpu_executor_run(vh_executor *e, const vh_batch *batch, uint32_t first_block, uint32_t n_blocks,
                           char *err, size_t err_size);
vh_status cpu_read_hidden(vh_executor *e, float *dst, uint32_t n_rows, char *err, size_t err_size);
vh_status cpu_write_hidden(vh_executor *e, const float *src, uint32_t n_rows, char *err, size_t err_size);
vh_status cpu_memory(vh_executor *e, vh_memory_report *report);
/* The host CPU as the one device of a CPU backend. */
uint32_t cpu_device_count(void);
vh_status cpu_device_info(uint32_t device, vh_device_info *info);

/* The plugin table of a CPU backend: everything but its name, description, score and create (which
 * passes the backend's cpu_linear_ops to cpu_executor_create) is the shared executor's. */
#define VH_CPU_BACKEND_IFACE(NAME, DESCRIPTION, SCORE_FN, CREATE_FN, REASON_FN) \
    {                                                               \
        .abi_major = VH_BACKEND_ABI_MAJOR,                          \
        .abi_minor = VH_BACKEND_ABI_MINOR,                          \
        .struct_size = sizeof(vh_backend_iface),                    \
        .name = (NAME),                                             \
        .description = (DESCRIPTION),                               \
        .n_kinds = VH_N_BLOCK_VARIANTS,                             \
        .kinds = vh_block_variant_support,                          \
        .batch_options = VH_BLOCK_VARIANT_BATCH_OPTIONS,            \
        .score = (SCORE_FN),                                        \
        .device_count = cpu_device_count,                           \
        .device_info = cpu_device_info,                             \
        .executor_create = (CREATE_FN),                             \
        .executor_destroy = cpu_executor_destroy,                   \
        .executor_run = cpu_executor_run,                           \
        .read_hidden = cpu_read_hidden,                             \
        .write_hidden = cpu_write_hidden,                           \
        .memory = cpu_memory,                                       \
        .bind_hidden = cpu_bind_hidden,                             \
        .unavailable_reason = (REASON_FN),                          \
        .read_slot = cpu_read_slot,                                 \
    }

/* A linear layer of block b: y = x W^T + bias with the block's matrix `tensor`. A failure is
 * recorded in e->failed (the run reports it after the block). */
void cpu_linear(vh_executor *e, const cpu_block *b, int tensor, const float *x, int64_t x_stride, int64_t rows,
                const float *bias, float *y, int64_t y_stride);

/* A fused linear layer of block b (cpu_linear_ops.linear_fused); a failure as cpu_linear's. */
void cpu_linear_fused(vh_executor *e, const cpu_linear_call *call);

/* Tokens of tower t for image i: [n_prefix + n_patches, D]. */
static inline float *cpu_tower_tokens(vh_executor *e, uint32_t t, uint32_t image)
{
    const vh_vit_desc *v = &e->model->towers[t];
    return e->vit_tokens[t] + (size_t)image * (v->n_prefix + v->n_patches) * v->embed_dim;
}

/* The rows and width of QUERIES slot `slot` (checked at create). */
static inline vh_query_set_desc cpu_query_set(const vh_executor *e, uint32_t slot)
{
    return e->model->query_sets[e->model->slots[slot].tower];
}

/* Frame f's rows of QUERIES slot `slot`: [rows, width]. */
static inline float *cpu_query_rows(vh_executor *e, uint32_t slot, uint32_t frame)
{
    const vh_query_set_desc s = cpu_query_set(e, slot);
    return e->query_data[slot] + (size_t)frame * s.rows * s.width;
}

/* Block kinds, a file each (cpu_vit_embed.c, ...). Inputs were validated by cpu_executor_run. */
void cpu_vit_embed(vh_executor *e, const cpu_block *b, const vh_batch *batch);
void cpu_vit_block(vh_executor *e, const cpu_block *b, const vh_batch *batch);
void cpu_rope_tower_layer(vh_executor *e, const cpu_block *b, const vh_batch *batch);
uint64_t cpu_rope_tower_layer_scratch_floats(const vh_executor *e, const cpu_block *b);
void cpu_projector(vh_executor *e, const cpu_block *b, const vh_batch *batch);
void cpu_llm_positions(vh_executor *e, const vh_batch *batch);
void cpu_llm_embed(vh_executor *e, const cpu_block *b, const vh_batch *batch);
void cpu_llm_block(vh_executor *e, const cpu_block *b, const vh_batch *batch);
void cpu_llm_head(vh_executor *e, const cpu_block *b, const vh_batch *batch);
void cpu_planner(vh_executor *e, const cpu_block *b, const vh_batch *batch);
uint64_t cpu_planner_scratch_floats(const vh_executor *e, const cpu_block *b);
void cpu_query_chain(vh_executor *e, const cpu_block *b, const vh_batch *batch);
uint64_t cpu_query_chain_scratch_floats(const vh_executor *e, const cpu_block *b);
void cpu_modulated_norm(vh_executor *e, const cpu_block *b, const vh_batch *batch);
uint64_t cpu_modulated_norm_scratch_floats(const vh_executor *e, const cpu_block *b);
void cpu_query_layer(vh_executor *e, const cpu_block *b, const vh_batch *batch);
uint64_t cpu_query_layer_scratch_floats(const vh_executor *e, const cpu_block *b);

#endif
