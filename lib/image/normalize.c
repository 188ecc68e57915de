/* RGB8 -> normalised float32 planes, bit-exact with torchvision's to_tensor + normalize. */
#include "image/normalize.h"

#include <math.h>

vh_status vh_image_normalize_rgb8(const uint8_t *rgb, uint32_t width, uint32_t height,
                                  size_t stride, const vh_image_norm *norm, float *planes,
                                  vh_error *err)
{
    if (!rgb || !norm || !planes)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "normalize: %s is NULL",
                            !rgb ? "image" : !norm ? "norm" : "output");
    if (width == 0 || height == 0)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "normalize: empty image %ux%u", width,
                            height);
    size_t row_bytes, plane_size, total;
    if (__builtin_mul_overflow((size_t)width, (size_t)3, &row_bytes) ||
        __builtin_mul_overflow((size_t)width, (size_t)height, &plane_size) ||
        __builtin_mul_overflow(plane_size, (size_t)3, &total))
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "normalize: image %ux%u too large",
                            width, height);
    if (stride == 0)
        stride = row_bytes;
    if (stride < row_bytes)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT,
                            "normalize: stride %zu is less than width %u * 3", stride, width);
    for (int c = 0; c < 3; c++) {
        if (!isfinite(norm->mean[c]) || !isfinite(norm->std[c]) || norm->std[c] == 0.0f)
            return vh_error_set(err, VH_ERR_INVALID_ARGUMENT,
                                "normalize: channel %d has mean %g std %g (need finite, std != 0)",
                                c, (double)norm->mean[c], (double)norm->std[c]);
    }

    /* The result depends only on the channel and the byte: a table of 3 x 256 values. Each
     * step is assigned to a float so it is rounded to float32 before the next one. */
    float table[3][256];
    for (int c = 0; c < 3; c++) {
        for (int v = 0; v < 256; v++) {
            float scaled = (float)v / 255.0f;
            float centred = scaled - norm->mean[c];
            table[c][v] = centred / norm->std[c];
        }
    }
    for (uint32_t y = 0; y < height; y++) {
        const uint8_t *row = rgb + (size_t)y * stride;
        float *r = planes + (size_t)y * width;
        float *g = r + plane_size;
        float *b = g + plane_size;
        for (uint32_t x = 0; x < width; x++) {
            r[x] = table[0][row[3 * x + 0]];
            g[x] = table[1][row[3 * x + 1]];
            b[x] = table[2][row[3 * x + 2]];
        }
    }
    return VH_OK;
}
