/* Pillow-exact bicubic resizing of RGB8 images (see bicubic_resize.h).
 *
 * Written from a reading of Pillow 9.4's src/libImaging/Resample.c; every floating-point
 * expression below keeps Pillow's operand order, because bit-exact output depends on it.
 * The project compiles with -std=c11, under which GCC does not contract a*b+c into a fused
 * multiply-add (-ffp-contract=off), as bit-exactness also requires.
 */
#include "image/bicubic_resize.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Fixed-point weights have this many fraction bits: 32 bits, less 8 for the pixel value, less 2
 * of headroom because the kernel's negative lobes let a partial sum leave 0..255
 * (Pillow's PRECISION_BITS). */
#define WEIGHT_BITS (32 - 8 - 2)
#define WEIGHT_HALF (1 << (WEIGHT_BITS - 1))

/* Keys' cubic convolution kernel with a = -0.5, nonzero on (-2, 2). */
#define BICUBIC_A (-0.5)
#define BICUBIC_SUPPORT 2.0

/* The weights of one axis: output sample i is the sum over k < count[i] of
 * source[first[i] + k] * weights[i * taps + k], in fixed point. */
typedef struct resample_axis {
    uint32_t out_size;
    uint32_t taps;     /* weights stored per output sample: the most any one can use */
    uint32_t *first;   /* [out_size] first source sample read */
    uint32_t *count;   /* [out_size] number of source samples read, 1..taps */
    int32_t *weights;  /* [out_size][taps] WEIGHT_BITS fraction bits */
} resample_axis;

static double bicubic_kernel(double x)
{
    if (x < 0.0)
        x = -x;
    if (x < 1.0)
        return ((BICUBIC_A + 2.0) * x - (BICUBIC_A + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * BICUBIC_A;
    return 0.0;
}

/* A weight in [-2, 2] to fixed point, rounding half away from zero as Pillow does. */
static int32_t weight_to_fixed(double w)
{
    double scaled = w * (1 << WEIGHT_BITS);
    return (int32_t)(w < 0 ? -0.5 + scaled : 0.5 + scaled);
}

/* A fixed-point sum (with WEIGHT_HALF already added) to a pixel value, clipped to 0..255. */
static inline uint8_t fixed_to_u8(int32_t sum)
{
    if (sum < 0)
        return 0;
    sum >>= WEIGHT_BITS;
    return sum > 255 ? 255 : (uint8_t)sum;
}

static void axis_free(resample_axis *axis)
{
    free(axis->first);
    free(axis->count);
    free(axis->weights);
    memset(axis, 0, sizeof *axis);
}

/* Compute the weights for resampling in_size samples to out_size (Pillow's precompute_coeffs
 * followed by normalize_coeffs_8bpc). When shrinking, the kernel is stretched by the shrink
 * factor so that it averages over every source sample (antialiasing). */
static vh_status axis_init(resample_axis *axis, uint32_t in_size, uint32_t out_size,
                           const char *name, vh_error *err)
{
    memset(axis, 0, sizeof *axis);
    /* Pillow computes (double)(float)(in1 - in0) / out_size with the box 0..in_size: the float is
     * exact for in_size <= 2^24. */
    double scale = (double)in_size / out_size;
    double filter_scale = scale < 1.0 ? 1.0 : scale;
    double support = BICUBIC_SUPPORT * filter_scale;
    double inverse_filter_scale = 1.0 / filter_scale;
    uint32_t taps = (uint32_t)ceil(support) * 2 + 1; /* <= 2 * 32768 + 1 for in_size <= 16384 */

    size_t n_weights;
    if (__builtin_mul_overflow((size_t)out_size, (size_t)taps, &n_weights))
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "resize: %s weight table %u x %u too large",
                            name, out_size, taps);
    double *unit = malloc(taps * sizeof *unit); /* one output's weights before fixed point */
    axis->first = malloc(out_size * sizeof *axis->first);
    axis->count = malloc(out_size * sizeof *axis->count);
    axis->weights = calloc(n_weights, sizeof *axis->weights);
    if (!unit || !axis->first || !axis->count || !axis->weights) {
        free(unit);
        axis_free(axis);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY,
                            "resize: out of memory for %s weights (%u x %u)", name, out_size, taps);
    }
    axis->out_size = out_size;
    axis->taps = taps;

    for (uint32_t i = 0; i < out_size; i++) {
        double center = (i + 0.5) * scale;
        /* Bounds rounded as Pillow does: +0.5 then truncation toward zero. */
        int64_t lo = (int64_t)(center - support + 0.5);
        int64_t hi = (int64_t)(center + support + 0.5);
        if (lo < 0)
            lo = 0;
        if (hi > (int64_t)in_size)
            hi = in_size;
        uint32_t n = (uint32_t)(hi - lo);
        if (hi <= lo || n > taps) { /* impossible: center lies inside 0..in_size */
            free(unit);
            axis_free(axis);
            return vh_error_set(err, VH_ERR_INTERNAL,
                                "resize: %s bounds %lld..%lld for output %u of %u->%u", name,
                                (long long)lo, (long long)hi, i, in_size, out_size);
        }
        double sum = 0.0;
        for (uint32_t k = 0; k < n; k++) {
            double x = (double)((int64_t)k + lo) - center + 0.5;
            double w = bicubic_kernel(x * inverse_filter_scale);
            unit[k] = w;
            sum += w;
        }
        int32_t *fixed = axis->weights + (size_t)i * taps;
        for (uint32_t k = 0; k < n; k++)
            fixed[k] = weight_to_fixed(sum != 0.0 ? unit[k] / sum : unit[k]);
        axis->first[i] = (uint32_t)lo;
        axis->count[i] = n;
    }
    free(unit);
    return VH_OK;
}

/* Horizontal pass: resample rows [row0, row0 + n_rows) of src across, into n_rows rows of out.
 * Sums fit in int32: the normalised weights of one output sum to 1 with at most 1/8 of negative
 * weight, so |sum| < 255 * 1.25 * 2^22 < 2^31. */
static void resample_horizontal(const uint8_t *src, size_t src_stride, uint32_t row0,
                                uint32_t n_rows, const resample_axis *across, uint8_t *out,
                                size_t out_stride)
{
    for (uint32_t y = 0; y < n_rows; y++) {
        const uint8_t *in_row = src + (size_t)(row0 + y) * src_stride;
        uint8_t *out_row = out + (size_t)y * out_stride;
        for (uint32_t x = 0; x < across->out_size; x++) {
            const int32_t *w = across->weights + (size_t)x * across->taps;
            const uint8_t *p = in_row + (size_t)across->first[x] * 3;
            int32_t r = WEIGHT_HALF, g = WEIGHT_HALF, b = WEIGHT_HALF;
            for (uint32_t k = 0; k < across->count[x]; k++) {
                r += p[3 * k + 0] * w[k];
                g += p[3 * k + 1] * w[k];
                b += p[3 * k + 2] * w[k];
            }
            out_row[3 * x + 0] = fixed_to_u8(r);
            out_row[3 * x + 1] = fixed_to_u8(g);
            out_row[3 * x + 2] = fixed_to_u8(b);
        }
    }
}

/* Vertical pass: resample src (whose first row is source row row0) down, into out. Every
 * channel of a pixel uses the same weights, so a row is treated as width * 3 samples. */
static void resample_vertical(const uint8_t *src, size_t src_stride, uint32_t row0,
                              uint32_t width, const resample_axis *down, uint8_t *out,
                              size_t out_stride)
{
    size_t n_samples = (size_t)width * 3;
    for (uint32_t y = 0; y < down->out_size; y++) {
        const int32_t *w = down->weights + (size_t)y * down->taps;
        const uint8_t *in = src + (size_t)(down->first[y] - row0) * src_stride;
        uint8_t *out_row = out + (size_t)y * out_stride;
        for (size_t i = 0; i < n_samples; i++) {
            int32_t sum = WEIGHT_HALF;
            for (uint32_t k = 0; k < down->count[y]; k++)
                sum += in[(size_t)k * src_stride + i] * w[k];
            out_row[i] = fixed_to_u8(sum);
        }
    }
}

vh_status vh_resize_bicubic_rgb8(const uint8_t *src, uint32_t src_w, uint32_t src_h,
                                 size_t src_stride, uint8_t *dst, uint32_t dst_w, uint32_t dst_h,
                                 vh_error *err)
{
    if (!src || !dst)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "resize: %s is NULL",
                            !src ? "source" : "destination");
    if (src_w < 1 || src_h < 1 || src_w > VH_RESIZE_MAX_SIDE || src_h > VH_RESIZE_MAX_SIDE ||
        dst_w < 1 || dst_h < 1 || dst_w > VH_RESIZE_MAX_SIDE || dst_h > VH_RESIZE_MAX_SIDE)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT,
                            "resize: %ux%u -> %ux%u: each side must be 1..%u", src_w, src_h, dst_w,
                            dst_h, VH_RESIZE_MAX_SIDE);
    size_t src_row_bytes = (size_t)src_w * 3; /* sides are bounded: no overflow */
    size_t dst_stride = (size_t)dst_w * 3;
    if (src_stride == 0)
        src_stride = src_row_bytes;
    if (src_stride < src_row_bytes)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT,
                            "resize: source stride %zu is less than width %u * 3", src_stride,
                            src_w);

    bool need_horizontal = dst_w != src_w;
    bool need_vertical = dst_h != src_h;
    if (!need_horizontal && !need_vertical) {
        for (uint32_t y = 0; y < src_h; y++)
            memcpy(dst + (size_t)y * dst_stride, src + (size_t)y * src_stride, dst_stride);
        return VH_OK;
    }

    resample_axis across = {0}, down = {0};
    uint8_t *between = NULL; /* the horizontal pass's output, when a vertical pass follows */
    vh_status status = VH_OK;
    if (need_horizontal && (status = axis_init(&across, src_w, dst_w, "horizontal", err)) != VH_OK)
        goto done;
    if (need_vertical && (status = axis_init(&down, src_h, dst_h, "vertical", err)) != VH_OK)
        goto done;

    if (need_horizontal && need_vertical) {
        /* Only the source rows the vertical pass reads go through the horizontal pass. */
        uint32_t row0 = down.first[0];
        uint32_t row_end = down.first[dst_h - 1] + down.count[dst_h - 1];
        size_t between_bytes;
        if (__builtin_mul_overflow(dst_stride, (size_t)(row_end - row0), &between_bytes) ||
            !(between = malloc(between_bytes))) {
            status = vh_error_set(err, VH_ERR_OUT_OF_MEMORY,
                                  "resize: out of memory for a %ux%u intermediate image", dst_w,
                                  row_end - row0);
            goto done;
        }
        resample_horizontal(src, src_stride, row0, row_end - row0, &across, between, dst_stride);
        resample_vertical(between, dst_stride, row0, dst_w, &down, dst, dst_stride);
    } else if (need_horizontal) {
        resample_horizontal(src, src_stride, 0, src_h, &across, dst, dst_stride);
    } else {
        resample_vertical(src, src_stride, 0, src_w, &down, dst, dst_stride);
    }

done:
    free(between);
    axis_free(&across);
    axis_free(&down);
    return status;
}
