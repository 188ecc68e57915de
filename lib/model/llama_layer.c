#include "model/llama_layer.h"

#include "model/tensor_lookup.h"

vh_status vh_take_llama_layer(const vh_checkpoint *ck, const char *pre, uint32_t i, const vh_llm_desc *l,
                              vh_tensor_view *w, vh_error *err)
{
    const int64_t Dl = l->hidden, F = l->intermediate;
    const int64_t q_dim = (int64_t)l->n_heads * l->head_dim, kv_dim = (int64_t)l->n_kv_heads * l->head_dim;
    vh_status st;
    if ((st = vh_tensor_takef(ck, &w[VH_LLM_ATTN_NORM], 0, VH_SHAPE(Dl), err, "%slayers.%u.input_layernorm.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_LLM_Q], 0, VH_SHAPE(q_dim, Dl), err, "%slayers.%u.self_attn.q_proj.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_LLM_K], 0, VH_SHAPE(kv_dim, Dl), err, "%slayers.%u.self_attn.k_proj.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_LLM_V], 0, VH_SHAPE(kv_dim, Dl), err, "%slayers.%u.self_attn.v_proj.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_LLM_O], 0, VH_SHAPE(Dl, q_dim), err, "%slayers.%u.self_attn.o_proj.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_LLM_MLP_NORM], 0, VH_SHAPE(Dl), err,
                              "%slayers.%u.post_attention_layernorm.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_LLM_GATE], 0, VH_SHAPE(F, Dl), err, "%slayers.%u.mlp.gate_proj.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_LLM_UP], 0, VH_SHAPE(F, Dl), err, "%slayers.%u.mlp.up_proj.weight", pre, i)) ||
        (st = vh_tensor_takef(ck, &w[VH_LLM_DOWN], 0, VH_SHAPE(Dl, F), err, "%slayers.%u.mlp.down_proj.weight", pre, i)))
        return st;
    return VH_OK;
}
