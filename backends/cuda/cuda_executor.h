/*
 * The cuda block executor: weights resident on the GPU in bf16 (uploaded once from the mapped
 * checkpoint; q/k/v and gate/up concatenated so each is one GEMM), small vectors in fp32, a KV
 * cache in bf16, every activation buffer allocated once at creation in one arena, one stream.
 * executor_run enqueues the blocks and synchronises once, at the end, to hand back the tokens.
 */
#ifndef VH_CUDA_EXECUTOR_H
#define VH_CUDA_EXECUTOR_H

#include "cuda_gemm.h"
#include "cuda_kernels.h"
#include "cuda_profile.h"
#include "block_variants.h"
#include "vlahybrid/backend.h"

#define CUDA_MAX_ROLES VH_MAX_ROLES

struct cuda_block;
struct cuda_arena;
struct cuda_uploader;
struct vh_executor;

/* How the cuda executor holds and runs a block kind (cuda_kind_table.c, in the order of
 * vh_block_variants; a file per kind). Tensors are uploaded by role: 1-D ones as fp32 vectors,
 * the others as bf16 matrices, but for the roles named here. */
typedef struct cuda_kind {
    uint64_t fp32_roles;               /* kept fp32 all the same: added, never multiplied (embeddings) */
    uint64_t patch_roles;              /* the patch embedding's [D, 3, P, P] weight, as padded rows */
    uint64_t packed_roles;             /* laid out by the kind itself, by plan_packed and upload_packed */
    /* carve (or, on an empty arena, count) the packed tensors' device memory; NULL: none */
    void (*plan_packed)(struct vh_executor *e, struct cuda_block *b, struct cuda_arena *a);
    /* upload them into what plan_packed carved */
    vh_status (*upload_packed)(struct vh_executor *e, struct cuda_uploader *u, const struct cuda_block *b, char *err,
                               size_t err_size);
    /* enqueue on e->stream; VH_OK or a GEMM failure */
    vh_status (*run)(struct vh_executor *e, const struct cuda_block *b, const vh_batch *batch, char *err,
                     size_t err_size);
    /* blocks on query sets: the bytes of scratch a run takes (from e->queries.scratch); NULL: none */
    size_t (*scratch_bytes)(const struct vh_executor *e, const struct cuda_block *b);
    /* at create: VH_OK, or VH_ERR_UNSUPPORTED with a message for a shape the kernels cannot run;
     * NULL: every shape the block checks accept */
    vh_status (*check)(const struct vh_executor *e, const struct cuda_block *b, char *err, size_t err_size);
} cuda_kind;

extern const cuda_kind cuda_kinds[VH_N_BLOCK_VARIANTS];
/* The entries of vh_block_variant_support this backend runs (a run in cuda_kinds), in that order:
 * what the plugin table lists and executor_create checks blocks against (cuda_kinds_init). */
extern vh_kind_support cuda_support[VH_N_BLOCK_VARIANTS];
extern uint32_t cuda_n_support;
void cuda_kinds_init(void);

/* A block's tensors by role (t: the host views, data NULL when absent), on the device: matrices
 * bf16 (mat), vectors fp32 (vec). */
typedef struct cuda_block {
    const vh_block_desc *desc;
    const vh_block_variant *variant;   /* what the executor knows of its kind */
    const cuda_kind *kind;             /* how this backend holds and runs it */
    vh_block_info info;                /* what it keeps of the kind's parameters */
    uint32_t state;                    /* desc->state */
    vh_tensor_view t[CUDA_MAX_ROLES];
    vhc_bf16 *mat[CUDA_MAX_ROLES];
    float *vec[CUDA_MAX_ROLES];
    vhc_bf16 *qkv_w;                   /* LLM: [q; k; v] rows, [(Hq + 2 Hkv) hd, Dl] */
    vhc_bf16 *gate_up_w;               /* LLM: [gate; up] rows, [2F, Dl] */
    float *qkv_bias;                   /* LLM with biases (Qwen2): [q | k | v] fp32, [(Hq + 2 Hkv) hd]; else NULL */
    /* LLM: LoRA kept apart, set s, projection p (q, k, v, o): A as [r8, in] (rows past r zero), B
     * pre-scaled by lora_scale as [out, r8] (columns past r zero), r8 = the rank rounded up to 8
     * (lora_ld): rows 16-byte aligned for the GEMV kernel and cuBLASLt. NULL where absent. */
    vhc_bf16 *lora_a[VH_BLOCK_VARIANT_LORA_SETS][4], *lora_b[VH_BLOCK_VARIANT_LORA_SETS][4];
    int64_t lora_ld[VH_BLOCK_VARIANT_LORA_SETS][4];
    /* A set adapting q, k and v with one rank runs them as one pair: its three A one after the other
     * ([3 r8, Dl]: lora_a[set][0] is its start) and qkv_lora_b, the three B block-diagonal
     * ([(Hq + 2 Hkv) hd, 3 r8], pre-scaled), so x A^T and t B^T are one GEMM each for the fused
     * q|k|v output instead of three (they were launch-bound: 0.5B's three pairs took 5x the q|k|v
     * GEMM itself). NULL: the set's q/k/v pairs run one by one. */
    vhc_bf16 *qkv_lora_b[VH_BLOCK_VARIANT_LORA_SETS];
    uint32_t lora_sets;                /* bit s: the block holds a pair of set s */
} cuda_block;

/* A bump allocator over one cudaMalloc. */
typedef struct cuda_arena {
    char *base;
    size_t size, used;
} cuda_arena;

/* A ViT block's scratch, shared by the towers (they run one after the other on the executor's
 * stream: two towers on two streams were measured to gain nothing once a batch's images run
 * together, doc/performance.md). */
typedef struct vit_scratch {
    vhc_bf16 *patches;                 /* [NP, VHC_PATCH_LD(P)] im2col */
    vhc_bf16 *xn;                      /* [T, D] normed tokens */
    float *qkv;                        /* [T, 3D] */
    vhc_bf16 *q, *k, *v, *attn;        /* [T, D]; a layer with windows: the padded grid's tokens */
    float *tmp;                        /* [T, D] projection outputs; patch-embed GEMM output */
    float *mlp;                        /* [T, H]; with 2-D RoPE layers [T, 2H] (gate | up) */
    vhc_bf16 *mlp_bf16;                /* [T, H]; with 2-D RoPE layers rows of H rounded up to 8 */
    float *rope;                       /* with 2-D RoPE layers: a layer's rotations [grid][D / 4] (cos, sin) */
} vit_scratch;

typedef struct vit_buffers {
    float *x[VH_MAX_TOWERS];           /* [max_images, T_t, D_t] the towers' tokens */
    float *pixels;                     /* [max_images, towers' planes] every image of a batch, uploaded at once */
    float *pixels_host;                /* pinned mirror: the batch's planes gathered, then one async copy */
    uint64_t pixel_floats;             /* one image's planes, all towers: sum of 3 S_t S_t */
    uint64_t tower_pixels[VH_MAX_TOWERS]; /* tower t's planes start here within an image */
    vit_scratch scratch;
} vit_buffers;

typedef struct projector_buffers {
    vhc_bf16 *in;                      /* [N, Dv] */
    float *h1;                         /* [N, H1] */
    vhc_bf16 *h1_bf16;
    float *h2;                         /* [N, Dl] */
    vhc_bf16 *h2_bf16;
    float *patch_embeds;               /* [max_images, N, Dl] the LLM's image rows */
} projector_buffers;

typedef struct llm_buffers {
    float *x;                          /* [R, Dl] residual stream (crosses executors) */
    vhc_bf16 *xn;                      /* [R, Dl] */
    float *qkv;                        /* [R, (Hq + 2 Hkv) hd] */
    vhc_bf16 *q;                       /* [R, Hq hd] after RoPE */
    vhc_bf16 *attn;                    /* [R, Hq hd] */
    float *gate_up;                    /* [R, 2F] */
    vhc_bf16 *act;                     /* [R, F] */
    vhc_bf16 *head_in;                 /* [S, Dl] */
    float *logits;                     /* [S, V] */
    int32_t *tokens;                   /* [S] argmax */
    vhc_row *rows;                     /* [R] per-row metadata */
    int32_t *last_rows;                /* [S] each segment's last row */
    vhc_attention_tile *tiles;         /* [max_tiles] the prefill segments' attention tiles */
    float *rope_inv_freq;              /* [hd / 2] */
    float *lora_t;                     /* [R, r8] x A^T of one LoRA pair (the largest r8 held) */
    vhc_bf16 *lora_t_bf16;             /* the same in bf16: the B GEMM's input */
    /* pinned host mirrors */
    vhc_row *rows_host;
    int32_t *last_rows_host;
    int32_t *tokens_host;
    vhc_attention_tile *tiles_host;
    uint32_t n_tiles, max_tiles;       /* this batch's tiles (cuda_llm_plan_attention) */
    float *x_out_host;                 /* [HIDDEN_OUT_ROWS, Dl] the rows a short run ends with */
} llm_buffers;

/* The query sets (VH_SLOT_KIND_QUERIES) the held blocks read or write, [max_frames, rows, width]
 * fp32 on the device each, kept between runs; and one scratch region, the largest a query block
 * asks for (they run one after the other on the stream). cuda_query_sets.c. */
typedef struct query_buffers {
    float **data;                      /* [model's n_slots] (host array): NULL where no held block touches it */
    float **host;                      /* [n_slots] pinned mirrors of the core's inputs, made at a slot's first
                                        * input: a run's uploads then read fixed addresses (a graph replays them) */
    char *scratch;
    size_t scratch_bytes;
} query_buffers;

/* A graph's key holds the filled slots as a bitmask of this many words: models of more slots run
 * their query-set runs without graphs. */
#define CUDA_GRAPH_INPUT_WORDS 4

/* Rows one batch may ask for (VH_BATCH_HIDDEN_ROWS): a few per segment. */
#define CUDA_HIDDEN_ROWS_PER_SEGMENT 4
/* Noise and plan floats a batch may carry per segment (VH_BATCH_PLAN). */
#define CUDA_PLAN_STRIDE_MAX 4096

/* The head's hidden rows, the planners' work, the segments' own embeddings (Orion's). */
typedef struct head_buffers {
    int32_t *rows, *rows_host;         /* [max_hidden] the batch's hidden rows (device, pinned mirror) */
    float *hidden;                     /* [max_hidden, Dl] their normed states, fp32 */
    vhc_bf16 *hidden_bf16;             /* ... in bf16 (the planners' first GEMM) */
    uint32_t max_hidden;
    float *noise, *plan;               /* [S, CUDA_PLAN_STRIDE_MAX] the batch's noise in, plans out */
    /* planner scratch (sized for the largest planner held) */
    float *f;                          /* [S, F] each segment's feature */
    vhc_bf16 *f_bf16;
    float *t1, *t2;                    /* [S T, W] GEMM outputs, W the widest step */
    vhc_bf16 *b1, *b2;                 /* [S T, W] their activations, the next GEMM's input */
    float *gi, *gh;                    /* [S, 3G] the GRU's gate GEMMs */
    float *h;                          /* [layers, S, G] the GRU's state */
    vhc_bf16 *h_bf16, *z, *y;          /* h in bf16; z [S, L]; y [S T, G] the last layer's outputs */
    /* VH_BATCH_SEGMENT_EMBEDS: the segments whose image rows are their own, uploaded to the top
     * patch-embedding slots (the images' are below them) */
    uint32_t n_embeds;
    const float **embed_src;           /* [max_images] */
    uint32_t *embed_rows;              /* [max_images] rows each brings */
    uint32_t *embed_slot;              /* [max_images] the slot each goes to */
} head_buffers;

/* A run of at most this many rows that ends before the head copies its hidden rows to the host
 * with the run's own synchronisation, so read_hidden is a memcpy (a decode step handed to another
 * stage pays one GPU round trip, not two). Longer runs are read straight into the caller's memory. */
#define HIDDEN_OUT_ROWS 8

struct vh_executor {
    vh_executor_params params;
    const vh_model_desc *model;
    int device;
    cudaStream_t stream;
    /* The host waits for the stream on this event, made with cudaEventBlockingSync: the thread
     * sleeps instead of spinning a core (the runtime's default spins while it has fewer contexts
     * than CPUs), which a CPU stage's team beside it needs. NULL with VH_CUDA_SYNC=spin. */
    cudaEvent_t done;
    vhc_gemm *gemm;
    cuda_arena weights, work;
    cuda_block *blocks;                /* [params.n_blocks] */

    uint32_t n_layers_held, first_state, max_segments; /* first_state: the first KV cache's state slot */
    vhc_bf16 *k_cache, *v_cache;       /* [layers held, max_sequences, max_context, Hkv hd] */
    size_t cache_bytes;
    vit_buffers vit;
    projector_buffers proj;
    llm_buffers llm;
    head_buffers head;
    query_buffers queries;
    uint32_t last_rows_count;          /* rows of the last batch (read_hidden) */
    uint32_t x_out_rows;               /* rows in llm.x_out_host from the last run (0: none) */
    /* The GPU shares the host's memory (integrated, or VH_CUDA_INTEGRATED=1: cuda_shared_memory.h).
     * bind_hidden then hands the next run the core's rows, mapped pinned memory, as its device
     * pointer: that run's llm.x is bound_x, read and written in place (no copy either way). */
    int shares_host_memory;
    float *bound_x;                    /* the next run's rows (device address of the core's memory); NULL: own */
    uint32_t bound_rows;               /* how many rows bound_x holds */

    /* A one-row decode step and a vision batch replay captured CUDA graphs: no per-kernel launch
     * cost (a vision batch is ~600 small kernels, launch-bound without one). */
    int graphs_enabled;                /* 0 after a capture failed, or with VH_CUDA_GRAPHS=0 */
    /* one graph per block range (a moving pipeline split runs several) and image count (0: decode) */
    /* (the rows' address is part of the key: a graph holds the pointers it was captured with) */
    /* a run on query sets: its frames and which slots the core filled are part of the key too */
    struct { cudaGraphExec_t exec; uint32_t first_block, n_blocks, n_images, n_frames; const float *x; int seen;
             uint64_t inputs[CUDA_GRAPH_INPUT_WORDS]; uint64_t last_use; } graphs[32];
    uint64_t graph_clock;
    vhc_profile *profile;              /* VH_CUDA_PROFILE=1 only (cuda_profile.h) */
    /* VH_CUDA_KV_GATHER=1, a benchmark peer only (ActionFlow's way): every layer of every pass copies
     * each segment's keys and values, all of its positions, into this one-layer region (the same
     * offsets) and attention reads the copies: the bytes a gather into a packed KV buffer moves. */
    vhc_bf16 *gather_k, *gather_v;
};

/* Marks where an operation starts on the stream, for the opt-in profile. */
#define VHC_MARK(e, op, rows) vhc_profile_mark((e)->profile, (e)->stream, (op), (rows))

/* A cuda failure as the status it means (out of device memory, or the backend failed) and the
 * message "cuda: WHAT: error string (error name)". */
vh_status cuda_fail(char *err, size_t err_size, cudaError_t e, const char *what);

/* The host-side part of an executor: its parameters checked, its blocks and LLM layers described
 * (no device memory yet); freed with cuda_executor_free_host. */
vh_status cuda_executor_describe(const vh_executor_params *params, vh_executor **out, char *err, size_t err_size);
void cuda_executor_free_host(vh_executor *e);

vh_status cuda_executor_plan_memory(const vh_executor_params *params, vh_memory_report *need, char *err,
                                    size_t err_size);
vh_status cuda_executor_create(const vh_executor_params *params, vh_executor **out, char *err, size_t err_size);
void cuda_executor_destroy(vh_executor *e);
vh_status cuda_executor_run(vh_executor *e, const vh_batch *batch, uint32_t first_block, uint32_t n_blocks,
                            char *err, size_t err_size);
vh_status cuda_read_hidden(vh_executor *e, float *dst, uint32_t n_rows, char *err, size_t err_size);
vh_status cuda_write_hidden(vh_executor *e, const float *src, uint32_t n_rows, char *err, size_t err_size);
/* Offered only where the GPU shares the host's memory (plugin.c): `rows` must come from this
 * plugin's host_alloc (mapped). */
vh_status cuda_bind_hidden(vh_executor *e, float *rows, uint32_t n_rows, char *err, size_t err_size);

/* A query set's sizes, and frame f's rows [rows, width] of a held one on the device. */
static inline vh_query_set_desc cuda_query_set(const vh_executor *e, uint32_t slot)
{
    return e->model->query_sets[e->model->slots[slot].tower];
}

static inline float *cuda_query_rows(vh_executor *e, uint32_t slot, uint32_t frame)
{
    const vh_query_set_desc s = cuda_query_set(e, slot);
    return e->queries.data[slot] + (size_t)frame * s.rows * s.width;
}

/* The query sets (cuda_query_sets.c): the host array of their pointers (describe), their device
 * memory and the scratch (a memory plan walk), the core's inputs copied into pinned mirrors
 * (stage, before the run) and from there to the device (upload, among the run's operations: a
 * graph captures it), and read_slot (a query set's frame, or a tower's image). */
vh_status cuda_queries_describe(vh_executor *e, char *err, size_t err_size);
void cuda_memory_plan_queries(vh_executor *e, cuda_arena *a);
cudaError_t cuda_stage_slot_inputs(vh_executor *e, const vh_batch *batch);
cudaError_t cuda_upload_slot_inputs(vh_executor *e, const vh_batch *batch);
void cuda_queries_free(vh_executor *e);
vh_status cuda_read_slot(vh_executor *e, uint32_t slot, uint32_t image, float *dst, size_t n_floats, char *err,
                         size_t err_size);

static inline float *cuda_tower_tokens(vh_executor *e, uint32_t t, uint32_t image)
{
    const vh_vit_desc *v = &e->model->towers[t];
    return e->vit.x[t] + (size_t)image * (v->n_prefix + v->n_patches) * v->embed_dim;
}

/* Block kinds, a file each (cuda_vit_embed.c, ...): enqueue on e->stream; VH_OK or a GEMM failure. */
vh_status cuda_vit_embed(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size);
vh_status cuda_vit_block(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size);
vh_status cuda_rope_tower_layer(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err,
                                size_t err_size);
vh_status cuda_rope_tower_layer_check(const vh_executor *e, const cuda_block *b, char *err, size_t err_size);
vh_status cuda_projector(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size);
vh_status cuda_llm_embed(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size);
vh_status cuda_llm_block(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size);
/* After the rows are staged: the batch's prefill segments as flash-attention tiles (llm.tiles_host). */
void cuda_llm_plan_attention(vh_executor *e, const vh_batch *batch);
vh_status cuda_llm_head(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size);
vh_status cuda_planner(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size);
/* On query sets, once per frame of the batch; each with its scratch (cuda_kind.scratch_bytes). */
vh_status cuda_query_chain(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size);
size_t cuda_query_chain_scratch_bytes(const vh_executor *e, const cuda_block *b);
vh_status cuda_query_chain_check(const vh_executor *e, const cuda_block *b, char *err, size_t err_size);
vh_status cuda_modulated_norm(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size);
size_t cuda_modulated_norm_scratch_bytes(const vh_executor *e, const cuda_block *b);
vh_status cuda_query_layer(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size);
size_t cuda_query_layer_scratch_bytes(const vh_executor *e, const cuda_block *b);
vh_status cuda_query_layer_check(const vh_executor *e, const cuda_block *b, char *err, size_t err_size);

#endif
