/*
 * The camera front end Orion and MindDrive share (../shared/specs/orion-minddrive.md 1-3), as a
 * converted checkpoint describes it (config.json's front_end, doc/orion-converter.md) and as blocks:
 *
 *   cam.pixels  -> PATCH_EMBED, 24 EVA-02 layers           -> vit.tokens   (tower 0, one image a camera)
 *   cam.coords  -> position_encoder (Linear ReLU Linear)   -> cam.pos_embed (the 3-D position embedding)
 *   vit.tokens, cam.pos_embed -> the det head, the map head -> their tokens (petr_heads.h)
 *
 * The cameras of a frame are one frame of the query sets (n_cameras images); the host computes
 * cam.coords from each camera's lidar2img (petr_position.c) and feeds it.
 */
#ifndef VH_FAMILY_DRIVING_FRONT_END_H
#define VH_FAMILY_DRIVING_FRONT_END_H

#include <jansson.h>

#include "family/driving/config_fields.h"
#include "family/driving/eva_backbone.h"
#include "family/driving/petr_heads.h"
#include "family/driving/petr_position.h"

#define VH_FRONT_END_CAMERAS 6 /* the agents' rig: the heads' query sets are sized for it */

typedef struct vh_front_end_config {
    int present;                       /* config.json has a front_end object */
    uint32_t n_cameras;
    vh_eva_config backbone;
    vh_petr_position position;
    vh_petr_heads_config heads;
} vh_front_end_config;

/* root's "front_end" (absent or null: present = 0). `source` names the file in messages. */
vh_status vh_front_end_config_parse(vh_config_fields *c, const json_t *root, vh_front_end_config *out);

typedef struct vh_front_end_graph {
    uint32_t first_block, vit_blocks;  /* the patch embedding and the layers: [first_block, + vit_blocks) */
    uint32_t position_block;           /* the position encoder's chain */
    uint32_t pixels, tokens, coords, pos_embed; /* slots */
    vh_petr_head det, map;
    float *pos_table;                  /* the ViT's interpolated position table (the model's weights view it) */
} vh_front_end_graph;

/* Blocks the front end adds. */
uint32_t vh_front_end_block_count(const vh_checkpoint *ck, const vh_front_end_config *fe);
/* The front end's blocks from *next_block on (tower 0 its ViT); *next_block moved past them. */
vh_status vh_front_end_take_blocks(vh_model *m, const vh_front_end_config *fe, vh_front_end_graph *g,
                                   uint32_t *next_block, vh_error *err);
void vh_front_end_graph_free(vh_front_end_graph *g);
/* The heads' tokens are the prompt's vision rows: n_vision_tokens of the LLM's width. */
vh_status vh_front_end_check_tokens(const vh_model *m, const vh_front_end_graph *g, uint32_t n_vision_tokens,
                                    uint32_t hidden, vh_error *err);

#endif
