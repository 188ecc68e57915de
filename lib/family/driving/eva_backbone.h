/*
 * The EVA-02 image backbone of Orion's and MindDrive's front end as blocks of the vocabulary (the
 * released mmcv/models/backbones/eva_vit.py, EVAViT with use_abs_pos, rope, intp_freq, qkv_bias,
 * subln False; ../shared/specs/orion-minddrive.md section 2): a PATCH_EMBED from the tower's pixels
 * to its tokens, the position table interpolated once at load from the pretraining grid (after its
 * class slot) to the image's grid (lib/image/grid_interpolate.c: F.interpolate bicubic), then `depth`
 * TRANSFORMER layers with EVA's features (LayerNorm 1e-6 pre-norm; windowed attention on the window
 * blocks, full on the others; 2-D RoPE with theta 10000 scaled to the pretraining grid; SwiGLU with
 * biases and its sub-LayerNorm; q and v biases, no k bias). No neck and no final norm.
 */
#ifndef VH_FAMILY_DRIVING_EVA_BACKBONE_H
#define VH_FAMILY_DRIVING_EVA_BACKBONE_H

#include <stdint.h>

#include "model/model.h"

typedef struct vh_eva_config {
    uint32_t img_size, patch_size;     /* 640, 16: a grid of img_size / patch_size */
    uint32_t embed_dim, depth, num_heads;
    uint32_t mlp_hidden;               /* int(embed_dim * mlp_ratio): 2730 */
    uint32_t window_size;              /* 16 */
    uint64_t window_blocks;            /* bit i: block i is windowed (Orion: all but 2, 5, .., 23) */
    uint32_t pt_hw_seq_len;            /* the RoPE's position grid: 16 */
    uint32_t pretrain_img_size;        /* 224: the position table's grid is pretrain_img_size / patch_size */
    int pretrain_use_cls_token;        /* the table has a class slot first (dropped) */
} vh_eva_config;

/* Orion's and MindDrive's backbone (the agent config's img_backbone). */
vh_eva_config vh_eva_config_agent(void);

/* Blocks [*next_block, *next_block + 1 + depth) of m from the checkpoint's tensors under `prefix`
 * ("img_backbone."), on tower `tower` (its slots `pixels_slot`, `tokens_slot`; m->desc.towers[tower]
 * is filled); *pos_table: the interpolated table [grid * grid, embed_dim] (malloc'd, the caller's to
 * free after the model, and on an error too: NULL or the table). Shapes are checked; an error names
 * what is wrong (VH_ERR_BAD_MODEL, or the checkpoint lookup's status). */
vh_status vh_eva_take_blocks(vh_model *m, const vh_eva_config *c, const char *prefix, uint32_t tower,
                             const char *pixels_slot, const char *tokens_slot, uint32_t *next_block, float **pos_table,
                             vh_error *err);

#endif
