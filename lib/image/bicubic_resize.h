/* Bicubic resizing of RGB8 images, bit-exact with Pillow's Image.resize(size, Image.BICUBIC).
 *
 * OpenVLA's processor resizes each camera frame to 224x224 with torchvision's
 * TVF.resize(..., BICUBIC, antialias=True) on a PIL image, which is Pillow's resampler. The vision
 * towers were trained on exactly those pixels, so this reproduces it to the last bit: Pillow's
 * antialiased (support scaled by the downscale factor) bicubic kernel with a = -0.5, its rounding
 * of the kernel bounds, its 22-bit fixed-point weights, a horizontal pass over only the source rows
 * the vertical pass reads, then the vertical pass, each clipped to 8 bits.
 * (Pillow 9.4, src/libImaging/Resample.c, ImagingResample with IMAGING_TRANSFORM_BICUBIC.)
 */
#ifndef VH_IMAGE_BICUBIC_RESIZE_H
#define VH_IMAGE_BICUBIC_RESIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* Largest width or height, of the source or the destination, that the resizer accepts. */
#define VH_RESIZE_MAX_SIDE 16384u

/* Resize the RGB8 image `src` (src_w x src_h pixels, rows src_stride bytes apart; 0 means
 * src_w * 3) into `dst` (dst_w x dst_h pixels, rows packed: dst_w * 3 bytes apart), giving the
 * same bytes as Pillow's Image.resize((dst_w, dst_h), Image.BICUBIC) of that image.
 * Every side must be in 1..VH_RESIZE_MAX_SIDE; src and dst must not overlap. Equal sizes copy.
 * Allocates its coefficient tables and an intermediate image internally and frees them before
 * returning.
 * Returns VH_OK, VH_ERR_INVALID_ARGUMENT (NULL pointer, size out of range, stride too small) or
 * VH_ERR_OUT_OF_MEMORY; on error dst is left unspecified and err says why.
 * Thread-safe: no shared state. */
vh_status vh_resize_bicubic_rgb8(const uint8_t *src, uint32_t src_w, uint32_t src_h,
                                 size_t src_stride, uint8_t *dst, uint32_t dst_w, uint32_t dst_h,
                                 vh_error *err);

/* The machine code that does the arithmetic. Every one gives the same bytes; tests run each one the
 * CPU has, benchmarks compare them. */
typedef enum vh_resize_code {
    VH_RESIZE_CODE_BEST = 0, /* the fastest this CPU runs: what vh_resize_bicubic_rgb8 uses */
    VH_RESIZE_CODE_PORTABLE, /* plain C for the build's baseline instruction set */
    VH_RESIZE_CODE_AVX2,     /* AVX2 intrinsics across, the vertical C compiled for AVX2 (x86-64) */
    VH_RESIZE_CODE_NEON,     /* NEON intrinsics across, the vertical C vectorised by the compiler
                                (aarch64, where NEON is baseline) */
} vh_resize_code;

/* Whether this build and CPU can run `code`. */
bool vh_resize_code_available(vh_resize_code code);

/* Output rows [y0, y1) of vh_resize_bicubic_rgb8's dst_w x dst_h result, into dst (dst_w * 3
 * bytes a row, its first row output row y0): the same bytes as the whole image's rows; only the
 * source rows they read are resampled (a crop's rows, a camera split across threads).
 * VH_ERR_INVALID_ARGUMENT also for an empty or out-of-range row range. */
vh_status vh_resize_bicubic_rgb8_rows(const uint8_t *src, uint32_t src_w, uint32_t src_h,
                                      size_t src_stride, uint8_t *dst, uint32_t dst_w,
                                      uint32_t dst_h, uint32_t y0, uint32_t y1, vh_error *err);

/* vh_resize_bicubic_rgb8 with the given code; VH_ERR_INVALID_ARGUMENT if it is not available. */
vh_status vh_resize_bicubic_rgb8_code(const uint8_t *src, uint32_t src_w, uint32_t src_h,
                                      size_t src_stride, uint8_t *dst, uint32_t dst_w,
                                      uint32_t dst_h, vh_resize_code code, vh_error *err);

#endif
