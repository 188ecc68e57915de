/*
 * One camera image as Orion's and MindDrive's agents prepare it for the EVA-02 backbone (the released
 * eval pipeline, mmcv/datasets/pipelines/transforms_3d.py; ../shared/specs/orion-minddrive.md 1.2):
 *   ResizeCropFlipRotImage (eval): resize = max(fH / H, fW / W) of the configured camera size H x W,
 *     Pillow BICUBIC to (int(W resize), int(H resize)), crop (crop_w, crop_h, crop_w + fW, crop_h + fH)
 *     with crop_h = int((1 - bot_pct) newH) - fH, crop_w = int(max(0, newW - fW) / 2) (outside the
 *     image: zeros, as Pillow's crop), float32; K <- ida K, ida = [[r, 0, -crop_w], [0, r, -crop_h],
 *     [0, 0, 1]] in float32 (torch) times K in float64;
 *   ResizeMultiview3D (keep_ratio False): cv2 bilinear to out_w x out_h; fx, cx times the width
 *     scale, fy, cy times the height scale;
 *   NormalizeMultiviewImage: (x - mean) * (1 / std) per channel, mean and 1 / std cast to float32 as
 *     cv2.subtract / cv2.multiply take a scalar.
 * The agent's arrays are BGR and the normaliser swaps them to RGB first; every step before is per
 * channel, so an RGB image in gives the same planes without the swap. (The agent's JPEG quality-20
 * round trip of each camera is the agent's, not the model's, and is not done here.)
 */
#ifndef VH_FAMILY_DRIVING_CAMERA_PREPROCESS_H
#define VH_FAMILY_DRIVING_CAMERA_PREPROCESS_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct vh_camera_prep {
    uint32_t cam_w, cam_h;             /* data_aug_conf W, H: the size the resize factor is taken from */
    uint32_t final_w, final_h;         /* data_aug_conf final_dim (fW, fH) */
    double bot_pct;                    /* the mean of data_aug_conf bot_pct_lim */
    uint32_t out_w, out_h;             /* ResizeMultiview3D img_scale */
    double mean[3], std[3];            /* RGB */
} vh_camera_prep;

/* Orion's and MindDrive's agents: 1600 x 900 cameras, final_dim (320, 640), bot_pct 0, 640 x 640,
 * the ImageNet mean and std in 0..255. */
vh_camera_prep vh_camera_prep_agent(void);

/* rgb: w x h RGB8, rows `stride` bytes apart (0: 3 w); planes: [3, out_h, out_w] float32;
 * intrinsic (may be NULL): the camera's 3 x 3 K, row-major, updated as the pipeline does.
 * VH_ERR_INVALID_ARGUMENT on NULLs or empty sizes, VH_ERR_OUT_OF_MEMORY. */
vh_status vh_camera_preprocess(const vh_camera_prep *c, const uint8_t *rgb, uint32_t w, uint32_t h, size_t stride,
                               float *planes, double intrinsic[9], vh_error *err);

/* Output rows [y0, y1) of each plane only (planes is the whole [3, out_h, out_w] buffer; the other
 * rows are not written), the same bytes as vh_camera_preprocess's: a camera split across threads.
 * VH_ERR_INVALID_ARGUMENT also for an empty or out-of-range row range. */
vh_status vh_camera_preprocess_rows(const vh_camera_prep *c, const uint8_t *rgb, uint32_t w, uint32_t h,
                                    size_t stride, float *planes, uint32_t y0, uint32_t y1, double intrinsic[9],
                                    vh_error *err);

#endif
