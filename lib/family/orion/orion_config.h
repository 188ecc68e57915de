/*
 * Orion's config.json as tools/orion/convert_orion.py writes it (doc/orion-converter.md), with the
 * camera front end's front_end when the checkpoint has one:
 * model_type "orion"; text_config (transformers' LlamaConfig of the pretrain_qformer folder, with
 * the embedding's rows as vocab_size); lora (merged or not); planner (the VAE + GRU planner's
 * hyperparameters); vision_tokens; prompt (the released agent's conversation text, its image
 * marker, the read-out token).
 */
#ifndef VH_FAMILY_ORION_CONFIG_H
#define VH_FAMILY_ORION_CONFIG_H

#include "family/driving/front_end.h"
#include "util/error.h"
#include "vlahybrid/backend.h"

typedef struct vh_orion_config {
    /* the LLM (Vicuna-7B shapes in the released model) */
    uint32_t hidden, intermediate, n_layers, n_heads, n_kv_heads, head_dim, vocab, max_positions;
    float rms_eps, rope_theta;
    int32_t bos_id, eos_id;
    int lora_merged;                   /* 1: W + (alpha / r) B A already in the weights */
    uint32_t lora_rank;                /* r, when kept apart (converted with --lora keep) */
    float lora_scale;                  /* alpha / r */
    /* the planner */
    uint32_t latent_dim, n_modes, n_steps, gru_layers, gru_hidden;
    float min_log_sigma, max_log_sigma;
    /* the frame */
    uint32_t n_vision_tokens;          /* 529 = 256 scene + 16 history + 1 can-bus + 256 map */
    char *prompt;                      /* the conversation text, with the image marker in it */
    char image_marker[32];             /* "<image>" */
    char readout_token[64];            /* "<waypoint_ego>": its final-normed hidden state is read */
    int add_bos;
    /* the camera front end (front_end.present 0: the model starts from the vision tokens) */
    vh_front_end_config front_end;
} vh_orion_config;

/* Parse config.json text (`source` names it in messages). On failure *cfg is left empty. */
vh_status vh_orion_config_parse(const char *json_text, size_t len, const char *source, vh_orion_config *cfg,
                                vh_error *err);
void vh_orion_config_free(vh_orion_config *cfg);

#endif
