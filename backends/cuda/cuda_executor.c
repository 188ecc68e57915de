#include "backend_error.h"
#include "backend_knobs.h"
#include "backend_log.h"
#include "cuda_executor.h"
#include "cuda_shared_memory.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 256
#define GEMM_WORKSPACE_BYTES ((size_t)32 << 20)
#define STAGING_BYTES ((size_t)64 << 20)


static vh_status cuda_fail(char *err, size_t err_size, cudaError_t e, const char *what)
{
    vh_status st = e == cudaErrorMemoryAllocation ? VH_ERR_DEVICE_OUT_OF_MEMORY : VH_ERR_BACKEND_FAILED;
    return vh_backend_fail(err, err_size, st, "cuda: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

static size_t align_up(size_t n) { return (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1); }

/* Carve n bytes from an arena sized beforehand by the same sequence of requests. */
static void *arena_take(cuda_arena *a, size_t n)
{
    void *p = a->base ? a->base + a->used : NULL;
    a->used += align_up(n ? n : 1);
    return p;
}

/* ------------------------------------------------------------------------------------------------
 * Which tensors become bf16 matrices, which fp32 vectors.
 */
static int is_fp32_tensor(const cuda_block *b, uint32_t i)
{
    const vh_block_desc *d = b->desc;
    if (b->t[i].ndim == 1) return 1;
    /* position / class / register embeddings are added, never multiplied: keep them fp32 */
    return d->kind == VH_BLOCK_VIT_EMBED && i != VH_VIT_EMBED_PATCH_W;
}

/* The LLM tensors held in the block's own layout, uploaded apart (upload_weights, upload_llm_extras): q/k/v and
 * gate/up concatenated, the q/k/v biases stacked into one vector, the LoRA pairs padded. */
static int is_packed_llm_tensor(const cuda_block *b, uint32_t i)
{
    const vh_block_desc *d = b->desc;
    return d->kind == VH_BLOCK_LLM &&
           (i == VH_LLM_Q || i == VH_LLM_K || i == VH_LLM_V || i == VH_LLM_GATE || i == VH_LLM_UP ||
            i == VH_LLM_Q_BIAS || i == VH_LLM_K_BIAS || i == VH_LLM_V_BIAS ||
            (i >= VH_LLM_Q_LORA_A && i <= VH_LLM_O_LORA_B) || (i >= VH_LLM_LORA1_Q_A && i <= VH_LLM_LORA1_O_B));
}

/* A LoRA rank rounded up to 8 (the padded pair's leading dimension). */
static int64_t lora_padded_rank(int64_t r) { return (r + 7) / 8 * 8; }

/* The patch embedding's [D, 3, P, P] weight, held as [D, VHC_PATCH_LD(P)] rows padded with zeros. */
static int is_padded_patch_weight(const cuda_block *b, uint32_t i)
{
    const vh_block_desc *d = b->desc;
    return d->kind == VH_BLOCK_VIT_EMBED && i == VH_VIT_EMBED_PATCH_W;
}

static int64_t n_elements(const vh_tensor_view *t)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}


/* ------------------------------------------------------------------------------------------------
 * Upload through a pinned staging buffer, converting to the device's dtype on the host.
 */
typedef struct uploader {
    void *staging;                     /* pinned, STAGING_BYTES */
} uploader;

static void convert_to_bf16(const void *src, vh_dtype dtype, int64_t first, int64_t n, uint16_t *dst)
{
    if (dtype == VH_DTYPE_BF16) {
        memcpy(dst, (const uint16_t *)src + first, (size_t)n * 2);
    } else if (dtype == VH_DTYPE_F16) {
        const uint16_t *s = (const uint16_t *)src + first;
        for (int64_t i = 0; i < n; i++) dst[i] = vh_f32_to_bf16(vh_f16_to_f32(s[i]));
    } else {
        const float *s = (const float *)src + first;
        for (int64_t i = 0; i < n; i++) dst[i] = vh_f32_to_bf16(s[i]);
    }
}

static void convert_to_f32(const void *src, vh_dtype dtype, int64_t first, int64_t n, float *dst)
{
    if (dtype == VH_DTYPE_F32) {
        memcpy(dst, (const float *)src + first, (size_t)n * 4);
    } else {
        const uint16_t *s = (const uint16_t *)src + first;
        for (int64_t i = 0; i < n; i++) dst[i] = dtype == VH_DTYPE_BF16 ? vh_bf16_to_f32(s[i]) : vh_f16_to_f32(s[i]);
    }
}

static vh_status upload(uploader *u, const vh_tensor_view *t, int to_f32, void *dst, char *err, size_t err_size)
{
    const int64_t n = n_elements(t), out_size = to_f32 ? 4 : 2, per_chunk = (int64_t)(STAGING_BYTES / 4);
    for (int64_t first = 0; first < n; first += per_chunk) {
        int64_t count = n - first < per_chunk ? n - first : per_chunk;
        if (to_f32) convert_to_f32(t->data, t->dtype, first, count, u->staging);
        else convert_to_bf16(t->data, t->dtype, first, count, u->staging);
        cudaError_t e = cudaMemcpy((char *)dst + first * out_size, u->staging, (size_t)(count * out_size),
                                   cudaMemcpyHostToDevice);
        if (e != cudaSuccess) return cuda_fail(err, err_size, e, t->name);
    }
    return VH_OK;
}

/* rows x cols values of t as bf16 rows ld elements apart, zeros past cols; each value times scale
 * first where scale is not 1 (a LoRA B, pre-scaled: one rounding to bf16 either way). */
static vh_status upload_padded_rows(uploader *u, const vh_tensor_view *t, int64_t rows, int64_t cols, int64_t ld,
                                    float scale, void *dst, char *err, size_t err_size)
{
    const int64_t per_chunk = (int64_t)(STAGING_BYTES / 2) / ld;
    for (int64_t first = 0; first < rows; first += per_chunk) {
        const int64_t count = rows - first < per_chunk ? rows - first : per_chunk;
        uint16_t *staging = u->staging;
        for (int64_t r = 0; r < count; r++) {
            convert_to_bf16(t->data, t->dtype, (first + r) * cols, cols, staging + r * ld);
            for (int64_t c = 0; scale != 1.0f && c < cols; c++) {
                float f;
                convert_to_f32(t->data, t->dtype, (first + r) * cols + c, 1, &f);
                staging[r * ld + c] = vh_f32_to_bf16(f * scale);
            }
            memset(staging + r * ld + cols, 0, (size_t)(ld - cols) * 2);
        }
        cudaError_t e = cudaMemcpy((uint16_t *)dst + first * ld, staging, (size_t)(count * ld * 2),
                                   cudaMemcpyHostToDevice);
        if (e != cudaSuccess) return cuda_fail(err, err_size, e, t->name);
    }
    return VH_OK;
}

/* Whether LoRA set `set` of an LLM block adapts q, k and v with one rank (cuda_executor.h: then they
 * run as one pair over the fused q|k|v output). Their A are carved one after the other. */
static int qkv_lora_fusable(const cuda_block *b, uint32_t set)
{
    const vh_tensor_view *A[3];
    for (uint32_t p = 0; p < 3; p++)
        if (!(A[p] = &b->t[vh_llm_lora_role(set, p)])->data) return 0;
    return A[0]->shape[0] == A[1]->shape[0] && A[0]->shape[0] == A[2]->shape[0];
}

/* t's rows as columns [col0, col0 + cols) of `rows` rows of width ld (the rest zero), scaled, in bf16. */
static vh_status upload_block_row(uploader *u, const vh_tensor_view *t, int64_t rows, int64_t cols, int64_t col0,
                                  int64_t ld, float scale, void *dst, char *err, size_t err_size)
{
    const int64_t per_chunk = (int64_t)(STAGING_BYTES / 2) / ld;
    for (int64_t first = 0; first < rows; first += per_chunk) {
        const int64_t count = rows - first < per_chunk ? rows - first : per_chunk;
        uint16_t *staging = u->staging;
        memset(staging, 0, (size_t)(count * ld * 2));
        for (int64_t r = 0; r < count; r++)
            for (int64_t c = 0; c < cols; c++) {
                float f;
                convert_to_f32(t->data, t->dtype, (first + r) * cols + c, 1, &f);
                staging[r * ld + col0 + c] = vh_f32_to_bf16(f * scale);
            }
        cudaError_t e = cudaMemcpy((uint16_t *)dst + first * ld, staging, (size_t)(count * ld * 2),
                                   cudaMemcpyHostToDevice);
        if (e != cudaSuccess) return cuda_fail(err, err_size, e, t->name);
    }
    return VH_OK;
}

/* ------------------------------------------------------------------------------------------------
 * Sizing and carving: the same walk runs twice, first with empty arenas to count the bytes.
 */
static void plan_weights(vh_executor *e, cuda_arena *a)
{
    const vh_model_desc *m = e->model;
    const vh_llm_desc *l = &m->llm;
    for (uint32_t i = 0; i < e->params.n_blocks; i++) {
        cuda_block *b = &e->blocks[i];
        const vh_block_desc *d = b->desc;
        for (uint32_t t = 0; t < CUDA_MAX_ROLES; t++) {
            const vh_tensor_view *v = &b->t[t];
            if (!v->data || is_packed_llm_tensor(b, t)) continue;
            /* a tensor another block of this executor already holds (tied embeddings) */
            int shared = 0;
            for (uint32_t j = 0; j < i && !shared; j++)
                for (uint32_t k = 0; k < CUDA_MAX_ROLES && !shared; k++)
                    if (e->blocks[j].t[k].data == v->data && !is_fp32_tensor(b, t)) {
                        b->mat[t] = e->blocks[j].mat[k];
                        shared = 1;
                    }
            if (shared) continue;
            if (is_padded_patch_weight(b, t))
                b->mat[t] = arena_take(a, (size_t)v->shape[0] * VHC_PATCH_LD(m->towers[b->tower].patch_size) * 2);
            else if (is_fp32_tensor(b, t)) b->vec[t] = arena_take(a, (size_t)n_elements(v) * 4);
            else b->mat[t] = arena_take(a, (size_t)n_elements(v) * 2);
        }
        if (d->kind == VH_BLOCK_LLM) {
            size_t qkv_rows = (size_t)(l->n_heads + 2 * l->n_kv_heads) * l->head_dim;
            b->qkv_w = arena_take(a, qkv_rows * l->hidden * 2);
            b->gate_up_w = arena_take(a, (size_t)2 * l->intermediate * l->hidden * 2);
            if (b->t[VH_LLM_Q_BIAS].data || b->t[VH_LLM_K_BIAS].data || b->t[VH_LLM_V_BIAS].data)
                b->qkv_bias = arena_take(a, qkv_rows * 4);
            for (uint32_t set = 0; set < VH_LLM_LORA_SETS; set++) {
                const int fused = qkv_lora_fusable(b, set);
                vhc_bf16 *fused_a = NULL; /* [3 r8, Dl]: q's, k's and v's A, one after the other */
                if (fused) {
                    const int64_t r8 = lora_padded_rank(b->t[vh_llm_lora_role(set, 0)].shape[0]);
                    fused_a = arena_take(a, (size_t)3 * r8 * l->hidden * 2);
                    b->qkv_lora_b[set] = arena_take(a, qkv_rows * 3 * r8 * 2);
                }
                for (uint32_t p = 0; p < 4; p++) {
                    const vh_tensor_view *A = &b->t[vh_llm_lora_role(set, p)], *B = &b->t[vh_llm_lora_role(set, p) + 1];
                    if (!A->data) continue;
                    b->lora_ld[set][p] = lora_padded_rank(A->shape[0]);
                    if (fused && p < 3) {
                        b->lora_a[set][p] = fused_a ? fused_a + (size_t)p * b->lora_ld[set][p] * l->hidden : NULL;
                        continue;
                    }
                    b->lora_a[set][p] = arena_take(a, (size_t)b->lora_ld[set][p] * A->shape[1] * 2);
                    b->lora_b[set][p] = arena_take(a, (size_t)B->shape[0] * b->lora_ld[set][p] * 2);
                }
            }
        }
    }
}

static uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static int kv_gather_requested(void)
{
    return vh_knob_is(VH_KNOB_CUDA_KV_GATHER, "1");
}

/* The head's hidden rows and the planners' buffers (Orion's), when the executor holds them. */
static void plan_head(vh_executor *e, cuda_arena *a)
{
    const vh_executor_params *p = &e->params;
    const uint64_t S = e->max_segments, Dl = e->model->llm.hidden;
    int has_head = 0;
    uint64_t F = 0, G = 0, L = 0, T = 0, layers = 0, W = 0;
    for (uint32_t i = 0; i < p->n_blocks; i++) {
        const cuda_block *b = &e->blocks[i];
        has_head |= b->kind->is_head;
        if (!b->kind->is_planner) continue;
        const vh_planner_params *pp = &b->plan;
        F = max64(F, pp->feature_dim);
        G = max64(G, pp->gru_hidden);
        L = max64(L, pp->latent_dim);
        T = max64(T, pp->n_steps);
        layers = max64(layers, pp->gru_layers);
        W = max64(W, max64(max64(2ull * pp->feature_dim, 4ull * pp->gru_hidden), 2ull * pp->n_modes));
    }
    head_buffers *h = &e->head;
    if (has_head) {
        h->max_hidden = (uint32_t)(CUDA_HIDDEN_ROWS_PER_SEGMENT * S);
        h->rows = arena_take(a, (uint64_t)h->max_hidden * 4);
        h->hidden = arena_take(a, (uint64_t)h->max_hidden * Dl * 4);
        h->hidden_bf16 = arena_take(a, (uint64_t)h->max_hidden * Dl * 2);
    }
    if (!F) return;
    h->noise = arena_take(a, S * CUDA_PLAN_STRIDE_MAX * 4);
    h->plan = arena_take(a, S * CUDA_PLAN_STRIDE_MAX * 4);
    h->f = arena_take(a, S * F * 4);
    h->f_bf16 = arena_take(a, S * F * 2);
    h->t1 = arena_take(a, S * T * W * 4);
    h->t2 = arena_take(a, S * T * W * 4);
    h->b1 = arena_take(a, S * T * W * 2);
    h->b2 = arena_take(a, S * T * W * 2);
    h->gi = arena_take(a, S * 3 * G * 4);
    h->gh = arena_take(a, S * 3 * G * 4);
    h->h = arena_take(a, layers * S * G * 4);
    h->h_bf16 = arena_take(a, layers * S * G * 2);
    h->z = arena_take(a, S * L * 2);
    h->y = arena_take(a, S * T * G * 2);
}

/* The widest padded LoRA rank of the LLM blocks held, either set, three times a fused q|k|v set's
 * (the width of x A^T; 0: no LoRA). */
static uint64_t max_lora_ld(const vh_executor *e)
{
    uint64_t r8 = 0;
    for (uint32_t i = 0; i < e->params.n_blocks; i++)
        for (uint32_t set = 0; e->blocks[i].desc->kind == VH_BLOCK_LLM && set < VH_LLM_LORA_SETS; set++)
            for (uint32_t p = 0; p < 4; p++) {
                const vh_tensor_view *A = &e->blocks[i].t[vh_llm_lora_role(set, p)];
                if (A->data)
                    r8 = max64(r8, (uint64_t)lora_padded_rank(A->shape[0]) * (qkv_lora_fusable(&e->blocks[i], set) ? 3 : 1));
            }
    return r8;
}

static void plan_work(vh_executor *e, cuda_arena *a)
{
    const vh_model_desc *m = e->model;
    const vh_executor_params *p = &e->params;
    int has_vit = 0, has_proj = 0, has_llm = 0;
    for (uint32_t i = 0; i < p->n_blocks; i++) {
        uint32_t k = e->blocks[i].desc->kind;
        has_vit |= k == VH_BLOCK_VIT_EMBED || k == VH_BLOCK_VIT;
        has_proj |= k == VH_BLOCK_PROJECTOR;
        has_llm |= e->blocks[i].kind->uses_rows;
    }
    const uint64_t images = p->max_images ? p->max_images : 1;
    if (has_vit) {
        uint64_t T = 0, D = 0, H = 0, PP3 = 0, NP = 0;
        for (uint32_t t = 0; t < m->n_towers; t++) {
            const vh_vit_desc *v = &m->towers[t];
            uint64_t tokens = (uint64_t)v->n_prefix + v->n_patches;
            e->vit.x[t] = arena_take(a, images * tokens * v->embed_dim * 4);
            T = max64(T, tokens);
            D = max64(D, v->embed_dim);
            H = max64(H, v->mlp_hidden);
            PP3 = max64(PP3, (uint64_t)VHC_PATCH_LD(v->patch_size));
            NP = max64(NP, v->n_patches);
        }
        /* a block runs its row-wise steps and GEMMs over all images' tokens at once */
        const uint64_t IT = images * T;
        e->vit.pixel_floats = 0;
        for (uint32_t t = 0; t < m->n_towers; t++) {
            e->vit.tower_pixels[t] = e->vit.pixel_floats;
            e->vit.pixel_floats += 3ull * m->towers[t].image_size * m->towers[t].image_size;
        }
        e->vit.pixels = arena_take(a, images * e->vit.pixel_floats * 4);
        vit_scratch *s = &e->vit.scratch;
        s->patches = arena_take(a, NP * PP3 * 2);
        s->xn = arena_take(a, IT * D * 2);
        s->qkv = arena_take(a, IT * 3 * D * 4);
        s->q = arena_take(a, IT * D * 2);
        s->k = arena_take(a, IT * D * 2);
        s->v = arena_take(a, IT * D * 2);
        s->attn = arena_take(a, IT * D * 2);
        s->tmp = arena_take(a, max64(IT, NP) * D * 4);
        s->mlp = arena_take(a, IT * H * 4);
        s->mlp_bf16 = arena_take(a, IT * H * 2);
    }
    if (has_proj || has_llm) e->proj.patch_embeds = arena_take(a, images * m->n_image_tokens * m->llm.hidden * 4);
    if (has_proj) { /* all images' rows at once */
        const uint64_t N = images * m->n_image_tokens;
        e->proj.in = arena_take(a, N * m->vision_dim * 2);
        e->proj.h1 = arena_take(a, N * m->projector_hidden * 4);
        e->proj.h1_bf16 = arena_take(a, N * m->projector_hidden * 2);
        e->proj.h2 = arena_take(a, N * m->llm.hidden * 4);
        e->proj.h2_bf16 = arena_take(a, N * m->llm.hidden * 2);
    }
    if (has_llm) {
        const vh_llm_desc *l = &m->llm;
        const uint64_t R = p->max_rows, S = e->max_segments, Dl = l->hidden;
        const uint64_t qkv_dim = (uint64_t)(l->n_heads + 2 * l->n_kv_heads) * l->head_dim;
        const uint64_t q_dim = (uint64_t)l->n_heads * l->head_dim;
        e->llm.x = arena_take(a, R * Dl * 4);
        e->llm.xn = arena_take(a, R * Dl * 2);
        e->llm.qkv = arena_take(a, R * qkv_dim * 4);
        e->llm.q = arena_take(a, R * q_dim * 2);
        e->llm.attn = arena_take(a, R * q_dim * 2);
        e->llm.gate_up = arena_take(a, R * 2 * l->intermediate * 4);
        e->llm.act = arena_take(a, R * l->intermediate * 2);
        e->llm.head_in = arena_take(a, S * Dl * 2);
        e->llm.logits = arena_take(a, S * l->vocab * 4);
        e->llm.tokens = arena_take(a, S * 4);
        e->llm.rows = arena_take(a, R * sizeof(vhc_row));
        e->llm.last_rows = arena_take(a, S * 4);
        e->llm.max_tiles = (uint32_t)(R / VHC_FLASH_TILE_ROWS + S);
        e->llm.tiles = arena_take(a, e->llm.max_tiles * sizeof(vhc_attention_tile));
        e->llm.rope_inv_freq = arena_take(a, (uint64_t)l->head_dim / 2 * 4);
        const uint64_t r8 = max_lora_ld(e);
        if (r8) {
            e->llm.lora_t = arena_take(a, R * r8 * 4);
            e->llm.lora_t_bf16 = arena_take(a, R * r8 * 2);
        }
    }
    plan_head(e, a);
    if (has_llm && kv_gather_requested()) {
        const uint64_t layer = (uint64_t)p->max_sequences * p->max_context * m->llm.n_kv_heads * m->llm.head_dim * 2;
        e->gather_k = arena_take(a, layer);
        e->gather_v = arena_take(a, layer);
    }
    arena_take(a, GEMM_WORKSPACE_BYTES); /* the last piece: cuBLASLt's workspace */
}

/* An LLM block's biases (stacked q | k | v, zeros for one it lacks) and LoRA pairs (A's padding
 * rows zero, B pre-scaled with its padding columns zero). */
static vh_status upload_llm_extras(vh_executor *e, uploader *u, const cuda_block *b, char *err, size_t err_size)
{
    const vh_llm_desc *l = &e->model->llm;
    const size_t q_dim = (size_t)l->n_heads * l->head_dim, kv_dim = (size_t)l->n_kv_heads * l->head_dim;
    vh_status st;
    cudaError_t ce;
    if (b->qkv_bias) {
        if ((ce = cudaMemset(b->qkv_bias, 0, (q_dim + 2 * kv_dim) * 4))) return cuda_fail(err, err_size, ce, "biases");
        const size_t offset[3] = {0, q_dim, q_dim + kv_dim};
        for (int i = 0; i < 3; i++)
            if (b->t[VH_LLM_Q_BIAS + i].data &&
                (st = upload(u, &b->t[VH_LLM_Q_BIAS + i], 1, b->qkv_bias + offset[i], err, err_size)))
                return st;
    }
    for (uint32_t set = 0; set < VH_LLM_LORA_SETS; set++)
        for (uint32_t p = 0; p < 4; p++) {
            const vh_tensor_view *A = &b->t[vh_llm_lora_role(set, p)], *B = &b->t[vh_llm_lora_role(set, p) + 1];
            if (!A->data) continue;
            const int64_t r = A->shape[0], r8 = b->lora_ld[set][p], in = A->shape[1];
            if ((st = upload(u, A, 0, b->lora_a[set][p], err, err_size))) return st;
            if (r8 > r && (ce = cudaMemset(b->lora_a[set][p] + r * in, 0, (size_t)((r8 - r) * in) * 2)))
                return cuda_fail(err, err_size, ce, A->name);
            if (b->lora_b[set][p] &&
                (st = upload_padded_rows(u, B, B->shape[0], r, r8, b->lora_scale, b->lora_b[set][p], err, err_size)))
                return st;
        }
    /* a fused set's B, block-diagonal: q's rows read t's first r8 columns, k's the next, v's the last */
    for (uint32_t set = 0; set < VH_LLM_LORA_SETS; set++) {
        if (!b->qkv_lora_b[set]) continue;
        const int64_t r8 = b->lora_ld[set][0], rows[3] = {q_dim, kv_dim, kv_dim};
        int64_t row0 = 0;
        for (int p = 0; p < 3; p++) {
            const vh_tensor_view *B = &b->t[vh_llm_lora_role(set, (uint32_t)p) + 1];
            if ((st = upload_block_row(u, B, rows[p], B->shape[1], p * r8, 3 * r8, b->lora_scale,
                                       b->qkv_lora_b[set] + row0 * 3 * r8, err, err_size)))
                return st;
            row0 += rows[p];
        }
    }
    return VH_OK;
}

static vh_status upload_weights(vh_executor *e, char *err, size_t err_size)
{
    uploader u;
    cudaError_t ce = cudaMallocHost(&u.staging, STAGING_BYTES);
    if (ce != cudaSuccess) return cuda_fail(err, err_size, ce, "pinned staging buffer");
    const vh_llm_desc *l = &e->model->llm;
    vh_status st = VH_OK;
    uint64_t total = 0, done = 0; /* progress: the bytes of the blocks' tensors */
    for (uint32_t i = 0; i < e->params.n_blocks; i++) total += vh_block_tensor_bytes(e->blocks[i].desc);
    for (uint32_t i = 0; i < e->params.n_blocks && st == VH_OK; i++) {
        cuda_block *b = &e->blocks[i];
        const vh_block_desc *d = b->desc;
        if (i && vh_executor_progress(&e->params, done, total)) { /* block i - 1 uploaded */
            st = vh_backend_fail(err, err_size, VH_ERR_CANCELLED, "cuda: cancelled after block %u of %u", i,
                                 e->params.n_blocks);
            break;
        }
        done += vh_block_tensor_bytes(d);
        for (uint32_t t = 0; t < CUDA_MAX_ROLES && st == VH_OK; t++) {
            const vh_tensor_view *v = &b->t[t];
            if (!v->data || is_packed_llm_tensor(b, t)) continue;
            int duplicate = 0; /* a tied tensor already uploaded by an earlier block */
            for (uint32_t j = 0; j < i && !duplicate; j++)
                for (uint32_t k = 0; k < CUDA_MAX_ROLES; k++)
                    if (e->blocks[j].t[k].data == v->data) duplicate = 1;
            if (duplicate && !is_fp32_tensor(b, t)) continue;
            if (is_padded_patch_weight(b, t)) {
                const int64_t cols = n_elements(v) / v->shape[0];
                st = upload_padded_rows(&u, v, v->shape[0], cols, VHC_PATCH_LD(e->model->towers[b->tower].patch_size),
                                        1.0f, b->mat[t], err, err_size);
                continue;
            }
            st = upload(&u, v, is_fp32_tensor(b, t), is_fp32_tensor(b, t) ? (void *)b->vec[t] : (void *)b->mat[t],
                        err, err_size);
        }
        if (d->kind == VH_BLOCK_LLM && st == VH_OK) {
            const size_t q_bytes = (size_t)l->n_heads * l->head_dim * l->hidden * 2;
            const size_t kv_bytes = (size_t)l->n_kv_heads * l->head_dim * l->hidden * 2;
            const size_t f_bytes = (size_t)l->intermediate * l->hidden * 2;
            if ((st = upload(&u, &b->t[VH_LLM_Q], 0, b->qkv_w, err, err_size)) ||
                (st = upload(&u, &b->t[VH_LLM_K], 0, (char *)b->qkv_w + q_bytes, err, err_size)) ||
                (st = upload(&u, &b->t[VH_LLM_V], 0, (char *)b->qkv_w + q_bytes + kv_bytes, err, err_size)) ||
                (st = upload(&u, &b->t[VH_LLM_GATE], 0, b->gate_up_w, err, err_size)) ||
                (st = upload(&u, &b->t[VH_LLM_UP], 0, (char *)b->gate_up_w + f_bytes, err, err_size)) ||
                (st = upload_llm_extras(e, &u, b, err, err_size)))
                break;
        }
    }
    cudaFreeHost(u.staging);
    if (st == VH_OK && vh_executor_progress(&e->params, total, total))
        st = vh_backend_fail(err, err_size, VH_ERR_CANCELLED, "cuda: cancelled after its last block");
    return st;
}

/* RoPE's inverse frequencies, computed once on the host (cuda_kernels.h). */
static vh_status upload_rope_table(vh_executor *e, char *err, size_t err_size)
{
    if (!e->llm.x) return VH_OK;
    const vh_llm_desc *l = &e->model->llm;
    float *inv_freq = malloc(sizeof(float) * (l->head_dim / 2 + 1));
    if (!inv_freq) return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
    vhc_rope_inv_freq(l->rope_theta, (int)l->head_dim, inv_freq);
    cudaError_t ce =
        cudaMemcpy(e->llm.rope_inv_freq, inv_freq, sizeof(float) * (l->head_dim / 2), cudaMemcpyHostToDevice);
    free(inv_freq);
    return ce == cudaSuccess ? VH_OK : cuda_fail(err, err_size, ce, "RoPE frequencies");
}

static vh_status allocate_host_mirrors(vh_executor *e, char *err, size_t err_size)
{
    cudaError_t ce;
    const uint64_t images = e->params.max_images ? e->params.max_images : 1;
    if (e->vit.pixels &&
        (ce = cudaMallocHost((void **)&e->vit.pixels_host, sizeof(float) * images * e->vit.pixel_floats)))
        return cuda_fail(err, err_size, ce, "pinned pixel buffer");
    if (!e->llm.x) return VH_OK;
    if ((ce = cudaMallocHost((void **)&e->llm.rows_host, sizeof(vhc_row) * e->params.max_rows)) ||
        (ce = cudaMallocHost((void **)&e->llm.last_rows_host, sizeof(int32_t) * e->max_segments)) ||
        (ce = cudaMallocHost((void **)&e->llm.tokens_host, sizeof(int32_t) * e->max_segments)) ||
        (ce = cudaMallocHost((void **)&e->llm.tiles_host, sizeof(vhc_attention_tile) * e->llm.max_tiles)) ||
        (ce = cudaMallocHost((void **)&e->llm.x_out_host, sizeof(float) * HIDDEN_OUT_ROWS * e->model->llm.hidden)) ||
        (e->head.rows && (ce = cudaMallocHost((void **)&e->head.rows_host, sizeof(int32_t) * e->head.max_hidden))))
        return cuda_fail(err, err_size, ce, "pinned host buffers");
    e->head.embed_src = calloc(images, sizeof *e->head.embed_src);
    e->head.embed_rows = calloc(images, sizeof *e->head.embed_rows);
    e->head.embed_slot = calloc(images, sizeof *e->head.embed_slot);
    if (!e->head.embed_src || !e->head.embed_rows || !e->head.embed_slot)
        return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
    return VH_OK;
}

/* An LLM block's LoRA pairs: both matrices or neither, 2-D, ranks that agree; notes the sets held. */
static int check_lora_pairs(cuda_block *b)
{
    for (uint32_t set = 0; set < VH_LLM_LORA_SETS; set++)
        for (uint32_t p = 0; p < 4; p++) {
            const vh_tensor_view *A = &b->t[vh_llm_lora_role(set, p)], *B = &b->t[vh_llm_lora_role(set, p) + 1];
            if (!A->data != !B->data || (A->data && (A->ndim != 2 || B->ndim != 2 || A->shape[0] != B->shape[1])))
                return 0;
            if (A->data) b->lora_sets |= 1u << set;
        }
    return 1;
}

/* The host-side part of an executor: its parameters and which blocks and LLM layers it holds. */
static vh_status describe_executor(const vh_executor_params *params, vh_executor **out, char *err, size_t err_size)
{
    *out = NULL;
    vh_executor_params known; /* a 2.2 core's shorter struct: no progress */
    if (!vh_executor_params_read(params, &known) || !params->model ||
        params->model->struct_size < sizeof(vh_model_desc) || params->model->struct_size > 65536 ||
        !vh_struct_tail_zero(params->model, params->model->struct_size, sizeof(vh_model_desc)))
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: executor parameters or model "
                               "description of a size this plugin does not know (ABI %d.%d)", VH_BACKEND_ABI_MAJOR,
                               VH_BACKEND_ABI_MINOR);
    params = &known;
    const vh_model_desc *m = params->model;
    for (uint32_t i = 0; m && i < params->n_blocks && params->first_block + i < m->n_blocks; i++) {
        const uint32_t index = params->first_block + i;
        if (!vh_block_check("cuda", cuda_kind_support, CUDA_N_KINDS, &m->blocks[index], index, err, err_size))
            return VH_ERR_UNSUPPORTED;
    }
    int n_devices = 0;
    cudaError_t ce = cudaGetDeviceCount(&n_devices);
    if (ce != cudaSuccess || n_devices == 0)
        return vh_backend_fail(err, err_size, VH_ERR_BACKEND_FAILED, "cuda: no usable GPU (%s)",
                    ce != cudaSuccess ? cudaGetErrorString(ce) : "none found");
    if (!m || params->n_blocks == 0 || params->first_block >= m->n_blocks ||
        params->n_blocks > m->n_blocks - params->first_block || params->max_rows == 0 ||
        params->max_sequences == 0 || params->max_context == 0 || (int)params->device >= n_devices)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: invalid executor parameters");
    vh_executor *e = calloc(1, sizeof *e);
    if (e) e->blocks = calloc(params->n_blocks, sizeof *e->blocks);
    if (!e || !e->blocks) {
        free(e);
        return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
    }
    e->params = *params;
    e->model = m;
    e->device = (int)params->device;
    e->max_segments = params->max_sequences < params->max_rows ? params->max_sequences : params->max_rows;
    for (uint32_t i = 0; i < params->n_blocks; i++) {
        cuda_block *b = &e->blocks[i];
        const vh_block_desc *d = &m->blocks[params->first_block + i];
        b->desc = d;
        b->kind = cuda_kind_of(d->kind);
        b->state = d->state_slot;
        if (d->kind == VH_BLOCK_VIT_EMBED || d->kind == VH_BLOCK_VIT) {
            b->tower = ((const vh_vit_params *)d->params)->tower;
            b->layer = ((const vh_vit_params *)d->params)->layer;
        } else if (d->kind == VH_BLOCK_LLM) {
            b->layer = ((const vh_llm_params *)d->params)->layer;
            b->lora_scale = ((const vh_llm_params *)d->params)->lora_scale;
        } else if (d->kind == VH_BLOCK_VAE_GRU_PLANNER) {
            memcpy(&b->plan, d->params, sizeof b->plan);
            const vh_planner_params *pp = &b->plan;
            if (!vh_planner_params_valid(pp, m->llm.hidden) ||
                2ull * pp->n_modes * pp->n_steps + 2ull * pp->latent_dim > CUDA_PLAN_STRIDE_MAX) {
                free(e->blocks);
                free(e);
                return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: planner of feature %u (the "
                                       "LLM's hidden size is %u), %u GRU layers of %u, %u modes of %u steps",
                                       pp->feature_dim, m->llm.hidden, pp->gru_layers, pp->gru_hidden, pp->n_modes,
                                       pp->n_steps);
            }
        }
        for (uint32_t t = 0; t < d->n_tensors; t++) b->t[d->tensors[t].role] = d->tensors[t];
        if (d->kind == VH_BLOCK_LLM && !check_lora_pairs(b)) {
            free(e->blocks);
            free(e);
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: block %u: a LoRA matrix without its "
                                   "pair, or A and B of ranks that differ", params->first_block + i);
        }
        if ((b->kind->has_state && d->state_slot == VH_NO_STATE) ||
            ((d->kind == VH_BLOCK_VIT_EMBED || d->kind == VH_BLOCK_VIT) && b->tower >= m->n_towers)) {
            free(e->blocks);
            free(e);
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: block %u: no state slot, or a "
                                   "tower the model lacks", params->first_block + i);
        }
        if (b->kind->has_state) {
            if (e->n_layers_held == 0) e->first_state = b->state;
            e->n_layers_held++;
        }
    }
    *out = e;
    return VH_OK;
}

/* Count what the executor will allocate: the same walks as the carving, on empty arenas. */
static void count_device_bytes(vh_executor *e, cuda_arena *weights, cuda_arena *work)
{
    plan_weights(e, weights);
    plan_work(e, work);
    const vh_llm_desc *l = &e->model->llm;
    e->cache_bytes = (size_t)e->n_layers_held * e->params.max_sequences * e->params.max_context *
                     l->n_kv_heads * l->head_dim * 2 * 2;
}

vh_status cuda_executor_plan_memory(const vh_executor_params *params, vh_memory_report *need, char *err,
                                    size_t err_size)
{
    vh_executor *e;
    vh_status st = describe_executor(params, &e, err, err_size);
    if (st) return st;
    cuda_arena w = {0}, x = {0};
    count_device_bytes(e, &w, &x);
    if (!need || need->struct_size < sizeof *need) {
        free(e->blocks);
        free(e);
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: memory report of a size this plugin "
                               "does not know");
    }
    *need = (vh_memory_report){.struct_size = sizeof *need, .weight_bytes = w.used, .cache_bytes = e->cache_bytes,
                               .work_bytes = x.used};
    free(e->blocks);
    free(e);
    return VH_OK;
}

/* Say what sharing the host's memory means for this executor: its budget is system RAM, the
 * hand-off is in place, and (when it holds only part of the model, a CPU stage holding the rest)
 * that the CPU stage draws on the same memory bandwidth (doc/jetson.md has the arithmetic). */
static void log_shared_memory(const vh_executor *e, uint64_t total, size_t free_bytes, size_t total_bytes)
{
    const vh_executor_params *p = &e->params;
    const int integrated = vhc_device_integrated(e->device);
    vh_backend_log(p, VH_LOG_INFO, "cuda: %s: the GPU shares the host's memory; the memory budget (%s) and the "
                   "%.3f GB taken here count against system RAM (%.3f GB free of %.3f GB); hidden rows cross "
                   "stages in mapped host memory, in place", integrated ? "integrated GPU" : "VH_CUDA_INTEGRATED=1 "
                   "on a discrete GPU (mapped memory over PCIe: a test of the path, slow)",
                   p->memory_budget ? "set" : "none: the free memory", total / 1e9, free_bytes / 1e9,
                   total_bytes / 1e9);
    if (p->n_blocks < p->model->n_blocks)
        vh_backend_log(p, VH_LOG_INFO, "cuda: blocks %u..%u of %u here: a CPU stage beside this GPU reads its weights "
                       "over the same memory bus, so a split adds CPU compute, not bandwidth (doc/jetson.md)",
                       p->first_block, p->first_block + p->n_blocks - 1, p->model->n_blocks);
}

vh_status cuda_executor_create(const vh_executor_params *params, vh_executor **out, char *err, size_t err_size)
{
    vh_executor *e;
    vh_status st = describe_executor(params, &e, err, err_size);
    if (st) return st;
    e->profile = vhc_profile_from_env();
    /* events do not time inside graphs; the peer's copies change size every step */
    e->graphs_enabled = !vh_knob_is(VH_KNOB_CUDA_GRAPHS, "0") && !e->profile && !kv_gather_requested();
    cudaError_t ce;
    if ((ce = cudaSetDevice(e->device)) || (ce = cudaStreamCreateWithFlags(&e->stream, cudaStreamNonBlocking)) ||
        /* VH_CUDA_SYNC=spin: the runtime's own wait (to measure what blocking costs) */
        (!vh_knob_is(VH_KNOB_CUDA_SYNC, "spin") &&
         (ce = cudaEventCreateWithFlags(&e->done, cudaEventBlockingSync | cudaEventDisableTiming)))) {
        st = cuda_fail(err, err_size, ce, "device setup");
        goto fail;
    }

    /* count, check against the budget and the card, then allocate and carve for real */
    cuda_arena count_w = {0}, count_x = {0};
    count_device_bytes(e, &count_w, &count_x);
    const uint64_t total = count_w.used + count_x.used + e->cache_bytes;
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    /* an integrated GPU's "device memory" is the system's RAM: cudaMemGetInfo counts it, and what
     * this executor takes the CPU side (the core, a CPU stage, the program) no longer has */
    e->shares_host_memory = vhc_shares_host_memory(e->device);
    const char *free_what = vhc_device_integrated(e->device) ? "free system memory (integrated GPU)" : "free GPU memory";
    if ((params->memory_budget && total > params->memory_budget) || total > free_bytes) {
        st = vh_backend_fail(err, err_size, VH_ERR_DEVICE_OUT_OF_MEMORY,
                  "cuda: blocks %u..%u need %.3f GB (weights %.3f, KV cache %.3f, activations and workspace %.3f) "
                  "but %s is %.3f GB", params->first_block, params->first_block + params->n_blocks - 1, total / 1e9,
                  count_w.used / 1e9, e->cache_bytes / 1e9, count_x.used / 1e9,
                  params->memory_budget && total > params->memory_budget ? "the memory budget" : free_what,
                  (params->memory_budget && total > params->memory_budget ? params->memory_budget : free_bytes) / 1e9);
        goto fail;
    }
    e->weights.size = count_w.used;
    e->work.size = count_x.used;
    if ((ce = cudaMalloc((void **)&e->weights.base, e->weights.size)) ||
        (ce = cudaMalloc((void **)&e->work.base, e->work.size)) ||
        (e->cache_bytes && ((ce = cudaMalloc((void **)&e->k_cache, e->cache_bytes / 2)) ||
                            (ce = cudaMalloc((void **)&e->v_cache, e->cache_bytes / 2))))) {
        st = cuda_fail(err, err_size, ce, "allocating device memory");
        goto fail;
    }
    plan_weights(e, &e->weights);
    plan_work(e, &e->work);
    void *workspace = e->work.base + e->work.used - align_up(GEMM_WORKSPACE_BYTES);
    if ((st = upload_weights(e, err, err_size)) || (st = allocate_host_mirrors(e, err, err_size)) ||
        (st = upload_rope_table(e, err, err_size)) ||
        (st = vhc_gemm_create(e->stream, workspace, GEMM_WORKSPACE_BYTES, &e->gemm, err, err_size)))
        goto fail;
    struct cudaDeviceProp prop;
    vh_backend_log(params, VH_LOG_INFO, "cuda: blocks %u..%u on %s: weights %.3f GB, KV cache %.3f GB, activations "
                   "and workspace %.3f GB; graphs %s%s", params->first_block, params->first_block + params->n_blocks - 1,
                   cudaGetDeviceProperties(&prop, e->device) == cudaSuccess ? prop.name : "a GPU", count_w.used / 1e9,
                   e->cache_bytes / 1e9, count_x.used / 1e9, e->graphs_enabled ? "on" : "off",
                   e->profile ? ", profiling" : "");
    if (e->shares_host_memory) log_shared_memory(e, total, free_bytes, total_bytes);
    *out = e;
    return VH_OK;
fail:
    cuda_executor_destroy(e);
    return st;
}

void cuda_executor_destroy(vh_executor *e)
{
    if (!e) return;
    if (e->stream) cudaStreamSynchronize(e->stream);
    char who[64];
    snprintf(who, sizeof who, "blocks %u..%u", e->params.first_block, e->params.first_block + e->params.n_blocks - 1);
    vhc_profile_destroy(e->profile, who, &e->params);
    for (uint32_t i = 0; i < sizeof e->graphs / sizeof e->graphs[0]; i++)
        if (e->graphs[i].exec) cudaGraphExecDestroy(e->graphs[i].exec);
    vhc_gemm_destroy(e->gemm);
    cudaFree(e->weights.base);
    cudaFree(e->work.base);
    cudaFree(e->k_cache);
    cudaFree(e->v_cache);
    cudaFreeHost(e->vit.pixels_host);
    cudaFreeHost(e->llm.rows_host);
    cudaFreeHost(e->llm.last_rows_host);
    cudaFreeHost(e->llm.tokens_host);
    cudaFreeHost(e->llm.tiles_host);
    cudaFreeHost(e->llm.x_out_host);
    cudaFreeHost(e->head.rows_host);
    free(e->head.embed_src);
    free(e->head.embed_rows);
    free(e->head.embed_slot);
    if (e->done) cudaEventDestroy(e->done);
    if (e->stream) cudaStreamDestroy(e->stream);
    free(e->blocks);
    free(e);
}

/* ------------------------------------------------------------------------------------------------
 * Running a batch.
 */

/* Wait until the stream's work is done: asleep on the executor's blocking event (a flag of the
 * event, not of the device, so a caller's own context flags stay as they are). */
static cudaError_t wait_stream(vh_executor *e)
{
    if (!e->done) return cudaStreamSynchronize(e->stream);
    cudaError_t ce = cudaEventRecord(e->done, e->stream);
    return ce == cudaSuccess ? cudaEventSynchronize(e->done) : ce;
}

static vh_status validate_and_stage_rows(vh_executor *e, const vh_batch *b, char *err, size_t err_size)
{
    const vh_executor_params *p = &e->params;
    const vh_llm_desc *l = &e->model->llm;
    if (b->n_rows == 0 || b->n_rows > p->max_rows || !b->tokens || b->n_segments == 0 || !b->segments ||
        b->n_segments > e->max_segments)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: batch of %u rows in %u segments exceeds the "
                    "executor's limits (%u rows, %u segments)", b->n_rows, b->n_segments, p->max_rows, e->max_segments);
    const int64_t kv_dim = (int64_t)l->n_kv_heads * l->head_dim;
    const uint32_t max_images = p->max_images ? p->max_images : 1;
    uint32_t row = 0, n_own = 0;
    /* segments with their own image rows take the top patch slots, below them the images' */
    for (uint32_t s = 0; s < b->n_segments && (b->options & VH_BATCH_SEGMENT_EMBEDS); s++) n_own += !!b->segments[s].embeds;
    if (n_own > max_images)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: %u segments bring their own image rows "
                               "(at most %u)", n_own, max_images);
    e->head.n_embeds = 0;
    for (uint32_t s = 0; s < b->n_segments; s++) {
        const vh_segment *seg = &b->segments[s];
        /* a segment with its own image rows (VH_BATCH_SEGMENT_EMBEDS) takes the next free patch slot */
        const int own = (b->options & VH_BATCH_SEGMENT_EMBEDS) && seg->embeds;
        const uint32_t image = own ? max_images - 1 - e->head.n_embeds : (uint32_t)seg->image;
        if (own) {
            e->head.embed_slot[e->head.n_embeds] = image;
            e->head.embed_src[e->head.n_embeds] = seg->embeds;
            e->head.embed_rows[e->head.n_embeds++] = 0;
        }
        if (seg->n_rows == 0 || seg->sequence >= p->max_sequences || row + seg->n_rows > b->n_rows ||
            (uint64_t)seg->position + seg->n_rows > p->max_context || (int64_t)seg->position + seg->rope_delta < 0)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: segment %u (sequence %u, %u rows at %u) is "
                        "outside the KV cache (%u sequences x %u positions)", s, seg->sequence, seg->n_rows,
                        seg->position, p->max_sequences, p->max_context);
        uint32_t image_rows = 0;
        const int64_t seq_base = (int64_t)seg->sequence * p->max_context * kv_dim;
        for (uint32_t i = 0; i < seg->n_rows; i++, row++) {
            int32_t tok = b->tokens[row];
            vhc_row *r = &e->llm.rows_host[row];
            if (tok == VH_TOKEN_IMAGE) {
                if ((!own && (seg->image < 0 || (uint32_t)seg->image >= max_images - n_own)) ||
                    image_rows >= e->model->n_image_tokens)
                    return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: segment %u has image rows for image "
                                "%d beyond its %u patches", s, seg->image, e->model->n_image_tokens);
                r->patch = (int32_t)(image * e->model->n_image_tokens + image_rows++);
                if (own) e->head.embed_rows[e->head.n_embeds - 1] = image_rows;
            } else if (tok < 0 || (uint32_t)tok >= l->vocab) {
                return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: token %d out of the vocabulary", tok);
            } else {
                r->patch = -1;
            }
            r->token = tok;
            r->rope_pos = (int32_t)(seg->position + i) + seg->rope_delta;
            r->n_keys = (int32_t)(seg->position + i + 1);
            r->kv_seq_base = seq_base;
            r->kv_write = seq_base + (int64_t)(seg->position + i) * kv_dim;
        }
        e->llm.last_rows_host[s] = (int32_t)row - 1;
    }
    if (row != b->n_rows)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: segments cover %u rows, batch has %u", row, b->n_rows);
    if ((b->options & VH_BATCH_HIDDEN_ROWS) && e->head.rows_host)
        for (uint32_t i = 0; i < b->n_hidden_rows && i < e->head.max_hidden; i++)
            e->head.rows_host[i] = (int32_t)b->hidden_rows[i];
    cuda_llm_plan_attention(e, b);
    return VH_OK;
}

/* Runs of consecutive segments the planners run on (every segment without VH_BATCH_PLAN_SEGMENTS):
 * calls fn(e, batch, first, n) for each; stops at the first error. */
static cudaError_t for_planned_runs(vh_executor *e, const vh_batch *batch,
                                    cudaError_t (*fn)(vh_executor *, const vh_batch *, uint32_t, uint32_t))
{
    cudaError_t ce = cudaSuccess;
    for (uint32_t s = 0; s < batch->n_segments && ce == cudaSuccess;) {
        if (!vh_batch_plans_segment(batch, s)) {
            s++;
            continue;
        }
        uint32_t n = 1;
        while (s + n < batch->n_segments && vh_batch_plans_segment(batch, s + n)) n++;
        ce = fn(e, batch, s, n);
        s += n;
    }
    return ce;
}

static cudaError_t upload_noise_run(vh_executor *e, const vh_batch *b, uint32_t first, uint32_t n)
{
    return cudaMemcpyAsync(e->head.noise + (size_t)first * b->plan_noise_stride,
                           b->plan_noise + (size_t)first * b->plan_noise_stride,
                           sizeof(float) * n * b->plan_noise_stride, cudaMemcpyHostToDevice, e->stream);
}

static cudaError_t copy_plan_run(vh_executor *e, const vh_batch *b, uint32_t first, uint32_t n)
{
    return cudaMemcpyAsync(b->out_plan + (size_t)first * b->plan_out_stride,
                           e->head.plan + (size_t)first * b->plan_out_stride,
                           sizeof(float) * n * b->plan_out_stride, cudaMemcpyDeviceToHost, e->stream);
}

/* The planned segments' noise (VH_BATCH_PLAN_SEGMENTS: only theirs is read). The planners compute
 * every segment's rows in one batch all the same (a few small GEMMs): the others' noise is zeros
 * and their plans are never copied out. */
static cudaError_t upload_noise(vh_executor *e, const vh_batch *batch)
{
    if ((batch->options & VH_BATCH_PLAN_SEGMENTS)) {
        cudaError_t ce = cudaMemsetAsync(e->head.noise, 0, sizeof(float) * batch->n_segments * batch->plan_noise_stride,
                                         e->stream);
        if (ce != cudaSuccess) return ce;
    }
    return for_planned_runs(e, batch, upload_noise_run);
}

/* Enqueue the batch's pixels and row metadata (from the pinned mirrors) and the blocks. */
static vh_status enqueue(vh_executor *e, const vh_batch *batch, const cuda_block *blocks, uint32_t n_blocks,
                         int has_pixels, int has_rows, char *err, size_t err_size)
{
    cudaError_t ce;
    VHC_MARK(e, "batch upload", (int)batch->n_rows);
    if (has_pixels && (ce = cudaMemcpyAsync(e->vit.pixels, e->vit.pixels_host,
                                            sizeof(float) * batch->n_images * e->vit.pixel_floats,
                                            cudaMemcpyHostToDevice, e->stream)))
        return cuda_fail(err, err_size, ce, "uploading the pixels");
    if (has_rows &&
        ((ce = cudaMemcpyAsync(e->llm.rows, e->llm.rows_host, sizeof(vhc_row) * batch->n_rows, cudaMemcpyHostToDevice,
                               e->stream)) ||
         (ce = cudaMemcpyAsync(e->llm.last_rows, e->llm.last_rows_host, sizeof(int32_t) * batch->n_segments,
                               cudaMemcpyHostToDevice, e->stream)) ||
         (e->llm.n_tiles && (ce = cudaMemcpyAsync(e->llm.tiles, e->llm.tiles_host,
                                                  sizeof(vhc_attention_tile) * e->llm.n_tiles,
                                                  cudaMemcpyHostToDevice, e->stream)))))
        return cuda_fail(err, err_size, ce, "uploading the batch");
    /* the segments' own image rows, the hidden rows asked for, the planners' noise */
    const size_t Dl = e->model->llm.hidden;
    for (uint32_t i = 0; has_rows && i < e->head.n_embeds; i++)
        if ((ce = cudaMemcpyAsync(e->proj.patch_embeds + (size_t)e->head.embed_slot[i] * e->model->n_image_tokens * Dl,
                                  e->head.embed_src[i],
                                  sizeof(float) * e->head.embed_rows[i] * Dl, cudaMemcpyHostToDevice, e->stream)))
            return cuda_fail(err, err_size, ce, "uploading the segments' embeddings");
    if ((batch->options & VH_BATCH_HIDDEN_ROWS) && e->head.rows &&
        (ce = cudaMemcpyAsync(e->head.rows, e->head.rows_host, sizeof(int32_t) * batch->n_hidden_rows,
                              cudaMemcpyHostToDevice, e->stream)))
        return cuda_fail(err, err_size, ce, "uploading the hidden rows");
    if ((batch->options & VH_BATCH_PLAN) && e->head.noise && (ce = upload_noise(e, batch)))
        return cuda_fail(err, err_size, ce, "uploading the planners' noise");
    vh_status st = VH_OK;
    for (uint32_t i = 0; i < n_blocks && st == VH_OK; i++) {
        const cuda_block *b = &blocks[i];
        st = b->kind->run(e, b, batch, err, err_size);
    }
    VHC_MARK(e, "copies out", 0);
    return st;
}

/* A one-row decode step, or a vision batch, over these blocks: the first time it runs eagerly (its
 * GEMMs are timed then, cuda_gemm.c, which a capture cannot do), the second time it is captured,
 * later ones replay the graph. Everything that changes between replays is in the pinned mirrors
 * the graph's first copies read (pixels; token, positions, KV offsets). A few graphs are kept,
 * keyed by block range and image count (the least recently used is replaced). Returns VH_OK with
 * *launched = 0 when the caller is to enqueue the work itself. */
static vh_status run_graph(vh_executor *e, const vh_batch *batch, const cuda_block *blocks, uint32_t first_block,
                           uint32_t n_blocks, int has_pixels, int has_rows, int *launched, char *err, size_t err_size)
{
    *launched = 0;
    const uint32_t n_slots = sizeof e->graphs / sizeof e->graphs[0], n_images = has_pixels ? batch->n_images : 0;
    uint32_t slot = 0;
    int found = 0;
    for (uint32_t i = 0; i < n_slots && !found; i++) {
        found = e->graphs[i].seen && e->graphs[i].first_block == first_block && e->graphs[i].n_blocks == n_blocks &&
                e->graphs[i].n_images == n_images && e->graphs[i].x == e->llm.x;
        if (found || e->graphs[i].last_use < e->graphs[slot].last_use) slot = i;
    }
    if (!found) { /* first sight: run eagerly, remember the key */
        if (e->graphs[slot].exec) cudaGraphExecDestroy(e->graphs[slot].exec);
        e->graphs[slot].exec = NULL;
        e->graphs[slot].first_block = first_block;
        e->graphs[slot].n_blocks = n_blocks;
        e->graphs[slot].n_images = n_images;
        e->graphs[slot].x = e->llm.x;
        e->graphs[slot].seen = 1;
        e->graphs[slot].last_use = ++e->graph_clock;
        return VH_OK;
    }
    if (!e->graphs[slot].exec) {
        cudaGraph_t graph = NULL;
        if (cudaStreamBeginCapture(e->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
            e->graphs_enabled = 0;
            cudaGetLastError();
            return VH_OK;
        }
        vh_status st = enqueue(e, batch, blocks, n_blocks, has_pixels, has_rows, err, err_size);
        cudaError_t ce = cudaStreamEndCapture(e->stream, &graph);
        if (st == VH_OK && ce == cudaSuccess) ce = cudaGraphInstantiate(&e->graphs[slot].exec, graph, 0);
        if (graph) cudaGraphDestroy(graph);
        if (st != VH_OK || ce != cudaSuccess) { /* run without graphs from now on */
            e->graphs[slot].exec = NULL;
            e->graphs_enabled = 0;
            cudaGetLastError();
            return VH_OK;
        }
    }
    e->graphs[slot].last_use = ++e->graph_clock;
    cudaError_t ce = cudaGraphLaunch(e->graphs[slot].exec, e->stream);
    if (ce != cudaSuccess) return cuda_fail(err, err_size, ce, "launching a graph");
    *launched = 1;
    return VH_OK;
}

/* Gather the batch's image planes (each image, each tower) into the pinned mirror. */
static void stage_pixels(vh_executor *e, const vh_batch *batch)
{
    const vh_model_desc *m = e->model;
    for (uint32_t i = 0; i < batch->n_images; i++)
        for (uint32_t t = 0; t < m->n_towers; t++)
            memcpy(e->vit.pixels_host + i * e->vit.pixel_floats + e->vit.tower_pixels[t],
                   batch->pixels[(size_t)i * m->n_towers + t],
                   sizeof(float) * 3 * m->towers[t].image_size * m->towers[t].image_size);
}

static vh_status run_blocks(vh_executor *e, const vh_batch *batch, uint32_t first_block, uint32_t n_blocks,
                            int bound, char *err, size_t err_size)
{
    const vh_executor_params *p = &e->params;
    if (!batch || n_blocks == 0 || first_block < p->first_block || first_block - p->first_block > p->n_blocks ||
        n_blocks > p->n_blocks - (first_block - p->first_block))
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: blocks [%u, %u) are not all in this executor's "
                    "[%u, %u)", first_block, first_block + n_blocks, p->first_block, p->first_block + p->n_blocks);
    if (!vh_batch_options_check("cuda", CUDA_BATCH_OPTIONS, batch, err, err_size)) return VH_ERR_UNSUPPORTED;
    char why[160];
    if (!vh_batch_segment_arrays_valid(batch, why, sizeof why))
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: %s", why);
    const cuda_block *blocks = &e->blocks[first_block - p->first_block];
    for (uint32_t i = 0; i < n_blocks && (batch->options & VH_BATCH_SEGMENT_ADAPTERS); i++)
        for (uint32_t s = 0; blocks[i].desc->kind == VH_BLOCK_LLM && s < batch->n_segments; s++) {
            /* set 0 is always there (a block without adapters runs its base weights, as without
             * the option); set 1 must be held: the base instead of the second expert would be wrong */
            const uint32_t set = batch->segment_adapters[s];
            if (set != 0 && !(blocks[i].lora_sets >> set & 1u))
                return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: segment %u asks for LoRA set %u, "
                                       "which LLM layer %u (block %u) does not hold", s, set, blocks[i].layer,
                                       first_block + i);
        }
    cudaSetDevice(e->device);
    const cuda_block *head = NULL;
    int needs_images = 0, needs_pixels = 0, needs_rows = 0, has_head = 0, has_planner = 0;
    for (uint32_t i = 0; i < n_blocks; i++) {
        const cuda_kind *k = blocks[i].kind;
        needs_images |= k->uses_images;
        needs_pixels |= k->uses_pixels;
        needs_rows |= k->uses_rows;
        has_head |= k->is_head;
        if (k->is_head) head = &blocks[i];
        if (!k->is_planner) continue;
        /* a planner reads this run's hidden rows: the head runs in the same call */
        has_planner = 1;
        if (!has_head || !vh_planner_batch_valid(&blocks[i].plan, batch) ||
            batch->plan_noise_stride > CUDA_PLAN_STRIDE_MAX || batch->plan_out_stride > CUDA_PLAN_STRIDE_MAX)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: a planner block needs the head in the "
                                   "same run, the batch's plan noise and outputs (VH_BATCH_PLAN, strides that hold "
                                   "them, at most %d) and each segment's feature among its hidden rows",
                                   CUDA_PLAN_STRIDE_MAX);
    }
    const int hidden_rows = has_head && (batch->options & VH_BATCH_HIDDEN_ROWS);
    if (needs_images) {
        if (batch->n_images == 0 || batch->n_images > (p->max_images ? p->max_images : 1) || !batch->pixels)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: batch has %u images (max %u)", batch->n_images,
                        p->max_images);
        for (uint32_t i = 0; i < batch->n_images * e->model->n_towers; i++)
            if (!batch->pixels[i]) return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: pixels[%u] is NULL", i);
    }
    if (has_head && !batch->out_tokens && !hidden_rows)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: the head needs out_tokens or hidden rows");
    if (has_head && batch->out_tokens && !head->t[VH_LLM_HEAD_LM].data)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: tokens asked of a head without an LM "
                               "weight");
    if (hidden_rows) {
        if (batch->n_hidden_rows > e->head.max_hidden || !vh_batch_hidden_rows_valid(batch))
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: %u hidden rows asked of a batch of %u "
                                   "rows (at most %u, each inside the batch)", batch->n_hidden_rows, batch->n_rows,
                                   CUDA_HIDDEN_ROWS_PER_SEGMENT * e->max_segments);
    }
    vh_status st;
    if (needs_rows && (st = validate_and_stage_rows(e, batch, err, err_size))) return st;

    vhc_profile_run_begin(e->profile);
    if (needs_pixels) stage_pixels(e, batch);
    int launched = 0;
    const int decode_step = needs_rows && !needs_images && batch->n_rows == 1 && batch->n_segments == 1;
    const int vision_batch = needs_images && !needs_rows;
    /* (no options: every segment runs LoRA set 0, the one a graph captured) */
    if (e->graphs_enabled && !batch->options && (decode_step || vision_batch) &&
        (st = run_graph(e, batch, blocks, first_block, n_blocks, needs_pixels, needs_rows, &launched, err, err_size)))
        return st;
    if (!launched && (st = enqueue(e, batch, blocks, n_blocks, needs_pixels, needs_rows, err, err_size))) return st;
    cudaError_t ce = cudaGetLastError();
    /* bound rows are the caller's already: nothing to hand out */
    const int hand_out = needs_rows && !has_head && batch->n_rows <= HIDDEN_OUT_ROWS && !bound;
    e->x_out_rows = 0;
    if (ce == cudaSuccess && hand_out)
        ce = cudaMemcpyAsync(e->llm.x_out_host, e->llm.x, sizeof(float) * batch->n_rows * e->model->llm.hidden,
                             cudaMemcpyDeviceToHost, e->stream);
    if (ce == cudaSuccess && hidden_rows)
        ce = cudaMemcpyAsync(batch->out_hidden, e->head.hidden, sizeof(float) * batch->n_hidden_rows * e->model->llm.hidden,
                             cudaMemcpyDeviceToHost, e->stream);
    if (ce == cudaSuccess && has_planner) ce = for_planned_runs(e, batch, copy_plan_run);
    if (ce == cudaSuccess && has_head && batch->out_tokens) {
        ce = cudaMemcpyAsync(e->llm.tokens_host, e->llm.tokens, sizeof(int32_t) * batch->n_segments,
                             cudaMemcpyDeviceToHost, e->stream);
        if (ce == cudaSuccess && batch->out_logits)
            ce = cudaMemcpyAsync(batch->out_logits, e->llm.logits, sizeof(float) * batch->n_segments * e->model->llm.vocab,
                                 cudaMemcpyDeviceToHost, e->stream);
    }
    vhc_profile_run_close(e->profile, e->stream);
    if (ce == cudaSuccess) ce = wait_stream(e);
    if (ce != cudaSuccess) return cuda_fail(err, err_size, ce, "running the blocks");
    vhc_profile_run_end(e->profile);
    if (has_head && batch->out_tokens) memcpy(batch->out_tokens, e->llm.tokens_host, sizeof(int32_t) * batch->n_segments);
    if (needs_rows) e->last_rows_count = batch->n_rows;
    if (hand_out) e->x_out_rows = batch->n_rows;
    return VH_OK;
}

/* A run works on its own llm.x, or, after bind_hidden, on the core's mapped rows (for that run
 * only: the binding is used up whatever the outcome). */
vh_status cuda_executor_run(vh_executor *e, const vh_batch *batch, uint32_t first_block, uint32_t n_blocks,
                            char *err, size_t err_size)
{
    float *own_x = e->llm.x, *bound_x = e->bound_x;
    e->bound_x = NULL;
    if (bound_x && batch && batch->n_rows > e->bound_rows)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: a batch of %u rows, %u rows bound",
                               batch->n_rows, e->bound_rows);
    if (bound_x) e->llm.x = bound_x;
    vh_status st = run_blocks(e, batch, first_block, n_blocks, bound_x != NULL, err, err_size);
    e->llm.x = own_x;
    return st;
}

vh_status cuda_bind_hidden(vh_executor *e, float *rows, uint32_t n_rows, char *err, size_t err_size)
{
    if (!e->llm.x || !rows || n_rows == 0 || n_rows > e->params.max_rows)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: bind_hidden of %u rows (max %u)", n_rows,
                               e->params.max_rows);
    cudaSetDevice(e->device);
    void *device_rows = NULL;
    cudaError_t ce = cudaHostGetDevicePointer(&device_rows, rows, 0);
    if (ce != cudaSuccess) {
        cudaGetLastError();
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: bind_hidden: the rows are not mapped host "
                               "memory from this plugin's host_alloc: %s", cudaGetErrorString(ce));
    }
    e->bound_x = device_rows;
    e->bound_rows = n_rows;
    e->x_out_rows = 0; /* the rows handed out by an earlier run are not this run's */
    return VH_OK;
}

vh_status cuda_read_hidden(vh_executor *e, float *dst, uint32_t n_rows, char *err, size_t err_size)
{
    if (!e->llm.x || !dst || n_rows == 0 || n_rows > e->params.max_rows)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: read_hidden of %u rows (max %u)", n_rows,
                    e->params.max_rows);
    if (n_rows <= e->x_out_rows) { /* already copied out by the run */
        memcpy(dst, e->llm.x_out_host, sizeof(float) * n_rows * e->model->llm.hidden);
        return VH_OK;
    }
    cudaSetDevice(e->device);
    cudaError_t ce = cudaMemcpyAsync(dst, e->llm.x, sizeof(float) * n_rows * e->model->llm.hidden,
                                     cudaMemcpyDeviceToHost, e->stream);
    if (ce == cudaSuccess) ce = wait_stream(e);
    return ce == cudaSuccess ? VH_OK : cuda_fail(err, err_size, ce, "read_hidden");
}

vh_status cuda_write_hidden(vh_executor *e, const float *src, uint32_t n_rows, char *err, size_t err_size)
{
    if (!e->llm.x || !src || n_rows == 0 || n_rows > e->params.max_rows)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: write_hidden of %u rows (max %u)", n_rows,
                    e->params.max_rows);
    cudaSetDevice(e->device);
    e->x_out_rows = 0;
    cudaError_t ce = cudaMemcpyAsync(e->llm.x, src, sizeof(float) * n_rows * e->model->llm.hidden,
                                     cudaMemcpyHostToDevice, e->stream);
    if (ce == cudaSuccess) ce = wait_stream(e);
    return ce == cudaSuccess ? VH_OK : cuda_fail(err, err_size, ce, "write_hidden");
}
