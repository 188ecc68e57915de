#include "model/llama_layer.h"

#include "model/tensor_lookup.h"

vh_model_block *vh_begin_llama_layer(vh_model *m, uint32_t index, uint32_t rows, uint32_t layer, float rms_eps,
                                     float rope_theta)
{
    vh_model_block *b = vh_model_begin_block(m, index, VH_BLOCK_TRANSFORMER, rows, rows,
                                             vh_model_kv_state(m, "layer", layer));
    vh_transformer_params *p = &b->params.transformer;
    p->layer = layer;
    p->norm = VH_NORM_RMS;
    p->norm_eps = rms_eps;
    p->placement = VH_NORM_PRE;
    p->attention = VH_ATTN_CAUSAL_KV;
    p->rope = VH_ROPE_HALF;
    p->rope_theta = rope_theta;
    p->mlp = VH_MLP_SILU_GATED;
    return b;
}

vh_status vh_take_llama_layer(const vh_checkpoint *ck, const char *pre, uint32_t i, const vh_llm_desc *l,
                              vh_tensor_view *w, vh_error *err)
{
    const int64_t Dl = l->hidden, F = l->intermediate;
    const int64_t q_dim = (int64_t)l->n_heads * l->head_dim, kv_dim = (int64_t)l->n_kv_heads * l->head_dim;
    vh_status st;
    if ((st = vh_tensor_takef(ck, &w[VH_TF_ATTN_NORM_W], 0, VH_SHAPE(Dl), err, "%slayers.%u.input_layernorm.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_TF_Q_W], 0, VH_SHAPE(q_dim, Dl), err, "%slayers.%u.self_attn.q_proj.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_TF_K_W], 0, VH_SHAPE(kv_dim, Dl), err, "%slayers.%u.self_attn.k_proj.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_TF_V_W], 0, VH_SHAPE(kv_dim, Dl), err, "%slayers.%u.self_attn.v_proj.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_TF_O_W], 0, VH_SHAPE(Dl, q_dim), err, "%slayers.%u.self_attn.o_proj.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_TF_MLP_NORM_W], 0, VH_SHAPE(Dl), err,
                              "%slayers.%u.post_attention_layernorm.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_TF_GATE_W], 0, VH_SHAPE(F, Dl), err, "%slayers.%u.mlp.gate_proj.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_TF_UP_W], 0, VH_SHAPE(F, Dl), err, "%slayers.%u.mlp.up_proj.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_TF_DOWN_W], 0, VH_SHAPE(Dl, F), err, "%slayers.%u.mlp.down_proj.weight", pre, i)))
        return st;
    return VH_OK;
}
