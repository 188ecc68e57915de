/*
 * A Llama decoder layer's tensors under the transformers names (PREFIX + "layers.i." ...:
 * input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj),
 * checked against the LLM's shapes, into a decoder layer's roles; and that layer as a block of the
 * vocabulary (a TRANSFORMER of Llama's features). Families whose LLM is a Llama (OpenVLA's
 * Llama-2, Orion's Vicuna) or built like one (MindDrive's Qwen2, which adds q/k/v biases) share it.
 */
#ifndef VH_MODEL_LLAMA_LAYER_H
#define VH_MODEL_LLAMA_LAYER_H

#include "model/checkpoint.h"
#include "model/model.h"
#include "vlahybrid/backend.h"

/* Block `index` of m: decoder layer `layer` on the rows slot `rows`, owning a new KV-cache state,
 * with Llama's features (pre-norm RMSNorm of eps, causal attention over the cache, half-rotation
 * RoPE of theta, SiLU-gated MLP, no biases, no LoRA); the family adds flags and LoRA sets. */
vh_model_block *vh_begin_llama_layer(vh_model *m, uint32_t index, uint32_t rows, uint32_t layer, float rms_eps,
                                     float rope_theta);

/* w: the block's tensors by role (VH_TF_ATTN_NORM_W .. VH_TF_DOWN_W are filled). */
vh_status vh_take_llama_layer(const vh_checkpoint *ck, const char *prefix, uint32_t layer, const vh_llm_desc *l,
                              vh_tensor_view *w, vh_error *err);

#endif
