/* Bicubic interpolation of a grid of feature vectors, as PyTorch's
 * F.interpolate(x, size=(out_h, out_w), mode="bicubic", align_corners=False) computes it in float32
 * on the CPU (torch 1.13, aten/src/ATen/native/cpu/UpSampleKernel.cpp with UpSample.h's cubic
 * coefficients; float32 throughout, the roundings not bit for bit): output (y, x) reads source (y', x') with y' = (y + 0.5) * in_h / out_h - 0.5, the
 * four rows and columns around it clamped to the grid's edge, weights of the cubic convolution with
 * A = -0.75 and no antialiasing, summed over columns, then rows, in float32.
 *
 * EVA-02 resizes its 14 x 14 position table to the image's grid this way once per forward; the
 * Orion front end does it once at load.
 */
#ifndef VH_IMAGE_GRID_INTERPOLATE_H
#define VH_IMAGE_GRID_INTERPOLATE_H

#include <stdint.h>

/* src [in_h, in_w, channels] -> dst [out_h, out_w, channels], channels last (each grid point a
 * contiguous vector); sides >= 1; src and dst must not overlap. */
void vh_grid_interpolate_bicubic(const float *src, int64_t in_h, int64_t in_w, int64_t channels, float *dst,
                                 int64_t out_h, int64_t out_w);

#endif
