#include "family/driving/petr_position.h"

#include "family/driving/petr_math.h"

#include <math.h>

vh_petr_position vh_petr_position_agent(void)
{
    return (vh_petr_position){.depth_num = 64, .depth_start = 1.0f, .range = {-61.2f, -61.2f, -10.0f, 61.2f, 61.2f, 10.0f},
                              .stride = 16, .pad_w = 640, .pad_h = 640};
}

vh_status vh_petr_position_coords(const vh_petr_position *p, uint32_t n_cams, const float *lidar2img,
                                  uint32_t grid_h, uint32_t grid_w, float *out, vh_error *err)
{
    if (!p || !lidar2img || !out || !n_cams || !grid_h || !grid_w || !p->depth_num || !p->stride || !p->pad_w ||
        !p->pad_h)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "position embedding: a NULL or an empty size");
    const uint32_t D = p->depth_num;
    /* the LID bins, as torch computes them in float32 */
    float bins[256];
    if (D > 256) return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "position embedding: %u depth bins (at most 256)", D);
    const float bin_size = (p->range[3] - p->depth_start) / (float)(D * (1 + D));
    for (uint32_t i = 0; i < D; i++) bins[i] = p->depth_start + bin_size * (float)i * (float)(i + 1);
    const float eps = 1e-5f;
    for (uint32_t cam = 0; cam < n_cams; cam++) {
        double inv64[16];
        if (!vh_mat4_invert(lidar2img + (size_t)cam * 16, inv64))
            return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "position embedding: camera %u's lidar2img has no inverse",
                                cam);
        float inv[16];
        for (int i = 0; i < 16; i++) inv[i] = (float)inv64[i];
        for (uint32_t y = 0; y < grid_h; y++)
            for (uint32_t x = 0; x < grid_w; x++) {
                /* locations(): (arange * stride + stride // 2) / pad, then times pad again, in float32 */
                const float u = ((float)(x * p->stride) + (float)(p->stride / 2)) / (float)p->pad_w * (float)p->pad_w;
                const float v = ((float)(y * p->stride) + (float)(p->stride / 2)) / (float)p->pad_h * (float)p->pad_h;
                float *o = out + (((size_t)cam * grid_h + y) * grid_w + x) * D * 3;
                for (uint32_t i = 0; i < D; i++) {
                    const float d = bins[i], scale = d > eps ? d : eps;
                    const float c[4] = {u * scale, v * scale, d, 1.0f};
                    for (int k = 0; k < 3; k++) {
                        const float *row = inv + k * 4;
                        const float w = row[0] * c[0] + row[1] * c[1] + row[2] * c[2] + row[3] * c[3];
                        const float t = (w - p->range[k]) / (p->range[k + 3] - p->range[k]);
                        o[i * 3 + k] = vh_inverse_sigmoid(t);
                    }
                }
            }
    }
    return VH_OK;
}
