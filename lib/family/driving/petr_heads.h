/*
 * Orion's two PETR heads as blocks (../shared/specs/orion-minddrive.md 3.2-3.4; OrionHead and
 * OrionHeadM in the released orion_head.py / orion_head_map.py), and the host work between their
 * runs. The layers (the decoders, the memory decoders, the small MLPs, the modulated norm) are
 * blocks on query sets, run by whatever backend holds them; the family keeps each stream's memory
 * banks (petr_memory.h) and does what is no layer: the encodings of the memory entries, the
 * concatenations and sums of positional terms, nan_to_num, the boxes' and lanes' sigmoid
 * decoding, the top-k update.
 *
 * A frame of one stream through a head is a few runs of its blocks (each a vh_petr_runner call),
 * the host reading back what the next step needs between them:
 *
 *   det  A  query_pos over the memory's and the queries' points, time_embedding over the ages (and
 *           age 0), scene_time_embedding, input_projection of the image features
 *        B  ego_pose_pe (MLN) over the memory's positions and ego motion
 *        C  memory_decoder_mq, then the decoder's layers (self-attention with the memory's last 300
 *           entries as extra keys and the scene-query mask, cross-attention to the images)
 *        D  class and box branches (last layer only: the plan reads nothing else), memory_decoder_cq
 *        E  output_projection of [scene tokens, history tokens], can_bus_embed
 *   map  A, B as det (its lanes' points are constant); C the decoder (the 1500 one-to-many lanes
 *        dropped: exact, spec 3.4); D class and lane branches, output_projection
 *
 * The tokens: det [extra + num_memory + 1, out_dims] (scene, history, can-bus), map [extra, out_dims].
 */
#ifndef VH_FAMILY_DRIVING_PETR_HEADS_H
#define VH_FAMILY_DRIVING_PETR_HEADS_H

#include <stdbool.h>
#include <stdint.h>

#include "family/driving/petr_memory.h"
#include "model/model.h"

/* What the checkpoint's shapes do not say (the agent config's head arguments). */
typedef struct vh_petr_heads_config {
    uint32_t heads;            /* attention heads of every decoder: 8 */
    uint32_t memory_len;       /* 600 */
    uint32_t topk;             /* top-k of each frame's update: 300 (det: also num_propagated) */
    uint32_t scene_len;        /* the det head's scene memory: 256 */
    uint32_t lanes_one2one;    /* the map head's lanes kept: 300 (of instance_embedding_lane's rows) */
    uint32_t image_rows;       /* image feature rows a frame: cameras x H x W (9600) */
    uint32_t canbus_len;       /* can-bus vectors the det head keeps: 2 */
    float pc_range[6];
} vh_petr_heads_config;

/* Sizes read from the checkpoint. */
typedef struct vh_petr_head_sizes {
    uint32_t embed, in_channels, out_dims, layers, extra, queries, propagated, classes, reg_out, num_memory;
} vh_petr_head_sizes;

typedef struct vh_petr_head {
    int map;                   /* 0: OrionHead (det), 1: OrionHeadM (map) */
    vh_petr_head_sizes n;
    uint32_t first_block, run_first[5], run_count[5]; /* the runs A..E (map: A..D) */
    /* slots the host fills or reads (VH_MODEL_MAX_SLOTS: none) */
    uint32_t pt_enc, pt_pos, age_enc, age_pos, scene_enc, mem_pos0, motion_enc, mem_pos1, hq, hq_pos,
        scene_q, x, x_pos, extra_rows, extra_pos, obj, vlm, logits, boxes, out_in, tokens, canbus, can_token;
    uint32_t features, pos_embed;   /* shared with the other head */
    /* constants of the weights, fp32 host copies */
    float *query_pt_enc;       /* [extra + queries][396]: nerf of the queries' points (det: zeros for extra) */
    float *query_ref;          /* [queries][3 n_points]: the queries' points in [0, 1] (det: reference_points;
                                  map: sigmoid(reference_points_lane(lane + point embeddings))) */
    float *query_embedding;    /* [extra][D] */
    float *lane_embedding;     /* map: [queries][D] instance_embedding_lane's one-to-one rows */
    float *memory_query;       /* det: [num_memory][D] */
    float *pseudo_points;      /* det: [propagated][3] metres */
} vh_petr_head;

/* Adds a head's blocks to m from block *next_block on, reading its tensors under `prefix`
 * ("pts_bbox_head." or "map_head.") and the shared modules at the top (query_pos, time_embedding,
 * ego_pose_pe), the image features from QUERIES slot `features` [image_rows, in_channels] and the
 * position embedding from `pos_embed` [image_rows, embed]. *next_block is moved past them. */
vh_status vh_petr_head_take_blocks(vh_model *m, vh_petr_head *h, int map, const vh_petr_heads_config *c,
                                   uint32_t features, uint32_t pos_embed, uint32_t *next_block, vh_error *err);
/* The blocks a head adds (to size the model before taking them), from the checkpoint's layers. */
uint32_t vh_petr_head_block_count(const vh_checkpoint *ck, int map);
void vh_petr_head_free(vh_petr_head *h);

/* How the head runs its blocks: run blocks [first, first + n) of the model on one frame with the
 * query slots of `inputs` ([n_slots], NULL where the executor keeps what it has) filled first;
 * read frame 0's rows of a query slot. */
typedef struct vh_petr_runner {
    void *user;
    vh_status (*run)(void *user, uint32_t first, uint32_t n, const float *const *inputs, vh_error *err);
    vh_status (*read)(void *user, uint32_t slot, float *dst, size_t n_floats, vh_error *err);
    uint32_t n_slots;
} vh_petr_runner;

/* One frame's inputs to the heads. */
typedef struct vh_petr_frame {
    double timestamp;
    float ego_pose[16], ego_pose_inv[16]; /* LiDAR to world and back, row-major */
    float can_bus[18];
    float command;
    bool same_episode;
} vh_petr_frame;

/* A stream's state for one head: its bank (and the det head's scene memory) and the host scratch. */
typedef struct vh_petr_head_state {
    vh_petr_bank bank;
    vh_petr_scene_memory scene; /* det only */
    /* host buffers, a frame's rows of the slots of the same names */
    float *pt_enc, *pt_pos, *age_enc, *age_pos, *motion_enc, *mem_pos0, *mem_pos1, *x, *x_pos, *extra_rows,
        *extra_pos, *obj, *vlm, *logits, *boxes, *points, *scores, *scene_enc, *zeros, *history, *out_in, *canbus;
    const float **inputs;       /* [n_slots] */
    uint32_t last_topk[1024];   /* the last post-update's top-k (the first min(topk, 1024)) */
} vh_petr_head_state;

vh_status vh_petr_head_state_init(vh_petr_head_state *s, const vh_petr_head *h, const vh_petr_heads_config *c,
                                  uint32_t n_slots, vh_error *err);
void vh_petr_head_state_free(vh_petr_head_state *s);
/* The next frame as a fresh state's first (the `memory_embedding is None` branch): whatever the
 * banks hold now (a dropped stream's, a failed frame's half-update) is not read again. */
void vh_petr_head_state_restart(vh_petr_head_state *s);

/* Frame f through the head: pre-update, the runs, post-update. The image features and position
 * embedding are in their slots already, or given here (NULL: the executor's). tokens: [rows][out_dims]
 * (det: extra + num_memory + 1 rows, map: extra). */
vh_status vh_petr_head_frame(const vh_petr_head *h, const vh_petr_heads_config *c, vh_petr_head_state *s,
                             const vh_petr_runner *r, const vh_petr_frame *f, const float *features,
                             const float *pos_embed, float *tokens, vh_error *err);

/* Token rows a head gives a frame. */
static inline uint32_t vh_petr_head_token_rows(const vh_petr_head *h)
{
    return h->map ? h->n.extra : h->n.extra + h->n.num_memory + 1;
}

#endif
