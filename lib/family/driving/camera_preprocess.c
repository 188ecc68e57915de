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
    const int64_t fw = c->final_w, fh = c->final_h, ow = c->out_w, oh = c->out_h;
    uint8_t *resized = malloc((size_t)new_w * (size_t)new_h * 3);
    vh_bilinear_tap *cols = malloc(sizeof *cols * (size_t)ow);
    vh_status st = VH_OK;
    if (!resized || !cols) {
        st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "camera preprocessing: out of memory");
        goto done;
    }
    if ((st = vh_resize_bicubic_rgb8(rgb, w, h, stride, resized, (uint32_t)new_w, (uint32_t)new_h, err))) goto done;
    /* The crop (zeros outside the resized image), the bilinear stretch to out_w x out_h and the
     * normalisation in one pass: each stretch tap reads the crop's value where it falls, and every
     * value goes through the float operations of the three steps done apart (the crop's float
     * image, vh_resize_bilinear_f32 over it, then (x - mean) * (1 / std)). */
    for (int64_t x = 0; x < ow; x++) cols[x] = vh_bilinear_tap_of(x, fw, ow);
    float mean[3], inv_std[3];
    for (int k = 0; k < 3; k++) mean[k] = (float)c->mean[k], inv_std[k] = (float)(1.0 / c->std[k]);
    const size_t plane = (size_t)ow * (size_t)oh;
    for (int64_t y = 0; y < oh; y++) {
        const vh_bilinear_tap ty = vh_bilinear_tap_of(y, fh, oh);
        const int64_t r0 = ty.first + crop_h, r1 = (ty.first + 1 < fh ? ty.first + 1 : ty.first) + crop_h;
        const int in0 = r0 >= 0 && r0 < new_h, in1 = r1 >= 0 && r1 < new_h;
        const float b0 = 1.0f - ty.t, b1 = ty.t;
        for (int64_t x = 0; x < ow; x++) {
            const vh_bilinear_tap tx = cols[x];
            const int64_t c0 = tx.first + crop_w, c1 = tx.first + 1 + crop_w;
            const int cin0 = c0 >= 0 && c0 < new_w, cin1 = c1 >= 0 && c1 < new_w;
            const float a0 = 1.0f - tx.t, a1 = tx.t;
            const uint8_t *p00 = resized + ((size_t)(in0 ? r0 : 0) * (size_t)new_w + (size_t)(cin0 ? c0 : 0)) * 3;
            const uint8_t *p01 = resized + ((size_t)(in0 ? r0 : 0) * (size_t)new_w + (size_t)(cin1 ? c1 : 0)) * 3;
            const uint8_t *p10 = resized + ((size_t)(in1 ? r1 : 0) * (size_t)new_w + (size_t)(cin0 ? c0 : 0)) * 3;
            const uint8_t *p11 = resized + ((size_t)(in1 ? r1 : 0) * (size_t)new_w + (size_t)(cin1 ? c1 : 0)) * 3;
            for (int k = 0; k < 3; k++) {
                const float v00 = in0 && cin0 ? (float)p00[k] : 0.0f, v01 = in0 && cin1 ? (float)p01[k] : 0.0f;
                const float v10 = in1 && cin0 ? (float)p10[k] : 0.0f, v11 = in1 && cin1 ? (float)p11[k] : 0.0f;
                const float h0 = tx.single ? v00 : v00 * a0 + v01 * a1, h1 = tx.single ? v10 : v10 * a0 + v11 * a1;
                planes[k * plane + (size_t)(y * ow + x)] = (h0 * b0 + h1 * b1 - mean[k]) * inv_std[k];
            }
        }
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
        const double w_scale = (double)ow / (double)fw, h_scale = (double)oh / (double)fh;
        /* ResizeMultiview3D scales fx, cx and fy, cy only */
        intrinsic[0] *= w_scale, intrinsic[2] *= w_scale, intrinsic[4] *= h_scale, intrinsic[5] *= h_scale;
    }
done:
    free(resized);
    free(cols);
    return st;
}
