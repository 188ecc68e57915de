/*
 * A decoder layer on query sets on the CPU (VH_BLOCK_TRANSFORMER, post-norm LayerNorm, no RoPE;
 * DETR's, PETR's and StreamPETR's decoder layers are instances), per frame:
 *
 *   self-attention (VH_ATTN_FULL): keys and values are the rows, then the extra key rows
 *   (VH_TF_EXTRA_KEYS), so  kv = [x; extra], kv_pos = [pos; extra_pos]
 *   cross-attention (VH_ATTN_CROSS): kv = the key rows, kv_pos = theirs
 *
 *   x = norm1(x + o(attention(q(x + pos), k(kv + kv_pos), v(kv))))
 *   x = norm2(x + down(relu(up(x))))               (VH_MLP_RELU; none with VH_MLP_NONE)
 *
 * The positional terms (VH_TF_QK_POS) are added to queries and keys, never to values, as the released
 * MultiHeadAttentionwDropout does. With VH_TF_ATTN_MASK the rows at or past mask_prefix do not see
 * the first mask_prefix keys: those rows attend to keys [mask_prefix, n_keys) only, which is what a
 * boolean mask of True on the blocked keys gives (no row has every key blocked).
 */
#include <math.h>
#include <string.h>

#include "cpu_executor.h"

typedef vh_query_layer_shape query_layer_shape;

static query_layer_shape shape_of(const vh_executor *e, const cpu_block *b)
{
    return vh_query_layer_shape_of(e->model, b->desc, &b->info);
}

/* Scratch: q input and q [R, D] x 2, key input, k, v [K, D] x 3, attention out and projection
 * [R, D] x 2, the MLP's hidden [R, F]. */
uint64_t cpu_query_layer_scratch_floats(const vh_executor *e, const cpu_block *b)
{
    const query_layer_shape s = shape_of(e, b);
    return (uint64_t)(4 * s.R * s.D + 3 * s.K * s.D + s.R * s.F);
}

/* dst [n, D] = a + b (b NULL: a) */
static void add_rows(float *dst, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = b ? a[i] + b[i] : a[i];
}

static void attend(vh_thread_pool *pool, const query_layer_shape *s, const float *q, const float *k, const float *v,
                   float *out, int64_t first_row, int64_t n_rows, int64_t first_key)
{
    if (n_rows <= 0) return;
    const int64_t hd = s->D / s->heads;
    vhk_attention_args a = {
        .q = q + first_row * s->D, .q_stride = s->D, .k = k + first_key * s->D, .v = v + first_key * s->D,
        .kv_stride = s->D, .out = out + first_row * s->D, .out_stride = s->D, .n_rows = n_rows,
        .n_kv = s->K - first_key, .n_heads = s->heads, .n_kv_heads = s->heads, .head_dim = hd,
        .first_position = 0, .causal = 0, .scale = (float)(1.0 / sqrt((double)hd)),
    };
    vhk_attention(pool, &a);
}

void cpu_query_layer(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const query_layer_shape s = shape_of(e, b);
    const vh_block_desc *d = b->desc;
    const int64_t R = s.R, K = s.K, D = s.D;
    float *qin = b->scratch, *q = qin + R * D, *kin = q + R * D, *k = kin + K * D, *v = k + K * D;
    float *att = v + K * D, *proj = att + R * D, *hidden = proj + R * D;
    const uint32_t key_slot = s.cross || s.extra ? d->inputs[1 + s.pos] : 0;

    for (uint32_t f = 0; f < batch->n_frames; f++) {
        float *x = cpu_query_rows(e, d->output, f);
        if (d->output != d->inputs[0]) memcpy(x, cpu_query_rows(e, d->inputs[0], f), sizeof(float) * (size_t)(R * D));
        const float *pos = s.pos ? cpu_query_rows(e, d->inputs[1], f) : NULL;
        /* the values' rows (kv), and the keys' with their positions (kin) */
        float *kv = v; /* staged in v, projected in place below through att */
        if (s.cross) {
            const float *keys = cpu_query_rows(e, key_slot, f);
            memcpy(kv, keys, sizeof(float) * (size_t)(K * D));
            add_rows(kin, keys, s.pos ? cpu_query_rows(e, d->inputs[3], f) : NULL, K * D);
        } else {
            memcpy(kv, x, sizeof(float) * (size_t)(R * D));
            add_rows(kin, x, pos, R * D);
            if (s.extra) {
                const float *extra = cpu_query_rows(e, key_slot, f);
                memcpy(kv + R * D, extra, sizeof(float) * (size_t)((K - R) * D));
                add_rows(kin + R * D, extra, s.pos ? cpu_query_rows(e, d->inputs[3], f) : NULL, (K - R) * D);
            }
        }
        add_rows(qin, x, pos, R * D);
        cpu_linear(e, b, VH_TF_Q_W, qin, D, R, b->vec[VH_TF_Q_B], q, D);
        cpu_linear(e, b, VH_TF_K_W, kin, D, K, b->vec[VH_TF_K_B], k, D);
        cpu_linear(e, b, VH_TF_V_W, kv, D, K, b->vec[VH_TF_V_B], kin, D); /* kin is free: v there */
        const float *vv = kin;
        const int64_t prefix = b->info.mask_prefix;
        if (prefix) {
            attend(e->pool, &s, q, k, vv, att, 0, prefix, 0);
            attend(e->pool, &s, q, k, vv, att, prefix, R - prefix, prefix);
        } else {
            attend(e->pool, &s, q, k, vv, att, 0, R, 0);
        }
        cpu_linear(e, b, VH_TF_O_W, att, D, R, b->vec[VH_TF_O_B], proj, D);
        vhk_add(e->pool, x, proj, R * D);
        vhk_layernorm(e->pool, x, x, R, D, b->vec[VH_TF_ATTN_NORM_W], b->vec[VH_TF_ATTN_NORM_B], b->info.norm_eps);
        if (!s.F) continue;
        cpu_linear(e, b, VH_TF_UP_W, x, D, R, b->vec[VH_TF_UP_B], hidden, s.F);
        vhk_relu(e->pool, hidden, R * s.F);
        cpu_linear(e, b, VH_TF_DOWN_W, hidden, s.F, R, b->vec[VH_TF_DOWN_B], proj, D);
        vhk_add(e->pool, x, proj, R * D);
        vhk_layernorm(e->pool, x, x, R, D, b->vec[VH_TF_MLP_NORM_W], b->vec[VH_TF_MLP_NORM_B], b->info.norm_eps);
    }
}
