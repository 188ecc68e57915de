/*
 * A tower's layer on the CPU (VH_BLOCK_TRANSFORMER: pre-norm LayerNorm, full attention, fused
 * q|k|v, GELU MLP, biases, optional LayerScale; the DINOv2 and SigLIP blocks are instances) over
 * each image's tokens: T = prefix + patches tokens of width D.
 */
#include <math.h>
#include <string.h>

#include "cpu_executor.h"

/* x = x + ls1 * attn(norm1(x)); x = x + ls2 * mlp(norm2(x)) */
void cpu_vit_block(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const uint32_t t = b->info.tower;
    const vh_vit_desc *v = &e->model->towers[t];
    const int64_t D = v->embed_dim, H = v->mlp_hidden, T = v->n_prefix + v->n_patches;
    vit_scratch *s = &e->vit;

    for (uint32_t i = 0; i < batch->n_images; i++) {
        float *x = cpu_tower_tokens(e, t, i);

        vhk_layernorm(e->pool, x, s->norm, T, D, b->vec[VH_TF_ATTN_NORM_W], b->vec[VH_TF_ATTN_NORM_B], b->info.norm_eps);
        cpu_linear(e, b, VH_TF_QKV_W, s->norm, D, T, b->vec[VH_TF_QKV_B], s->qkv, 3 * D);
        /* qkv rows are [q | k | v], each [heads, head_dim]: attention over all T tokens */
        vhk_attention_args a = {
            .q = s->qkv, .q_stride = 3 * D, .k = s->qkv + D, .v = s->qkv + 2 * D, .kv_stride = 3 * D,
            .out = s->attn, .out_stride = D, .n_rows = T, .n_kv = T, .n_heads = v->n_heads,
            .n_kv_heads = v->n_heads, .head_dim = v->head_dim, .first_position = 0, .causal = 0,
            .scale = (float)(1.0 / sqrt((double)v->head_dim)),
        };
        if (!e->ops->attention || !e->ops->attention(e->linear, &a)) vhk_attention(e->pool, &a);
        cpu_linear(e, b, VH_TF_O_W, s->attn, D, T, b->vec[VH_TF_O_B], s->proj, D);
        vhk_add_scaled(e->pool, x, s->proj, b->vec[VH_TF_LS1], T, D);

        vhk_layernorm(e->pool, x, s->norm, T, D, b->vec[VH_TF_MLP_NORM_W], b->vec[VH_TF_MLP_NORM_B], b->info.norm_eps);
        if (e->ops->linear_fused) { /* the GELU in the GEMM's epilogue */
            cpu_linear_fused(e, &(cpu_linear_call){.x = s->norm, .x_stride = D, .rows = T, .in = D,
                                                   .prepared = b->prepared[VH_TF_UP_W], .bias = b->vec[VH_TF_UP_B],
                                                   .epilogue = CPU_EPILOGUE_GELU, .y = s->mlp, .y_stride = H});
        } else {
            cpu_linear(e, b, VH_TF_UP_W, s->norm, D, T, b->vec[VH_TF_UP_B], s->mlp, H);
            vhk_gelu_exact(e->pool, s->mlp, T * H);
        }
        cpu_linear(e, b, VH_TF_DOWN_W, s->mlp, H, T, b->vec[VH_TF_DOWN_B], s->proj, D);
        vhk_add_scaled(e->pool, x, s->proj, b->vec[VH_TF_LS2], T, D);
    }
}

