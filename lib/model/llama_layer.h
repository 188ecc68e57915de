/*
 * A Llama decoder layer's tensors under the transformers names (PREFIX + "layers.i." ...:
 * input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj),
 * checked against the LLM's shapes, into an LLM block's roles. Families whose LLM is a Llama
 * (OpenVLA's Llama-2, Orion's Vicuna) share it.
 */
#ifndef VH_MODEL_LLAMA_LAYER_H
#define VH_MODEL_LLAMA_LAYER_H

#include "model/checkpoint.h"
#include "vlahybrid/backend.h"

/* w: the block's tensors by role (VH_LLM_ATTN_NORM .. VH_LLM_DOWN are filled). */
vh_status vh_take_llama_layer(const vh_checkpoint *ck, const char *prefix, uint32_t layer, const vh_llm_desc *l,
                              vh_tensor_view *w, vh_error *err);

#endif
