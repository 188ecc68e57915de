/*
 * The memory banks of Orion's PETR heads, implemented literally (../shared/specs/orion-minddrive.md
 * 1.4; OrionHead / OrionHeadM pre_update_memory, post_update_memory, temporal_alignment in the
 * released orion_head.py and orion_head_map.py). One stream keeps one bank per head, and the det head
 * a scene memory beside it. Per frame, in order:
 *
 *   vh_petr_bank_pre_update    ages += t, the keep flag x = (|t - t_prev| < 2 s and the same episode),
 *                              poses and points into the current LiDAR frame (ego_pose_inv), truncated
 *                              to memory_len, everything times x; after a reset (x = 0, the first frame
 *                              included) the first n_pseudo entries get the pseudo points and I
 *   (the decoder reads the memory_len entries: vh_petr_bank_encode_row gives each one's MLP inputs)
 *   vh_petr_bank_post_update   top-k of the queries' scores (sorted), their rows, points, age 0 and
 *                              pose I put in front, then points and poses back to the world
 *                              (ego_pose), ages -= t
 *
 * The scene memory (det head only) keeps the last frames' can-bus vectors and the 16 "history"
 * tokens of each frame in a FIFO, aged the same way. What the released code stores and never reads
 * on the inference path (memory_velo, the map head's memory_mask) is not kept. float32 as the released
 * heads run, ages float64 as they become after the first frame.
 */
#ifndef VH_FAMILY_DRIVING_PETR_MEMORY_H
#define VH_FAMILY_DRIVING_PETR_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

#define VH_PETR_CANBUS 19       /* [command, can_bus[0..17]] with can_bus 0..2 and 17 zeroed */
#define VH_PETR_MAX_POINTS 11   /* reference points of an entry: 1 (box centre), 11 (lane) */

typedef struct vh_petr_bank_config {
    uint32_t embed;             /* D: an entry's embedding width */
    uint32_t memory_len;        /* entries the decoder sees: 600 */
    uint32_t topk;              /* entries each frame adds: 300 */
    uint32_t n_points;          /* 1 .. VH_PETR_MAX_POINTS, 3 floats each (metres) */
    uint32_t n_pseudo;          /* det: 300 (num_propagated), map: 0 */
    const float *pseudo_points; /* [n_pseudo][3] metres (vh_petr_pseudo_points); copied */
} vh_petr_bank_config;

typedef struct vh_petr_bank {
    vh_petr_bank_config c;
    uint32_t n;                 /* entries held: memory_len at use time, + topk after post-update */
    float *embedding;           /* [memory_len + topk][D] */
    float *points;              /* [..][n_points * 3] */
    double *age;                /* [..]: seconds since written (between pre- and post-update) */
    float *egopose;             /* [..][16]: the entry's LiDAR frame to the current one (use time) */
    float *pseudo;              /* [n_pseudo][3] */
    double sample_time;
    bool started;
} vh_petr_bank;

vh_status vh_petr_bank_init(vh_petr_bank *b, const vh_petr_bank_config *c, vh_error *err);
void vh_petr_bank_free(vh_petr_bank *b);

/* The pre-update of a frame at `timestamp` (seconds) whose ego_pose_inv is the 4 x 4 row-major
 * world-to-LiDAR transform; same_episode false forces a reset. Returns x (1 kept, 0 reset). */
float vh_petr_bank_pre_update(vh_petr_bank *b, double timestamp, const float ego_pose_inv[16], bool same_episode);

/* The post-update from the frame's n_rows decoder outputs (last layer): rows [n_rows][embed], scores
 * [n_rows] (vh_petr_max_sigmoid), points [n_rows][n_points * 3] in metres. The top-k order: score
 * descending, equal scores by index. topk_out (optional): [topk] the chosen rows. */
vh_status vh_petr_bank_post_update(vh_petr_bank *b, uint32_t n_rows, const float *rows, const float *scores,
                                   const float *points, double timestamp, const float ego_pose[16],
                                   uint32_t *topk_out, vh_error *err);

/* The MLP inputs of entry i at use time (temporal_alignment): nerf of its points normalised to
 * pc_range (a single point repeated to VH_PETR_MAX_POINTS) [396], nerf of [age, pose rows 0..2] [156],
 * pos2posemb1d of its age [256]. Any output may be NULL. */
void vh_petr_bank_encode_row(const vh_petr_bank *b, uint32_t i, const float pc_range[6], float *points_enc,
                             float *motion_enc, float *age_enc);

/* score[i] = max over classes of sigmoid(logits[i][c]) in float32, as the heads rank their queries. */
void vh_petr_max_sigmoid(const float *logits, uint32_t n, uint32_t classes, float *scores);

/* The det head's pseudo points in metres: weight [n][3] (pseudo_reference_points) * (max - min) + min. */
void vh_petr_pseudo_points(const float *weight, uint32_t n, const float pc_range[6], float *out);

/* The det head's scene memory. */
typedef struct vh_petr_scene_memory {
    uint32_t embed;             /* D */
    uint32_t num_memory;        /* history tokens a frame adds: 16 */
    uint32_t scene_len;         /* tokens kept: 256 */
    uint32_t canbus_len;        /* can-bus vectors kept: 2 */
    uint32_t n_canbus;          /* held: canbus_len at use time, + 1 after post-update */
    int64_t his_len;            /* his_memory_canbus_len: frames since the last reset */
    float *canbus;              /* [canbus_len + 1][VH_PETR_CANBUS] */
    uint32_t n_query;
    float *query;               /* [scene_len + num_memory][D] */
    double *age;                /* [scene_len + num_memory] */
    bool started;
} vh_petr_scene_memory;

vh_status vh_petr_scene_init(vh_petr_scene_memory *s, uint32_t embed, uint32_t num_memory, uint32_t scene_len,
                             uint32_t canbus_len, vh_error *err);
void vh_petr_scene_free(vh_petr_scene_memory *s);
/* With the x the det bank's pre-update returned; can_bus: the frame's 18 floats. */
void vh_petr_scene_pre_update(vh_petr_scene_memory *s, double timestamp, const float can_bus[18], float x);
/* history: [num_memory][embed], the frame's history tokens (memory_decoder_cq's output). */
void vh_petr_scene_post_update(vh_petr_scene_memory *s, double timestamp, const float can_bus[18], float command,
                               const float *history);
/* The can-bus token's input at use time: [command, can_bus with 0..2 and 17 zeroed] (19), the kept
 * can-bus vectors (canbus_len x 19), each group of topk bank entries' mean pose (memory_len / topk
 * x 16): 89 floats for Orion. Returns how many it wrote. */
uint32_t vh_petr_canbus_input(const vh_petr_scene_memory *s, const vh_petr_bank *det, const float can_bus[18],
                              float command, float *out);

/* Encodings of ../shared/specs/orion-minddrive.md 3.1 (positional_encoding.py). nerf: for f = 2^0..2^5,
 * sin(f x) of every input, then cos(f x): out [12 n]. pos2posemb1d: 2 pi p / 10000^(2 floor(i/2) / n_feats),
 * sin at even i, cos at odd i, in double (the ages are float64), rounded once. */
void vh_nerf_encode(const float *x, uint32_t n, float *out);
void vh_pos2posemb1d(double p, uint32_t n_feats, float *out);

#endif
