/*
 * OpenVLA's checkpoint folder as a list of blocks: config.json (+ preprocessor_config.json) and the
 * memory-mapped safetensors weights, mapped onto the block kinds of the plugin ABI
 * (include/vlahybrid/backend.h) with every tensor's name, dtype and shape checked.
 *
 * Block order: for each tower t: PATCH_EMBED, TRANSFORMER x (depth - 1) (timm's pre-norm ViT
 * blocks: LayerNorm, full attention, fused q|k|v, GELU, LayerScale on DINOv2); MLP_CHAIN (the
 * projector, over both towers' tokens); EMBED_LOOKUP; TRANSFORMER x n_layers (Llama decoder
 * layers); READOUT. The last ViT block of each tower is never computed: OpenVLA takes the output of
 * the second-to-last block (timm get_intermediate_layers(n={depth - 2})).
 * Slots: <tower>.pixels -> <tower>.tokens (featurizer, fused_featurizer) -> image.embeds -> rows ->
 * outputs; a KV state per decoder layer.
 */
#ifndef VH_FAMILY_OPENVLA_MODEL_H
#define VH_FAMILY_OPENVLA_MODEL_H

#include "family/openvla/openvla_config.h"
#include "model/model.h"

/* What vh_model.family_model holds for OpenVLA. */
typedef struct vh_openvla_model {
    vh_openvla_config config;
    uint32_t tower_first_block[VH_MAX_TOWERS];
    uint32_t projector_block;
} vh_openvla_model;

/* The family's load / unload (vh_family_openvla). */
vh_status vh_openvla_load(vh_model *m, const char *dir, const char *config_text, size_t config_len,
                          const char *config_path, vh_error *err);
void vh_openvla_unload(vh_model *m);

/* The OpenVLA config of a model of this family. */
static inline const vh_openvla_config *vh_openvla_config_of(const vh_model *m)
{
    return &((const vh_openvla_model *)m->family_model)->config;
}

#endif
