/*
 * A decoder layer on the CPU (VH_BLOCK_TRANSFORMER: pre-norm RMSNorm, causal attention over the
 * KV cache with half-rotation RoPE, SiLU-gated MLP, optional q/k/v biases, LoRA kept apart; Llama's
 * and Qwen2's blocks are instances) over a packed batch of segments (vh_batch), each row at its own
 * position of its own sequence's KV cache (the block's state):
 *
 *   x += o_proj(attention(rope(q_proj(rmsnorm(x))), rope(k_proj(..)), v_proj(..)))
 *        (each of q/k/v/o_proj with its LoRA adapter added when the block keeps one apart, of the
 *        set each segment names (VH_BATCH_SEGMENT_ADAPTERS); q/k/v with their biases when it has them)
 *   x += down_proj(silu(gate_proj(rmsnorm(x))) * up_proj(rmsnorm(x)))
 */
#include <math.h>
#include <string.h>

#include "cpu_executor.h"

/* K/V cache of held layer `slot` for `sequence`: [max_context, Hkv hd]. */
static float *cache_at(const vh_executor *e, float *cache, uint32_t slot, uint32_t sequence)
{
    const vh_llm_desc *l = &e->model->llm;
    size_t kv_dim = (size_t)l->n_kv_heads * l->head_dim;
    size_t per_sequence = (size_t)e->params.max_context * kv_dim;
    return cache + ((size_t)slot * e->params.max_sequences + sequence) * per_sequence;
}

/* One LoRA adapter kept apart (roles a_role, a_role + 1) on rows [0, R) of x, as peft's forward:
 * y += scale * B (A x). */
static void lora_rows(vh_executor *e, const cpu_block *b, uint32_t a_role, const float *x, int64_t in, int64_t R,
                      float *y, int64_t out)
{
    const int64_t r = b->t[a_role].shape[0];
    llm_scratch *s = &e->llm;
    cpu_linear(e, b, (int)a_role, x, in, R, NULL, s->lora_a, r);
    cpu_linear(e, b, (int)a_role + 1, s->lora_a, r, R, NULL, s->lora_b, out);
    if (e->failed) return;
    for (int64_t i = 0; i < R; i++)
        for (int64_t c = 0; c < out; c++) y[i * out + c] += s->lora_b[i * out + c] * b->info.lora_scale;
}

/* Projection `proj` (0 q, 1 k, 2 v, 3 o)'s LoRA delta for every row, each segment's rows with its
 * own set (VH_BATCH_SEGMENT_ADAPTERS): contiguous segments of one set are one call. A set the block
 * does not hold for this projection adds nothing (executor_run refused sets it holds not at all). */
static void lora(vh_executor *e, const cpu_block *b, const vh_batch *batch, uint32_t proj, const float *x, int64_t in,
                 float *y, int64_t out)
{
    if (!b->lora_sets) return;
    for (uint32_t g = 0, row = 0, set, n; vh_batch_adapter_run(batch, &g, &set, &n); row += n) {
        const uint32_t a = vh_tf_lora_role(set, proj);
        if (b->t[a].data) lora_rows(e, b, a, x + (size_t)row * in, in, n, y + (size_t)row * out, out);
    }
}

typedef struct kv_write_job {
    float *k_cache, *v_cache;          /* the segment's first new position */
    const float *k, *v;                /* its first row */
    int64_t kv_stride, kv_dim;
} kv_write_job;

static void write_kv_rows(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const kv_write_job *j = ctx;
    for (int64_t r = begin; r < end; r++) {
        memcpy(j->k_cache + r * j->kv_dim, j->k + r * j->kv_stride, sizeof(float) * (size_t)j->kv_dim);
        memcpy(j->v_cache + r * j->kv_dim, j->v + r * j->kv_stride, sizeof(float) * (size_t)j->kv_dim);
    }
}

/* Each segment's new keys and values (rows kv_stride floats apart) into its sequence's cache, then
 * its rows' causal attention (queries q_stride apart) over the cache into s->attn. */
static void attend(vh_executor *e, const cpu_block *b, const vh_batch *batch, const float *q, int64_t q_stride,
                   const float *k, const float *v, int64_t kv_stride)
{
    const vh_llm_desc *l = &e->model->llm;
    llm_scratch *s = &e->llm;
    const int64_t q_dim = (int64_t)l->n_heads * l->head_dim, kv_dim = (int64_t)l->n_kv_heads * l->head_dim;
    const uint32_t slot = b->state - e->first_state; /* this executor's first KV cache is state first_state */
    uint32_t row = 0;
    for (uint32_t g = 0; g < batch->n_segments; g++) {
        const vh_segment *seg = &batch->segments[g];
        float *k_cache = cache_at(e, e->k_cache, slot, seg->sequence);
        float *v_cache = cache_at(e, e->v_cache, slot, seg->sequence);
        kv_write_job w = {k_cache + (size_t)seg->position * kv_dim, v_cache + (size_t)seg->position * kv_dim,
                          k + (size_t)row * kv_stride, v + (size_t)row * kv_stride, kv_stride, kv_dim};
        vh_parallel_for(e->pool, seg->n_rows, 16, write_kv_rows, &w); /* a prefill's: megabytes */
        cpu_profile_mark(&e->profile, CPU_PROF_ROPE); /* (the KV write counts with the rope) */
        vhk_attention_args a = {
            .q = q + (size_t)row * q_stride, .q_stride = q_stride, .k = k_cache, .v = v_cache,
            .kv_stride = kv_dim, .out = s->attn + (size_t)row * q_dim, .out_stride = q_dim,
            .n_rows = seg->n_rows, .n_kv = seg->position + seg->n_rows, .n_heads = l->n_heads,
            .n_kv_heads = l->n_kv_heads, .head_dim = l->head_dim, .first_position = seg->position,
            .causal = 1, .scale = (float)(1.0 / sqrt((double)l->head_dim)),
        };
        if (!e->ops->attention || !e->ops->attention(e->linear, &a)) vhk_attention(e->pool, &a);
        cpu_profile_mark(&e->profile, CPU_PROF_ATTENTION);
        row += seg->n_rows;
    }
}

/* The block with q|k|v and gate|up fused (cpu_block.fused_*): four GEMMs, each norm in the GEMM's
 * input conversion, each residual added and the SiLU gate applied in the GEMM's epilogue. */
static void llm_block_fused(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const vh_llm_desc *l = &e->model->llm;
    llm_scratch *s = &e->llm;
    const int64_t R = batch->n_rows, Dl = l->hidden, F = l->intermediate;
    const int64_t q_dim = (int64_t)l->n_heads * l->head_dim, kv_dim = (int64_t)l->n_kv_heads * l->head_dim;
    const int64_t width = q_dim + 2 * kv_dim;
    cpu_profile *prof = &e->profile;

    cpu_profile_begin(prof, (uint64_t)R);
    cpu_linear_fused(e, &(cpu_linear_call){.x = s->x, .x_stride = Dl, .rows = R, .in = Dl,
                                           .rms_weight = b->vec[VH_TF_ATTN_NORM_W], .rms_eps = b->info.norm_eps,
                                           .prepared = b->fused_qkv, .bias = b->qkv_bias,
                                           .epilogue = CPU_EPILOGUE_STORE, .y = s->qkv, .y_stride = width});
    cpu_profile_mark(prof, CPU_PROF_QKV);
    vhk_rope(e->pool, s->qkv, width, R, l->n_heads, l->head_dim, s->positions, b->info.rope_theta);
    vhk_rope(e->pool, s->qkv + q_dim, width, R, l->n_kv_heads, l->head_dim, s->positions, b->info.rope_theta);
    cpu_profile_mark(prof, CPU_PROF_ROPE);
    attend(e, b, batch, s->qkv, width, s->qkv + q_dim, s->qkv + q_dim + kv_dim, width); /* (marks its own) */
    cpu_linear_fused(e, &(cpu_linear_call){.x = s->attn, .x_stride = q_dim, .rows = R, .in = q_dim,
                                           .prepared = b->prepared[VH_TF_O_W], .epilogue = CPU_EPILOGUE_ADD,
                                           .y = s->x, .y_stride = Dl});
    cpu_profile_mark(prof, CPU_PROF_O);
    cpu_linear_fused(e, &(cpu_linear_call){.x = s->x, .x_stride = Dl, .rows = R, .in = Dl,
                                           .rms_weight = b->vec[VH_TF_MLP_NORM_W], .rms_eps = b->info.norm_eps,
                                           .prepared = b->fused_gate_up, .epilogue = CPU_EPILOGUE_SILU_MUL,
                                           .y = s->gate, .y_stride = F});
    cpu_profile_mark(prof, CPU_PROF_GATE_UP);
    cpu_linear_fused(e, &(cpu_linear_call){.x = s->gate, .x_stride = F, .rows = R, .in = F,
                                           .prepared = b->prepared[VH_TF_DOWN_W], .epilogue = CPU_EPILOGUE_ADD,
                                           .y = s->x, .y_stride = Dl});
    cpu_profile_mark(prof, CPU_PROF_DOWN);
}

void cpu_llm_block(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    if (b->fused_qkv) {
        llm_block_fused(e, b, batch);
        return;
    }
    const vh_llm_desc *l = &e->model->llm;
    llm_scratch *s = &e->llm;
    const int64_t R = batch->n_rows, Dl = l->hidden, F = l->intermediate;
    const int64_t q_dim = (int64_t)l->n_heads * l->head_dim, kv_dim = (int64_t)l->n_kv_heads * l->head_dim;
    cpu_profile *prof = &e->profile; /* (the profile's rows name the fused path's steps: norms count with them) */

    /* attention */
    cpu_profile_begin(prof, (uint64_t)R);
    vhk_rmsnorm(e->pool, s->x, s->norm, R, Dl, b->vec[VH_TF_ATTN_NORM_W], b->info.norm_eps);
    cpu_linear(e, b, VH_TF_Q_W, s->norm, Dl, R, b->vec[VH_TF_Q_B], s->q, q_dim);
    cpu_linear(e, b, VH_TF_K_W, s->norm, Dl, R, b->vec[VH_TF_K_B], s->k, kv_dim);
    cpu_linear(e, b, VH_TF_V_W, s->norm, Dl, R, b->vec[VH_TF_V_B], s->v, kv_dim);
    lora(e, b, batch, 0, s->norm, Dl, s->q, q_dim);
    lora(e, b, batch, 1, s->norm, Dl, s->k, kv_dim);
    lora(e, b, batch, 2, s->norm, Dl, s->v, kv_dim);
    cpu_profile_mark(prof, CPU_PROF_QKV);
    vhk_rope(e->pool, s->q, q_dim, R, l->n_heads, l->head_dim, s->positions, b->info.rope_theta);
    vhk_rope(e->pool, s->k, kv_dim, R, l->n_kv_heads, l->head_dim, s->positions, b->info.rope_theta);

    attend(e, b, batch, s->q, q_dim, s->k, s->v, kv_dim);
    cpu_linear(e, b, VH_TF_O_W, s->attn, q_dim, R, NULL, s->norm, Dl);
    lora(e, b, batch, 3, s->attn, q_dim, s->norm, Dl);
    vhk_add(e->pool, s->x, s->norm, R * Dl);
    cpu_profile_mark(prof, CPU_PROF_O);

    /* MLP */
    vhk_rmsnorm(e->pool, s->x, s->norm, R, Dl, b->vec[VH_TF_MLP_NORM_W], b->info.norm_eps);
    cpu_linear(e, b, VH_TF_GATE_W, s->norm, Dl, R, NULL, s->gate, F);
    cpu_linear(e, b, VH_TF_UP_W, s->norm, Dl, R, NULL, s->up, F);
    vhk_silu_mul(e->pool, s->gate, s->up, s->gate, R * F);
    cpu_profile_mark(prof, CPU_PROF_GATE_UP);
    cpu_linear(e, b, VH_TF_DOWN_W, s->gate, F, R, NULL, s->norm, Dl);
    vhk_add(e->pool, s->x, s->norm, R * Dl);
    cpu_profile_mark(prof, CPU_PROF_DOWN);
}

