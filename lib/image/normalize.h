/* Turning an RGB8 image into a vision tower's input: float32 planes, scaled and normalised.
 *
 * OpenVLA's processor does TVF.to_tensor (v / 255 in float32, HWC -> CHW) then
 * TVF.normalize(mean, std) ((x - mean) / std in float32). This reproduces torch's result bit for
 * bit: three float32 operations, each rounded, in that order (no reciprocal, no fused
 * multiply-add).
 */
#ifndef VH_IMAGE_NORMALIZE_H
#define VH_IMAGE_NORMALIZE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* Per-channel constants of one vision tower, in R, G, B order. */
typedef struct vh_image_norm {
    float mean[3];
    float std[3];
} vh_image_norm;

/* Write planes[c][y][x] = ((float)rgb[y][x][c] / 255.0f - norm->mean[c]) / norm->std[c] for the
 * width x height RGB8 image `rgb` (rows `stride` bytes apart; 0 means width * 3).
 * `planes` holds 3 * width * height floats: the R plane, then G, then B (torch's [3, H, W]).
 * Returns VH_OK, or VH_ERR_INVALID_ARGUMENT for a NULL pointer, a zero size, a stride below
 * width * 3, or a mean/std that is not finite or a std of 0 (torchvision refuses std 0 too).
 * Thread-safe: no shared state. */
vh_status vh_image_normalize_rgb8(const uint8_t *rgb, uint32_t width, uint32_t height,
                                  size_t stride, const vh_image_norm *norm, float *planes,
                                  vh_error *err);

#endif
