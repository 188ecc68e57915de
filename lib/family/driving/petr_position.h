/*
 * The input of the front end's 3-D position embedding (Orion's `position_embeding`, MindDrive's alike;
 * ../shared/specs/orion-minddrive.md 3.1): for every camera and every cell of its feature map, the
 * cell's pixel centre (stride / 2 past each stride) lifted along `depth_num` LID depth bins,
 * d_i = depth_start + (range_max_x - depth_start) / (depth_num (depth_num + 1)) i (i + 1), through the
 * camera's inverse lidar2img into the ego frame ([u d, v d, d, 1]), normalised to position_range and
 * passed through inverse_sigmoid (eps 1e-5): [cameras, cells, depth_num * 3], each depth's x, y, z
 * in turn. The MLP (192 -> 1024 -> ReLU -> 256) that follows runs on a backend. Computed once per
 * rig, again when a camera's lidar2img changes; float32 as the released code computes it (the
 * inverse in float64, rounded once).
 */
#ifndef VH_FAMILY_DRIVING_PETR_POSITION_H
#define VH_FAMILY_DRIVING_PETR_POSITION_H

#include <stdint.h>

#include "util/error.h"

typedef struct vh_petr_position {
    uint32_t depth_num;                /* 64 */
    float depth_start;                 /* 1 */
    float range[6];                    /* x, y, z min, then max: -61.2 -61.2 -10 61.2 61.2 10 */
    uint32_t stride;                   /* the feature map's stride in pixels: 16 */
    uint32_t pad_w, pad_h;             /* the padded image: 640 x 640 */
} vh_petr_position;

/* Orion's and MindDrive's values. */
vh_petr_position vh_petr_position_agent(void);

/* lidar2img: [n_cams][16] row-major 4 x 4; out: [n_cams, grid_h * grid_w, depth_num * 3] (cells
 * row-major). VH_ERR_INVALID_ARGUMENT on NULLs, empty sizes, or a lidar2img that has no inverse. */
vh_status vh_petr_position_coords(const vh_petr_position *p, uint32_t n_cams, const float *lidar2img,
                                  uint32_t grid_h, uint32_t grid_w, float *out, vh_error *err);

#endif
