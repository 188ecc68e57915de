/*
 * OpenVLA's config.json (and preprocessor_config.json), as the published checkpoint defines them.
 *
 * config.json is a transformers OpenVLAConfig: the vision towers are named by timm model ids whose
 * architecture this file knows (DINOv2 ViT-L/14 with registers, SigLIP so400m/14); text_config holds
 * only what differs from transformers' LlamaConfig defaults, so those defaults are applied here.
 * Small test checkpoints describe different tower sizes with this project's extension
 * "vision_backbone_overrides" (a list, one object per timm id).
 */
#ifndef VH_FAMILY_OPENVLA_CONFIG_H
#define VH_FAMILY_OPENVLA_CONFIG_H

#include "util/error.h"
#include "vlahybrid/backend.h"

#define VH_MAX_DATASETS 256

typedef struct vh_action_stats {
    char *dataset;                     /* norm_stats key */
    uint32_t dim;                      /* action values */
    double q01[VH_MAX_ACTION_DIM];
    double q99[VH_MAX_ACTION_DIM];
    uint8_t mask[VH_MAX_ACTION_DIM];   /* 1: un-normalise this value; 0: leave it in [-1, 1] */
} vh_action_stats;

typedef struct vh_vision_tower_config {
    char timm_id[128];
    uint32_t image_size, patch_size;
    uint32_t embed_dim, depth, n_heads, mlp_hidden;
    uint32_t n_registers;
    uint32_t class_token;              /* 0/1 */
    uint32_t layer_scale;              /* 0/1 */
    float mean[3], std[3];             /* input normalisation */
} vh_vision_tower_config;

typedef struct vh_openvla_config {
    uint32_t n_towers;                 /* 1, or 2 for a fused backbone */
    vh_vision_tower_config towers[VH_MAX_TOWERS];
    uint32_t projector_layers;         /* 3 for fused-gelu-mlp, 2 for gelu-mlp */
    char resize_strategy[32];          /* "resize-naive" */

    /* Llama text_config after defaults */
    uint32_t hidden, intermediate, n_layers, n_heads, n_kv_heads, head_dim, vocab;
    uint32_t max_positions;            /* max_position_embeddings */
    float rms_eps, rope_theta;
    uint32_t tie_word_embeddings;
    int32_t bos_id, eos_id;

    /* action de-tokenisation */
    uint32_t n_action_bins;            /* 256 */
    uint32_t vocab_unpadded;           /* text_config.vocab_size - pad_to_multiple_of (32000) */

    uint32_t n_datasets;
    vh_action_stats *datasets;
} vh_openvla_config;

/* Parse config.json text. `source` names the file in messages. On failure *cfg is left empty. */
vh_status vh_openvla_config_parse(const char *json_text, size_t len, const char *source,
                                  vh_openvla_config *cfg, vh_error *err);

/* Apply preprocessor_config.json (means, stds, sizes, resize strategy, interpolation) to cfg.
 * Without that file the published processor's values are kept (set by the parse above). */
vh_status vh_openvla_config_apply_preprocessor(vh_openvla_config *cfg, const char *json_text,
                                               size_t len, const char *source, vh_error *err);

/* Add the datasets of a dataset_statistics.json (what OpenVLA's fine-tuning scripts save beside
 * config.json: the same {dataset: {"action": {"q01", "q99", "mask", ...}, "proprio": ...}} map as
 * norm_stats) to those of config.json: the union of both. A dataset in both takes this file's
 * statistics, as OpenVLA's own evaluation code does (experiments/robot/openvla_utils.py get_vla sets
 * vla.norm_stats from dataset_statistics.json when the checkpoint folder has one). */
vh_status vh_openvla_config_apply_dataset_statistics(vh_openvla_config *cfg, const char *json_text, size_t len,
                                                     const char *source, vh_error *err);

/* VH_ERR_BAD_MODEL when neither config.json nor dataset_statistics.json gave a dataset. */
vh_status vh_openvla_config_check_datasets(const vh_openvla_config *cfg, const char *dir, vh_error *err);

/* Find the statistics to un-normalise with: `key` may be NULL only when there is one dataset.
 * VH_ERR_UNNORM_KEY with the list of keys otherwise. */
vh_status vh_openvla_config_dataset(const vh_openvla_config *cfg, const char *key,
                                    const vh_action_stats **stats, vh_error *err);

void vh_openvla_config_free(vh_openvla_config *cfg);

#endif
