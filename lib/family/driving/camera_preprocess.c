#include "family/driving/camera_preprocess.h"

#include <stdlib.h>
#include <string.h>

#include "image/bicubic_resize.h"
#include "image/bilinear_resize.h"

vh_camera_prep vh_camera_prep_agent(void)
{
    return (vh_camera_prep){.cam_w = 1600, .cam_h = 900, .final_w = 640, .final_h = 320, .bot_pct = 0.0,
                            .out_w = 640, .out_h = 640, .mean = {123.675, 116.28, 103.53},
                            .std = {58.395, 57.12, 57.375}};
}

vh_status vh_camera_preprocess(const vh_camera_prep *c, const uint8_t *rgb, uint32_t w, uint32_t h, size_t stride,
                               float *planes, double intrinsic[9], vh_error *err)
{
    if (!c || !rgb || !planes || !w || !h || !c->cam_w || !c->cam_h || !c->final_w || !c->final_h || !c->out_w ||
        !c->out_h)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "camera preprocessing: a NULL or an empty size");
    /* _sample_augmentation, eval: Python floats and int() truncation */
    const double fh_h = (double)c->final_h / c->cam_h, fw_w = (double)c->final_w / c->cam_w;
    const double resize = fh_h > fw_w ? fh_h : fw_w;
    const int64_t new_w = (int64_t)(c->cam_w * resize), new_h = (int64_t)(c->cam_h * resize);
    const int64_t crop_h = (int64_t)((1.0 - c->bot_pct) * (double)new_h) - c->final_h;
    const int64_t crop_w = (int64_t)((double)(new_w - c->final_w > 0 ? new_w - c->final_w : 0) / 2.0);
    if (new_w < 1 || new_h < 1)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "camera preprocessing: resize to %lld x %lld",
                            (long long)new_w, (long long)new_h);
    const size_t fw = c->final_w, fh = c->final_h;
    uint8_t *resized = malloc((size_t)new_w * (size_t)new_h * 3);
    float *cropped = malloc(sizeof(float) * fw * fh * 3);
    float *stretched = malloc(sizeof(float) * (size_t)c->out_w * c->out_h * 3);
    vh_status st = VH_OK;
    if (!resized || !cropped || !stretched) {
        st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "camera preprocessing: out of memory");
        goto done;
    }
    if ((st = vh_resize_bicubic_rgb8(rgb, w, h, stride, resized, (uint32_t)new_w, (uint32_t)new_h, err))) goto done;
    for (size_t y = 0; y < fh; y++)
        for (size_t x = 0; x < fw; x++) {
            const int64_t sy = (int64_t)y + crop_h, sx = (int64_t)x + crop_w;
            const int inside = sy >= 0 && sy < new_h && sx >= 0 && sx < new_w;
            for (int k = 0; k < 3; k++)
                cropped[(y * fw + x) * 3 + k] = inside ? (float)resized[((size_t)sy * (size_t)new_w + (size_t)sx) * 3 + k] : 0.0f;
        }
    vh_resize_bilinear_f32(cropped, (int64_t)fw, (int64_t)fh, 3, stretched, c->out_w, c->out_h);
    const size_t plane = (size_t)c->out_w * c->out_h;
    for (int k = 0; k < 3; k++) {
        const float mean = (float)c->mean[k], inv_std = (float)(1.0 / c->std[k]);
        for (size_t i = 0; i < plane; i++) planes[k * plane + i] = (stretched[i * 3 + k] - mean) * inv_std;
    }
    if (intrinsic) {
        /* ida in float32 (torch) applied to K in float64; then the stretch's scales */
        const double r = (double)(float)resize, tx = (double)(float)-crop_w, ty = (double)(float)-crop_h;
        double k[9];
        memcpy(k, intrinsic, sizeof k);
        for (int j = 0; j < 3; j++) {
            intrinsic[0 * 3 + j] = r * k[0 * 3 + j] + tx * k[2 * 3 + j];
            intrinsic[1 * 3 + j] = r * k[1 * 3 + j] + ty * k[2 * 3 + j];
        }
        const double w_scale = (double)c->out_w / (double)fw, h_scale = (double)c->out_h / (double)fh;
        /* ResizeMultiview3D scales fx, cx and fy, cy only */
        intrinsic[0] *= w_scale, intrinsic[2] *= w_scale, intrinsic[4] *= h_scale, intrinsic[5] *= h_scale;
    }
done:
    free(resized);
    free(cropped);
    free(stretched);
    return st;
}
