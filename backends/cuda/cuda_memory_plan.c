/*
 * Sizing and carving the executor's device memory: the same walk runs twice, first with empty
 * arenas to count the bytes (checked against the memory budget and the device's free memory),
 * then on the allocated arenas to carve them.
 */
#include "cuda_memory_plan.h"

#include "backend_error.h"
#include "backend_knobs.h"
#include "cuda_llm_pack.h"
#include "cuda_shared_memory.h"
#include "cuda_upload.h"

#include <stdlib.h>

#define ARENA_ALIGN 256

static size_t align_up(size_t n) { return (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1); }

void *cuda_arena_take(cuda_arena *a, size_t n)
{
    void *p = a->base ? a->base + a->used : NULL;
    a->used += align_up(n ? n : 1);
    return p;
}

void cuda_memory_plan_weights(vh_executor *e, cuda_arena *a)
{
    const vh_model_desc *m = e->model;
    for (uint32_t i = 0; i < e->params.n_blocks; i++) {
        cuda_block *b = &e->blocks[i];
        for (uint32_t t = 0; t < CUDA_MAX_ROLES; t++) {
            const vh_tensor_view *v = &b->t[t];
            if (!v->data || cuda_is_packed_tensor(b, t)) continue;
            /* a tensor another block of this executor already holds (tied embeddings) */
            int shared = 0;
            for (uint32_t j = 0; j < i && !shared; j++)
                for (uint32_t k = 0; k < CUDA_MAX_ROLES && !shared; k++)
                    if (e->blocks[j].t[k].data == v->data && !cuda_is_fp32_tensor(b, t)) {
                        b->mat[t] = e->blocks[j].mat[k];
                        shared = 1;
                    }
            if (shared) continue;
            if (cuda_is_patch_weight(b, t))
                b->mat[t] = cuda_arena_take(a, (size_t)v->shape[0] * VHC_PATCH_LD(m->towers[b->info.tower].patch_size) * 2);
            else if (cuda_is_fp32_tensor(b, t)) b->vec[t] = cuda_arena_take(a, (size_t)cuda_n_elements(v) * 4);
            else b->mat[t] = cuda_arena_take(a, (size_t)cuda_n_elements(v) * 2);
        }
        if (b->kind->plan_packed) b->kind->plan_packed(e, b, a);
    }
}

static uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* The head's hidden rows and the planners' buffers (Orion's), when the executor holds them. */
static void plan_head(vh_executor *e, cuda_arena *a)
{
    const vh_executor_params *p = &e->params;
    const uint64_t S = e->max_segments, Dl = e->model->llm.hidden;
    int has_head = 0;
    uint64_t F = 0, G = 0, L = 0, T = 0, layers = 0, W = 0;
    for (uint32_t i = 0; i < p->n_blocks; i++) {
        const cuda_block *b = &e->blocks[i];
        has_head |= b->variant->is_head;
        if (!b->variant->is_planner) continue;
        const vh_planner_params *pp = &b->info.plan;
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
        h->rows = cuda_arena_take(a, (uint64_t)h->max_hidden * 4);
        h->hidden = cuda_arena_take(a, (uint64_t)h->max_hidden * Dl * 4);
        h->hidden_bf16 = cuda_arena_take(a, (uint64_t)h->max_hidden * Dl * 2);
    }
    if (!F) return;
    h->noise = cuda_arena_take(a, S * CUDA_PLAN_STRIDE_MAX * 4);
    h->plan = cuda_arena_take(a, S * CUDA_PLAN_STRIDE_MAX * 4);
    h->f = cuda_arena_take(a, S * F * 4);
    h->f_bf16 = cuda_arena_take(a, S * F * 2);
    h->t1 = cuda_arena_take(a, S * T * W * 4);
    h->t2 = cuda_arena_take(a, S * T * W * 4);
    h->b1 = cuda_arena_take(a, S * T * W * 2);
    h->b2 = cuda_arena_take(a, S * T * W * 2);
    h->gi = cuda_arena_take(a, S * 3 * G * 4);
    h->gh = cuda_arena_take(a, S * 3 * G * 4);
    h->h = cuda_arena_take(a, layers * S * G * 4);
    h->h_bf16 = cuda_arena_take(a, layers * S * G * 2);
    h->z = cuda_arena_take(a, S * L * 2);
    h->y = cuda_arena_take(a, S * T * G * 2);
}

void cuda_memory_plan_work(vh_executor *e, cuda_arena *a)
{
    const vh_model_desc *m = e->model;
    const vh_executor_params *p = &e->params;
    const vh_block_variant held = vh_block_variants_held(m, p->first_block, p->n_blocks);
    const int has_vit = held.in_tower, has_proj = held.projects, has_llm = held.uses_rows;
    const uint64_t images = p->max_images ? p->max_images : 1;
    if (has_vit) {
        uint64_t T = 0, D = 0, H = 0, PP3 = 0, NP = 0;
        for (uint32_t t = 0; t < m->n_towers; t++) {
            const vh_vit_desc *v = &m->towers[t];
            uint64_t tokens = (uint64_t)v->n_prefix + v->n_patches;
            e->vit.x[t] = cuda_arena_take(a, images * tokens * v->embed_dim * 4);
            T = max64(T, tokens);
            D = max64(D, v->embed_dim);
            H = max64(H, v->mlp_hidden);
            PP3 = max64(PP3, (uint64_t)VHC_PATCH_LD(v->patch_size));
            NP = max64(NP, v->n_patches);
        }
        /* a block runs its row-wise steps and GEMMs over all images' tokens at once; a layer with
         * windows holds q, k, v and the attention's output of the grid padded to whole windows, and
         * its SwiGLU gate | up side by side (cuda_rope_tower_layer.c) */
        const uint64_t IT = images * T;
        uint64_t QT = IT, GU = H, HB = H, rope_side = 0; /* rope_side: the longest window or grid side */
        if (held.rope_2d) { /* the MLP padded to a multiple of 8 (cuda_rope_tower_pack.c) */
            HB = (H + 7) / 8 * 8;
            GU = 2 * HB;
            for (uint32_t i = p->first_block; i < p->first_block + p->n_blocks; i++) {
                const vh_block_desc *d = &m->blocks[i];
                if (d->kind != VH_BLOCK_TRANSFORMER || d->params->struct_size < sizeof(vh_transformer_params)) continue;
                const vh_transformer_params *tp = (const vh_transformer_params *)d->params;
                if (tp->attention != VH_ATTN_WINDOWED || !tp->window || m->slots[d->inputs[0]].kind != VH_SLOT_KIND_TOKENS)
                    continue;
                const uint64_t g = m->towers[m->slots[d->inputs[0]].tower].grid, side = (g + tp->window - 1) / tp->window * tp->window;
                QT = max64(QT, images * side * side);
                rope_side = max64(rope_side, tp->window);
            }
        }
        e->vit.pixel_floats = 0;
        for (uint32_t t = 0; t < m->n_towers; t++) {
            e->vit.tower_pixels[t] = e->vit.pixel_floats;
            e->vit.pixel_floats += 3ull * m->towers[t].image_size * m->towers[t].image_size;
        }
        e->vit.pixels = cuda_arena_take(a, images * e->vit.pixel_floats * 4);
        vit_scratch *s = &e->vit.scratch;
        s->patches = cuda_arena_take(a, NP * PP3 * 2);
        s->xn = cuda_arena_take(a, IT * D * 2);
        s->qkv = cuda_arena_take(a, IT * 3 * D * 4);
        s->q = cuda_arena_take(a, QT * D * 2);
        s->k = cuda_arena_take(a, QT * D * 2);
        s->v = cuda_arena_take(a, QT * D * 2);
        s->attn = cuda_arena_take(a, QT * D * 2);
        s->tmp = cuda_arena_take(a, max64(IT, NP) * D * 4);
        s->mlp = cuda_arena_take(a, IT * GU * 4);
        s->mlp_bf16 = cuda_arena_take(a, IT * HB * 2);
        if (held.rope_2d) { /* a global layer's rotations run over the grid's side */
            for (uint32_t t = 0; t < m->n_towers; t++) rope_side = max64(rope_side, m->towers[t].grid);
            s->rope = cuda_arena_take(a, rope_side * (D / 4) * 2 * 4);
        }
    }
    if (has_proj || has_llm) e->proj.patch_embeds = cuda_arena_take(a, images * m->n_image_tokens * m->llm.hidden * 4);
    if (has_proj) { /* all images' rows at once */
        const uint64_t N = images * m->n_image_tokens;
        e->proj.in = cuda_arena_take(a, N * m->vision_dim * 2);
        e->proj.h1 = cuda_arena_take(a, N * m->projector_hidden * 4);
        e->proj.h1_bf16 = cuda_arena_take(a, N * m->projector_hidden * 2);
        e->proj.h2 = cuda_arena_take(a, N * m->llm.hidden * 4);
        e->proj.h2_bf16 = cuda_arena_take(a, N * m->llm.hidden * 2);
    }
    if (has_llm) {
        const vh_llm_desc *l = &m->llm;
        const uint64_t R = p->max_rows, S = e->max_segments, Dl = l->hidden;
        const uint64_t qkv_dim = (uint64_t)(l->n_heads + 2 * l->n_kv_heads) * l->head_dim;
        const uint64_t q_dim = (uint64_t)l->n_heads * l->head_dim;
        e->llm.x = cuda_arena_take(a, R * Dl * 4);
        e->llm.xn = cuda_arena_take(a, R * Dl * 2);
        e->llm.qkv = cuda_arena_take(a, R * qkv_dim * 4);
        e->llm.q = cuda_arena_take(a, R * q_dim * 2);
        e->llm.attn = cuda_arena_take(a, R * q_dim * 2);
        e->llm.gate_up = cuda_arena_take(a, R * 2 * l->intermediate * 4);
        e->llm.act = cuda_arena_take(a, R * l->intermediate * 2);
        e->llm.head_in = cuda_arena_take(a, S * Dl * 2);
        e->llm.logits = cuda_arena_take(a, S * l->vocab * 4);
        e->llm.tokens = cuda_arena_take(a, S * 4);
        e->llm.rows = cuda_arena_take(a, R * sizeof(vhc_row));
        e->llm.last_rows = cuda_arena_take(a, S * 4);
        e->llm.max_tiles = (uint32_t)(R / VHC_FLASH_TILE_ROWS + S);
        e->llm.tiles = cuda_arena_take(a, e->llm.max_tiles * sizeof(vhc_attention_tile));
        e->llm.rope_inv_freq = cuda_arena_take(a, (uint64_t)l->head_dim / 2 * 4);
        const uint64_t r8 = cuda_llm_pack_max_lora_ld(e);
        if (r8) {
            e->llm.lora_t = cuda_arena_take(a, R * r8 * 4);
            e->llm.lora_t_bf16 = cuda_arena_take(a, R * r8 * 2);
        }
    }
    plan_head(e, a);
    cuda_memory_plan_queries(e, a);
    if (has_llm && vh_knob_is(VH_KNOB_CUDA_KV_GATHER, "1")) {
        const uint64_t layer = (uint64_t)p->max_sequences * p->max_context * m->llm.n_kv_heads * m->llm.head_dim * 2;
        e->gather_k = cuda_arena_take(a, layer);
        e->gather_v = cuda_arena_take(a, layer);
    }
    cuda_arena_take(a, CUDA_GEMM_WORKSPACE_BYTES); /* the last piece: cuBLASLt's workspace */
}

void cuda_memory_plan_count(vh_executor *e, cuda_arena *weights, cuda_arena *work)
{
    cuda_memory_plan_weights(e, weights);
    cuda_memory_plan_work(e, work);
    const vh_llm_desc *l = &e->model->llm;
    e->cache_bytes = (size_t)e->n_layers_held * e->params.max_sequences * e->params.max_context *
                     l->n_kv_heads * l->head_dim * 2 * 2;
}

vh_status cuda_memory_plan_check(const vh_executor *e, uint64_t weight_bytes, uint64_t work_bytes, size_t free_bytes,
                                 char *err, size_t err_size)
{
    const vh_executor_params *params = &e->params;
    const uint64_t total = weight_bytes + work_bytes + e->cache_bytes;
    const char *free_what = vhc_device_integrated(e->device) ? "free system memory (integrated GPU)" : "free GPU memory";
    if ((params->memory_budget && total > params->memory_budget) || total > free_bytes)
        return vh_backend_fail(err, err_size, VH_ERR_DEVICE_OUT_OF_MEMORY,
                  "cuda: blocks %u..%u need %.3f GB (weights %.3f, KV cache %.3f, activations and workspace %.3f) "
                  "but %s is %.3f GB", params->first_block, params->first_block + params->n_blocks - 1, total / 1e9,
                  weight_bytes / 1e9, e->cache_bytes / 1e9, work_bytes / 1e9,
                  params->memory_budget && total > params->memory_budget ? "the memory budget" : free_what,
                  (params->memory_budget && total > params->memory_budget ? params->memory_budget : free_bytes) / 1e9);
    return VH_OK;
}

void *cuda_memory_plan_workspace(const vh_executor *e)
{
    return e->work.base + e->work.used - align_up(CUDA_GEMM_WORKSPACE_BYTES);
}

vh_status cuda_executor_plan_memory(const vh_executor_params *params, vh_memory_report *need, char *err,
                                    size_t err_size)
{
    vh_executor *e;
    vh_status st = cuda_executor_describe(params, &e, err, err_size);
    if (st) return st;
    cuda_arena w = {0}, x = {0};
    cuda_memory_plan_count(e, &w, &x);
    if (!need || need->struct_size < sizeof *need) {
        cuda_executor_free_host(e);
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: memory report of a size this plugin "
                               "does not know");
    }
    *need = (vh_memory_report){.struct_size = sizeof *need, .weight_bytes = w.used, .cache_bytes = e->cache_bytes,
                               .work_bytes = x.used};
    cuda_executor_free_host(e);
    return VH_OK;
}
