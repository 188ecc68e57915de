/*
 * The Llama-2 side of OpenVLA on the CPU, over a packed batch of segments (vh_batch): each row
 * sits at its own position of its own sequence's KV cache.
 *
 *   x  = embed(token) or the image's patch embedding
 *   x += o_proj(attention(rope(q_proj(rmsnorm(x))), rope(k_proj(..)), v_proj(..)))
 *   x += down_proj(silu(gate_proj(rmsnorm(x))) * up_proj(rmsnorm(x)))
 *   logits = lm_head(rmsnorm(x of each segment's last row)); token = argmax(logits)
 */
#include <math.h>
#include <string.h>

#include "cpu_executor.h"

static const vh_tensor_view *W(const cpu_block *b, int i) { return &b->desc->tensors[i]; }

/* The rows' RoPE positions, for every run that holds LLM blocks: a stage that starts after the
 * embedding (the hybrid split) gets its rows' hidden states from the previous stage, not their
 * positions. */
void cpu_llm_positions(vh_executor *e, const vh_batch *batch)
{
    uint32_t row = 0;
    for (uint32_t s = 0; s < batch->n_segments; s++) {
        const vh_segment *seg = &batch->segments[s];
        for (uint32_t r = 0; r < seg->n_rows; r++, row++)
            e->llm.positions[row] = (int32_t)(seg->position + r) + seg->rope_delta;
    }
}

void cpu_llm_embed(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const int64_t Dl = e->model->llm.hidden, N = e->model->n_image_tokens;
    uint32_t row = 0;
    for (uint32_t s = 0; s < batch->n_segments; s++) {
        const vh_segment *seg = &batch->segments[s];
        const float *patches = seg->image >= 0 ? e->patch_embeds + (size_t)seg->image * N * Dl : NULL;
        uint32_t next_patch = 0;
        for (uint32_t r = 0; r < seg->n_rows; r++, row++) {
            float *x = e->llm.x + (size_t)row * Dl;
            int32_t tok = batch->tokens[row];
            if (tok == VH_TOKEN_IMAGE)
                memcpy(x, patches + (size_t)next_patch++ * Dl, sizeof(float) * Dl);
            else
                vhk_embed_rows(W(b, VH_LLM_EMBED_TOKENS), &tok, 1, x);
        }
    }
}

/* K/V cache of held layer `slot` for `sequence`: [max_context, Hkv hd]. */
static float *cache_at(const vh_executor *e, float *cache, uint32_t slot, uint32_t sequence)
{
    const vh_llm_desc *l = &e->model->llm;
    size_t kv_dim = (size_t)l->n_kv_heads * l->head_dim;
    size_t per_sequence = (size_t)e->params.max_context * kv_dim;
    return cache + ((size_t)slot * e->params.max_sequences + sequence) * per_sequence;
}

void cpu_llm_block(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const vh_llm_desc *l = &e->model->llm;
    llm_scratch *s = &e->llm;
    const int64_t R = batch->n_rows, Dl = l->hidden, F = l->intermediate;
    const int64_t q_dim = (int64_t)l->n_heads * l->head_dim, kv_dim = (int64_t)l->n_kv_heads * l->head_dim;
    const uint32_t slot = b->desc->layer - e->first_llm_layer;

    /* attention */
    vhk_rmsnorm(e->pool, s->x, s->norm, R, Dl, b->vec[VH_LLM_ATTN_NORM], l->rms_eps);
    cpu_linear(e, b, VH_LLM_Q, s->norm, Dl, R, NULL, s->q, q_dim);
    cpu_linear(e, b, VH_LLM_K, s->norm, Dl, R, NULL, s->k, kv_dim);
    cpu_linear(e, b, VH_LLM_V, s->norm, Dl, R, NULL, s->v, kv_dim);
    vhk_rope(e->pool, s->q, q_dim, R, l->n_heads, l->head_dim, s->positions, l->rope_theta);
    vhk_rope(e->pool, s->k, kv_dim, R, l->n_kv_heads, l->head_dim, s->positions, l->rope_theta);

    uint32_t row = 0;
    for (uint32_t g = 0; g < batch->n_segments; g++) {
        const vh_segment *seg = &batch->segments[g];
        float *k_cache = cache_at(e, e->k_cache, slot, seg->sequence);
        float *v_cache = cache_at(e, e->v_cache, slot, seg->sequence);
        memcpy(k_cache + (size_t)seg->position * kv_dim, s->k + (size_t)row * kv_dim, sizeof(float) * seg->n_rows * kv_dim);
        memcpy(v_cache + (size_t)seg->position * kv_dim, s->v + (size_t)row * kv_dim, sizeof(float) * seg->n_rows * kv_dim);
        vhk_attention_args a = {
            .q = s->q + (size_t)row * q_dim, .q_stride = q_dim, .k = k_cache, .v = v_cache,
            .kv_stride = kv_dim, .out = s->attn + (size_t)row * q_dim, .out_stride = q_dim,
            .n_rows = seg->n_rows, .n_kv = seg->position + seg->n_rows, .n_heads = l->n_heads,
            .n_kv_heads = l->n_kv_heads, .head_dim = l->head_dim, .first_position = seg->position,
            .causal = 1, .scale = (float)(1.0 / sqrt((double)l->head_dim)),
        };
        vhk_attention(e->pool, &a);
        row += seg->n_rows;
    }
    cpu_linear(e, b, VH_LLM_O, s->attn, q_dim, R, NULL, s->norm, Dl);
    vhk_add(e->pool, s->x, s->norm, R * Dl);

    /* MLP */
    vhk_rmsnorm(e->pool, s->x, s->norm, R, Dl, b->vec[VH_LLM_MLP_NORM], l->rms_eps);
    cpu_linear(e, b, VH_LLM_GATE, s->norm, Dl, R, NULL, s->gate, F);
    cpu_linear(e, b, VH_LLM_UP, s->norm, Dl, R, NULL, s->up, F);
    vhk_silu_mul(e->pool, s->gate, s->up, s->gate, R * F);
    cpu_linear(e, b, VH_LLM_DOWN, s->gate, F, R, NULL, s->norm, Dl);
    vhk_add(e->pool, s->x, s->norm, R * Dl);
}

/* Only each segment's last row needs logits: that is the next token of its request. */
void cpu_llm_head(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const vh_llm_desc *l = &e->model->llm;
    llm_scratch *s = &e->llm;
    const int64_t Dl = l->hidden, V = l->vocab, S = batch->n_segments;
    uint32_t row = 0;
    for (uint32_t g = 0; g < batch->n_segments; g++) {
        row += batch->segments[g].n_rows;
        memcpy(s->head_in + (size_t)g * Dl, s->x + (size_t)(row - 1) * Dl, sizeof(float) * Dl);
    }
    vhk_rmsnorm(e->pool, s->head_in, s->head_in, S, Dl, b->vec[VH_LLM_HEAD_NORM], l->rms_eps);
    cpu_linear(e, b, VH_LLM_HEAD_LM, s->head_in, Dl, S, NULL, s->logits, V);
    for (uint32_t g = 0; g < batch->n_segments; g++) {
        const float *logits = s->logits + (size_t)g * V;
        batch->out_tokens[g] = vhk_argmax(logits, V);
        if (batch->out_logits) memcpy(batch->out_logits + (size_t)g * V, logits, sizeof(float) * V);
    }
}
