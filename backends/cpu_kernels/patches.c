/* ViT patch extraction (im2col) so the patch embedding Conv2d becomes one linear layer. */
#include <string.h>

#include "cpu_kernels.h"

void vhk_im2col_patches(const float *pixels, int64_t image_size, int64_t patch, float *out)
{
    if (patch <= 0) return;
    int64_t grid = image_size / patch, row_len = 3 * patch * patch;
    for (int64_t gy = 0; gy < grid; gy++) {
        for (int64_t gx = 0; gx < grid; gx++) {
            float *dst = out + (gy * grid + gx) * row_len;
            for (int64_t c = 0; c < 3; c++) {
                for (int64_t ky = 0; ky < patch; ky++) {
                    const float *src = pixels + (c * image_size + gy * patch + ky) * image_size +
                                       gx * patch;
                    memcpy(dst, src, (size_t)patch * sizeof(float));
                    dst += patch;
                }
            }
        }
    }
}
