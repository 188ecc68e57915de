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

/* A stretch column's taps into a source row: offsets of its two pixels (the zero pixel past
 * the row's end for one outside the resized image) and their weights. */
typedef struct col_tap {
    size_t o0, o1;
    float a0, a1;
    int single;
} col_tap;

/* One source row's horizontal taps, planar [3][ow]: v0 a0 + v1 a1, or v0 alone past an edge
 * (vh_resize_bilinear_f32's operations). */
static void stretch_row(const float *row, const col_tap *cols, int64_t ow, float *restrict dst)
{
    for (int64_t x = 0; x < ow; x++) {
        const col_tap t = cols[x];
        for (int k = 0; k < 3; k++) {
            const float v0 = row[t.o0 + (size_t)k], v1 = row[t.o1 + (size_t)k];
            dst[(size_t)k * (size_t)ow + (size_t)x] = t.single ? v0 : v0 * t.a0 + v1 * t.a1;
        }
    }
}

vh_status vh_camera_preprocess(const vh_camera_prep *c, const uint8_t *rgb, uint32_t w, uint32_t h, size_t stride,
                               float *planes, double intrinsic[9], vh_error *err)
{
    return vh_camera_preprocess_rows(c, rgb, w, h, stride, planes, 0, c ? c->out_h : 0, intrinsic, err);
}

vh_status vh_camera_preprocess_rows(const vh_camera_prep *c, const uint8_t *rgb, uint32_t w, uint32_t h,
                                    size_t stride, float *planes, uint32_t y0, uint32_t y1, double intrinsic[9],
                                    vh_error *err)
{
    if (!c || !rgb || !planes || !w || !h || !c->cam_w || !c->cam_h || !c->final_w || !c->final_h || !c->out_w ||
        !c->out_h)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "camera preprocessing: a NULL or an empty size");
    if (y0 >= y1 || y1 > c->out_h)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "camera preprocessing: output rows %u..%u of %u", y0, y1,
                            c->out_h);
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
    const size_t row_bytes = (size_t)new_w * 3;
    /* the resized image's rows the stretch reads for output rows y0..y1-1 (the taps' rows rise with
     * y): only those are resized (the crop drops the rest; a camera split across threads resizes
     * its part); one row when none is inside, so that the resize still checks the image */
    const vh_bilinear_tap first_tap = vh_bilinear_tap_of(y0, fh, oh), last_tap = vh_bilinear_tap_of(y1 - 1, fh, oh);
    int64_t lo = first_tap.first + crop_h, hi = (last_tap.first + 1 < fh ? last_tap.first + 1 : last_tap.first) + crop_h + 1;
    if (lo < 0) lo = 0;
    if (hi > new_h) hi = new_h;
    if (lo >= hi) lo = 0, hi = 1;
    uint8_t *resized = malloc(row_bytes * (size_t)(hi - lo));
    /* one source row in float and a zero pixel past its end, where the crop's outside taps read */
    float *src_row = malloc(sizeof *src_row * (row_bytes + 3));
    col_tap *cols = malloc(sizeof *cols * (size_t)ow);
    /* two source rows' horizontal taps, planar [3][ow] each */
    float *hrows = malloc(sizeof *hrows * 6 * (size_t)ow);
    vh_status st = VH_OK;
    if (!resized || !src_row || !cols || !hrows) {
        st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "camera preprocessing: out of memory");
        goto done;
    }
    if ((st = vh_resize_bicubic_rgb8_rows(rgb, w, h, stride, resized, (uint32_t)new_w, (uint32_t)new_h, (uint32_t)lo,
                                          (uint32_t)hi, err)))
        goto done;
    /* The crop (zeros outside the resized image), the bilinear stretch to out_w x out_h and the
     * normalisation: every value goes through the float operations of the three steps done apart
     * (the crop's float image, vh_resize_bilinear_f32 over it, then (x - mean) * (1 / std)). The
     * horizontal taps depend on the source row alone, so each row's are done once and kept while
     * the output rows after it still read it; the vertical blend is then contiguous per channel. */
    for (int64_t x = 0; x < ow; x++) {
        const vh_bilinear_tap tx = vh_bilinear_tap_of(x, fw, ow);
        const int64_t c0 = tx.first + crop_w, c1 = tx.first + 1 + crop_w;
        cols[x] = (col_tap){.o0 = c0 >= 0 && c0 < new_w ? (size_t)c0 * 3 : row_bytes,
                            .o1 = c1 >= 0 && c1 < new_w ? (size_t)c1 * 3 : row_bytes,
                            .a0 = 1.0f - tx.t, .a1 = tx.t, .single = tx.single};
    }
    src_row[row_bytes] = src_row[row_bytes + 1] = src_row[row_bytes + 2] = 0.0f;
    float mean[3], inv_std[3];
    for (int k = 0; k < 3; k++) mean[k] = (float)c->mean[k], inv_std[k] = (float)(1.0 / c->std[k]);
    const size_t plane = (size_t)ow * (size_t)oh;
    /* the source row each slot holds: -1 for a row outside the resized image (all alike), -2 none */
    int64_t held[2] = {-2, -2};
    for (int64_t y = y0; y < y1; y++) {
        const vh_bilinear_tap ty = vh_bilinear_tap_of(y, fh, oh);
        const int64_t r0 = ty.first + crop_h, r1 = (ty.first + 1 < fh ? ty.first + 1 : ty.first) + crop_h;
        const int64_t want[2] = {r0 >= 0 && r0 < new_h ? r0 : -1, r1 >= 0 && r1 < new_h ? r1 : -1};
        int slot[2];
        for (int i = 0; i < 2; i++) slot[i] = held[0] == want[i] ? 0 : held[1] == want[i] ? 1 : -1;
        for (int i = 0; i < 2; i++) {
            if (slot[i] >= 0) continue;
            /* the slot the other tap does not read */
            const int s = slot[1 - i] == 0 ? 1 : 0;
            const uint8_t *in = resized + (size_t)(want[i] >= 0 ? want[i] - lo : 0) * row_bytes;
            for (size_t j = 0; j < row_bytes; j++) src_row[j] = want[i] >= 0 ? (float)in[j] : 0.0f;
            stretch_row(src_row, cols, ow, hrows + (size_t)s * 3 * (size_t)ow);
            held[s] = want[i], slot[i] = s;
            if (want[1 - i] == want[i]) slot[1 - i] = s;
        }
        const float b0 = 1.0f - ty.t, b1 = ty.t;
        for (int k = 0; k < 3; k++) {
            const float *restrict h0 = hrows + ((size_t)slot[0] * 3 + (size_t)k) * (size_t)ow;
            const float *restrict h1 = hrows + ((size_t)slot[1] * 3 + (size_t)k) * (size_t)ow;
            float *restrict out = planes + k * plane + (size_t)y * (size_t)ow;
            const float m = mean[k], s = inv_std[k];
            for (int64_t x = 0; x < ow; x++) out[x] = (h0[x] * b0 + h1[x] * b1 - m) * s;
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
    free(src_row);
    free(cols);
    free(hrows);
    return st;
}
