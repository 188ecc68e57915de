/*
 * The parts of a converted driving model's config.json that Orion and MindDrive share: the LLM's
 * text_config (transformers' LlamaConfig / Qwen2Config fields, vocab_size = the embedding's rows)
 * and a VAE + GRU planner object (the converter's "planner" objects, doc/orion-converter.md).
 */
#ifndef VH_FAMILY_DRIVING_CONFIG_H
#define VH_FAMILY_DRIVING_CONFIG_H

#include "family/driving/config_fields.h"

typedef struct vh_driving_llm_config {
    uint32_t hidden, intermediate, n_layers, n_heads, n_kv_heads, head_dim, vocab, max_positions;
    float rms_eps, rope_theta;
    int32_t bos_id, eos_id;
    int tied;                          /* tie_word_embeddings: the LM head is the embedding */
} vh_driving_llm_config;

typedef struct vh_driving_planner_config {
    uint32_t latent_dim, n_modes, n_steps, gru_layers, gru_hidden;
    float min_log_sigma, max_log_sigma;
} vh_driving_planner_config;

/* text_config `t` (named `section` in messages). Defaults as transformers' config classes:
 * rope_theta `default_rope_theta`, rms_norm_eps 1e-6, KV heads = heads, head_dim = hidden / heads,
 * tie_word_embeddings `default_tied`. hidden_act must be silu. */
vh_status vh_driving_llm_config_parse(vh_config_fields *c, const json_t *t, const char *section,
                                      float default_rope_theta, int default_tied, vh_driving_llm_config *out);

/* A planner object `p` whose feature is an LLM row of width `feature_dim`. */
vh_status vh_driving_planner_config_parse(vh_config_fields *c, const json_t *p, const char *section,
                                          uint32_t feature_dim, vh_driving_planner_config *out);

#endif
