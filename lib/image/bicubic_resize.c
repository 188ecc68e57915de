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

/* The weights of one axis, in one of two layouts.
 *
 * Plain: output sample i is the sum over k < count[i] of source[first[i] + k] * weights[i * stride
 * + k], in fixed point.
 *
 * RGB pairs (the horizontal axis, for the AVX2 and NEON code, where the row is wide enough): every output
 * reads the same run of count[i] = a multiple of 4 pixels from first[i], the kernel's taps padded
 * with zero weights on either side (a product with a zero weight is exact, so this changes no
 * result), and first[i] moved left where the run would pass the row's end. Each weight w is split
 * as hi * 2^11 + lo, lo in 0..2047, which both fit int16, so that the exact sum is
 * 2^11 * sum(pixel * hi) + sum(pixel * lo), each sum made with 16-bit multiplies that add pairs of
 * products (pmaddwd; NEON: widening multiply-accumulates, the pairs added at the end). For pixels 4s..4s+3 of the run of output i, pairs[i * stride + 32 * s ...]
 * holds 16 int16 for hi then 16 for lo, each {w0 w1 w0 w1 w0 w1 0 0 w2 w3 w2 w3 w2 w3 0 0} to meet
 * the pixels' bytes arranged as {R0 R1 G0 G1 B0 B1 0 0 R2 R3 G2 G3 B2 B3 0 0}. The vector loop loads
 * 16 bytes for every 4 pixels (12 bytes), 4 bytes past the run: outputs from n_vector on, whose
 * load would pass the row's end, are done with scalar code instead.
 */
typedef struct resample_axis {
    uint32_t out_size;
    uint32_t stride;   /* weights (int32) or pairs (int16) stored per output sample */
    uint32_t *first;   /* [out_size] first source sample read */
    uint32_t *count;   /* [out_size] number of source samples read, >= 1 */
    int32_t *weights;  /* [out_size][stride] WEIGHT_BITS fraction bits; NULL in the pairs layout */
    int16_t *pairs;    /* [out_size][stride] the RGB pairs layout, or NULL */
    uint32_t n_vector; /* pairs layout: outputs 0..n_vector-1 can read 4 bytes past their run */
} resample_axis;

/* The split of a weight in the RGB pairs layout. */
#define LO_BITS 11

/* Where the hi part of the weight for pixel k of the run is, in the RGB pairs layout (channel
 * c's copy at [2 * c], the lo part's 16 further on): step k / 4, the 128-bit half (k % 4) / 2,
 * the element k % 2 of the pair. */
static inline int16_t *pair_weight(int16_t *pairs, uint32_t k)
{
    return pairs + 32 * (size_t)(k / 4) + 8 * (k % 4 / 2) + k % 2;
}

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
    free(axis->first); /* count shares its block */
    free(axis->weights);
    free(axis->pairs);
    memset(axis, 0, sizeof *axis);
}

/* Compute the weights for resampling in_size samples to out_size (Pillow's precompute_coeffs
 * followed by normalize_coeffs_8bpc). When shrinking, the kernel is stretched by the shrink
 * factor so that it averages over every source sample (antialiasing). rgb_pairs asks for the RGB
 * pairs layout, which is used if the row is wide enough for it. */
static vh_status axis_init(resample_axis *axis, uint32_t in_size, uint32_t out_size,
                           bool rgb_pairs, const char *name, vh_error *err)
{
    memset(axis, 0, sizeof *axis);
    /* Pillow computes (double)(float)(in1 - in0) / out_size with the box 0..in_size: the float is
     * exact for in_size <= 2^24. */
    double scale = (double)in_size / out_size;
    double filter_scale = scale < 1.0 ? 1.0 : scale;
    double support = BICUBIC_SUPPORT * filter_scale;
    double inverse_filter_scale = 1.0 / filter_scale;
    uint32_t taps = (uint32_t)ceil(support) * 2 + 1; /* <= 2 * 32768 + 1 for in_size <= 16384 */

    /* first[] and count[] in one block. */
    axis->first = malloc(2 * (size_t)out_size * sizeof *axis->first);
    if (!axis->first)
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "resize: out of memory for %s bounds (%u)",
                            name, out_size);
    axis->count = axis->first + out_size;
    axis->out_size = out_size;

    /* Every output's bounds first, to size the table by the most taps any output uses. */
    uint32_t max_count = 1;
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
            axis_free(axis);
            return vh_error_set(err, VH_ERR_INTERNAL,
                                "resize: %s bounds %lld..%lld for output %u of %u->%u", name,
                                (long long)lo, (long long)hi, i, in_size, out_size);
        }
        axis->first[i] = (uint32_t)lo;
        axis->count[i] = n;
        if (n > max_count)
            max_count = n;
    }

    uint32_t run = (max_count + 3) / 4 * 4;
    rgb_pairs = rgb_pairs && run <= in_size;
    axis->stride = rgb_pairs ? 8 * run : max_count; /* <= 8 * 16384 */
    double *unit = malloc(max_count * sizeof *unit); /* one output's weights before fixed point */
    if (rgb_pairs)
        axis->pairs = calloc((size_t)out_size * axis->stride, sizeof *axis->pairs);
    else
        axis->weights = calloc((size_t)out_size * axis->stride, sizeof *axis->weights);
    if (!unit || (!axis->pairs && !axis->weights)) {
        free(unit);
        axis_free(axis);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY,
                            "resize: out of memory for %s weights (%u x %u)", name, out_size,
                            max_count);
    }

    for (uint32_t i = 0; i < out_size; i++) {
        double center = (i + 0.5) * scale;
        uint32_t lo = axis->first[i], n = axis->count[i];
        double sum = 0.0;
        for (uint32_t k = 0; k < n; k++) {
            double x = (double)((int64_t)k + lo) - center + 0.5;
            double w = bicubic_kernel(x * inverse_filter_scale);
            unit[k] = w;
            sum += w;
        }
        if (!rgb_pairs) {
            int32_t *fixed = axis->weights + (size_t)i * axis->stride;
            for (uint32_t k = 0; k < n; k++)
                fixed[k] = weight_to_fixed(sum != 0.0 ? unit[k] / sum : unit[k]);
            continue;
        }
        /* Start the run at lo, or further left where it would pass the row's end. */
        uint32_t start = lo < in_size - run ? lo : in_size - run;
        int16_t *pairs = axis->pairs + (size_t)i * axis->stride;
        for (uint32_t k = 0; k < n; k++) {
            int32_t w = weight_to_fixed(sum != 0.0 ? unit[k] / sum : unit[k]);
            /* |w| <= 2^23, so hi fits int16. >> of a negative number is arithmetic (floor) in GCC
             * and Clang (implementation-defined in C); & takes the two's complement low bits. */
            int16_t w_hi = (int16_t)(w >> LO_BITS), w_lo = (int16_t)(w & ((1 << LO_BITS) - 1));
            int16_t *hi = pair_weight(pairs, lo - start + k);
            for (int c = 0; c < 3; c++) {
                hi[2 * c] = w_hi;
                hi[16 + 2 * c] = w_lo;
            }
        }
        axis->first[i] = start;
        axis->count[i] = run;
        if ((size_t)start * 3 + (size_t)run * 3 + 4 <= (size_t)in_size * 3)
            axis->n_vector = i + 1; /* start never decreases */
    }
    free(unit);
    return VH_OK;
}

/* Sums fit in int32, in any order: the normalised weights of one output sum to 1 with at most
 * 1/8 of negative weight, so any partial sum of pixel * weight products, plus WEIGHT_HALF, lies
 * within 255 * 1.25 * 2^22 + 2^21 < 2^31 of zero. The code below groups the products differently
 * from Pillow (by tap pair, by block of samples); integer sums are exact, so the results are the
 * same bits. */

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* Horizontal pass, scalar: resample rows [row0, row0 + n_rows) of src across, outputs x0 and on,
 * into n_rows rows of out; PAIRS: the weights are in the RGB pairs layout (each weight's two
 * parts joined back), else the plain one. */
static ALWAYS_INLINE void horizontal_scalar(const uint8_t *src, size_t src_stride, uint32_t row0,
                                            uint32_t n_rows, const resample_axis *across, uint32_t x0,
                                            uint8_t *out, size_t out_stride, const int PAIRS)
{
    for (uint32_t y = 0; y < n_rows; y++) {
        const uint8_t *in_row = src + (size_t)(row0 + y) * src_stride;
        uint8_t *out_row = out + (size_t)y * out_stride;
        for (uint32_t x = x0; x < across->out_size; x++) {
            const int32_t *w = PAIRS ? NULL : across->weights + (size_t)x * across->stride;
            int16_t *pairs = PAIRS ? across->pairs + (size_t)x * across->stride : NULL;
            const uint8_t *p = in_row + (size_t)across->first[x] * 3;
            int32_t r = WEIGHT_HALF, g = WEIGHT_HALF, b = WEIGHT_HALF;
            for (uint32_t k = 0; k < across->count[x]; k++) {
                int32_t wk;
                if (PAIRS) {
                    const int16_t *hi = pair_weight(pairs, k);
                    wk = hi[0] * (1 << LO_BITS) + hi[16];
                } else {
                    wk = w[k];
                }
                r += p[3 * k + 0] * wk;
                g += p[3 * k + 1] * wk;
                b += p[3 * k + 2] * wk;
            }
            out_row[3 * x + 0] = fixed_to_u8(r);
            out_row[3 * x + 1] = fixed_to_u8(g);
            out_row[3 * x + 2] = fixed_to_u8(b);
        }
    }
}

/* Output samples of the vertical pass accumulated at once: 2 KiB of int32 on the stack. */
#define VERTICAL_BLOCK 512

/* Vertical pass: resample src (whose first row is source row row0) down, into out. Every
 * channel of a pixel uses the same weights, so a row is treated as width * 3 samples. Taps are
 * the outer loop so that the inner one runs along contiguous rows of a block of samples, which
 * the compiler vectorises. */
static ALWAYS_INLINE void vertical_body(const uint8_t *src, size_t src_stride, uint32_t row0,
                                        uint32_t width, const resample_axis *down, uint8_t *out,
                                        size_t out_stride)
{
    size_t n_samples = (size_t)width * 3;
    int32_t acc[VERTICAL_BLOCK];
    for (uint32_t y = 0; y < down->out_size; y++) {
        const int32_t *w = down->weights + (size_t)y * down->stride;
        const uint8_t *in = src + (size_t)(down->first[y] - row0) * src_stride;
        uint8_t *out_row = out + (size_t)y * out_stride;
        uint32_t n = down->count[y];
        for (size_t i0 = 0; i0 < n_samples; i0 += VERTICAL_BLOCK) {
            size_t m = n_samples - i0 < VERTICAL_BLOCK ? n_samples - i0 : VERTICAL_BLOCK;
            const uint8_t *col = in + i0;
            for (size_t j = 0; j < m; j++)
                acc[j] = WEIGHT_HALF + col[j] * w[0];
            for (uint32_t k = 1; k < n; k++) {
                const uint8_t *row = col + (size_t)k * src_stride;
                int32_t wk = w[k];
                for (size_t j = 0; j < m; j++)
                    acc[j] += row[j] * wk;
            }
            for (size_t j = 0; j < m; j++)
                out_row[i0 + j] = fixed_to_u8(acc[j]);
        }
    }
}

static void vertical_portable(const uint8_t *src, size_t src_stride, uint32_t row0,
                              uint32_t width, const resample_axis *down, uint8_t *out,
                              size_t out_stride)
{
    vertical_body(src, src_stride, row0, width, down, out, out_stride);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AVX2_CODE 1
#include <immintrin.h>

/* The vertical pass compiled for AVX2: the baseline (SSE2) has no 32-bit vector multiply. */
__attribute__((target("avx2"))) static void
vertical_avx2(const uint8_t *src, size_t src_stride, uint32_t row0, uint32_t width,
              const resample_axis *down, uint8_t *out, size_t out_stride)
{
    vertical_body(src, src_stride, row0, width, down, out, out_stride);
}

/* Horizontal pass from the RGB pairs layout, outputs 0..n_vector-1. Per 4 pixels: one 16-byte
 * load (into both 128-bit halves), one shuffle to int16 {R0 R1 G0 G1 B0 B1 0 0 | R2 R3 ...}, and
 * two pmaddwd, for the hi and the lo parts. The sums wrap modulo 2^32 (vector adds and shifts),
 * and the true sum fits int32, so 2^11 * hi + lo is exact even if a part alone would not fit. */
__attribute__((target("avx2"))) static void
horizontal_pairs_avx2(const uint8_t *src, size_t src_stride, uint32_t row0, uint32_t n_rows,
                      const resample_axis *across, uint8_t *out, size_t out_stride)
{
    const __m256i spread = _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,
                                            6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1,
                                            -1);
    const __m128i half = _mm_set1_epi32(WEIGHT_HALF);
    const uint32_t steps = across->count[0] / 4; /* the same for every output */
    for (uint32_t y = 0; y < n_rows; y++) {
        const uint8_t *in_row = src + (size_t)(row0 + y) * src_stride;
        uint8_t *out_row = out + (size_t)y * out_stride;
        for (uint32_t x = 0; x < across->n_vector; x++) {
            const __m256i *w = (const __m256i *)(across->pairs + (size_t)x * across->stride);
            const uint8_t *p = in_row + (size_t)across->first[x] * 3;
            __m256i hi = _mm256_setzero_si256(), lo = _mm256_setzero_si256();
            for (uint32_t s = 0; s < steps; s++, p += 12, w += 2) {
                __m256i px = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
                px = _mm256_shuffle_epi8(px, spread);
                hi = _mm256_add_epi32(hi, _mm256_madd_epi16(px, _mm256_loadu_si256(w)));
                lo = _mm256_add_epi32(lo, _mm256_madd_epi16(px, _mm256_loadu_si256(w + 1)));
            }
            __m256i sum = _mm256_add_epi32(_mm256_slli_epi32(hi, LO_BITS), lo);
            __m128i rgb = _mm_add_epi32(_mm256_castsi256_si128(sum),
                                        _mm256_extracti128_si256(sum, 1));
            /* fixed_to_u8: arithmetic shift, then saturation to int16 and to uint8 clips to 0..255 */
            rgb = _mm_srai_epi32(_mm_add_epi32(rgb, half), WEIGHT_BITS);
            rgb = _mm_packus_epi16(_mm_packs_epi32(rgb, rgb), rgb);
            uint32_t bytes = (uint32_t)_mm_cvtsi128_si32(rgb);
            memcpy(out_row + 3 * (size_t)x, &bytes, 3);
        }
    }
}
#endif

#if defined(__aarch64__)
#define HAVE_NEON_CODE 1
#include <arm_neon.h>

/* Horizontal pass from the RGB pairs layout (the AVX2 code's, above), outputs 0..n_vector-1. Per
 * 4 pixels: one 16-byte load, two table lookups to the int16 halves {R0 R1 G0 G1 B0 B1 0 0} and
 * {R2 R3 G2 G3 B2 B3 0 0} (index 0xff gives 0), and widening multiply-accumulates (smlal) of each
 * with its weights into int32 lanes {R G R G} {B B 0 0} per part; the lane pairs are added at the
 * end. Sums wrap modulo 2^32 like the AVX2 code's, and the true sum fits int32: the same bits. The
 * vertical pass needs nothing of its own: NEON has the 32-bit multiply and the compiler vectorises
 * the portable loop. */
static void horizontal_pairs_neon(const uint8_t *src, size_t src_stride, uint32_t row0,
                                  uint32_t n_rows, const resample_axis *across, uint8_t *out,
                                  size_t out_stride)
{
    static const uint8_t spread_first[16] = {0, 0xff, 3, 0xff, 1, 0xff, 4, 0xff,
                                             2, 0xff, 5, 0xff, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t spread_second[16] = {6, 0xff, 9, 0xff, 7, 0xff, 10, 0xff,
                                              8, 0xff, 11, 0xff, 0xff, 0xff, 0xff, 0xff};
    const uint8x16_t first = vld1q_u8(spread_first), second = vld1q_u8(spread_second);
    const uint32_t steps = across->count[0] / 4; /* the same for every output */
    for (uint32_t y = 0; y < n_rows; y++) {
        const uint8_t *in_row = src + (size_t)(row0 + y) * src_stride;
        uint8_t *out_row = out + (size_t)y * out_stride;
        for (uint32_t x = 0; x < across->n_vector; x++) {
            const int16_t *w = across->pairs + (size_t)x * across->stride;
            const uint8_t *p = in_row + (size_t)across->first[x] * 3;
            int32x4_t hi_rg = vdupq_n_s32(0), hi_b = vdupq_n_s32(0);
            int32x4_t lo_rg = vdupq_n_s32(0), lo_b = vdupq_n_s32(0);
            for (uint32_t s = 0; s < steps; s++, p += 12, w += 32) {
                uint8x16_t px = vld1q_u8(p);
                int16x8_t a = vreinterpretq_s16_u8(vqtbl1q_u8(px, first));
                int16x8_t b = vreinterpretq_s16_u8(vqtbl1q_u8(px, second));
                int16x8_t w_hi_a = vld1q_s16(w), w_hi_b = vld1q_s16(w + 8);
                int16x8_t w_lo_a = vld1q_s16(w + 16), w_lo_b = vld1q_s16(w + 24);
                hi_rg = vmlal_s16(hi_rg, vget_low_s16(a), vget_low_s16(w_hi_a));
                hi_b = vmlal_high_s16(hi_b, a, w_hi_a);
                hi_rg = vmlal_s16(hi_rg, vget_low_s16(b), vget_low_s16(w_hi_b));
                hi_b = vmlal_high_s16(hi_b, b, w_hi_b);
                lo_rg = vmlal_s16(lo_rg, vget_low_s16(a), vget_low_s16(w_lo_a));
                lo_b = vmlal_high_s16(lo_b, a, w_lo_a);
                lo_rg = vmlal_s16(lo_rg, vget_low_s16(b), vget_low_s16(w_lo_b));
                lo_b = vmlal_high_s16(lo_b, b, w_lo_b);
            }
            /* {R G B 0} per part; shifts and adds on unsigned lanes wrap as the AVX2 code's do */
            uint32x4_t hi = vreinterpretq_u32_s32(vpaddq_s32(hi_rg, hi_b));
            uint32x4_t lo = vreinterpretq_u32_s32(vpaddq_s32(lo_rg, lo_b));
            uint32x4_t sum = vaddq_u32(vaddq_u32(vshlq_n_u32(hi, LO_BITS), lo), vdupq_n_u32(WEIGHT_HALF));
            int32_t rgb[4];
            vst1q_s32(rgb, vreinterpretq_s32_u32(sum));
            for (int c = 0; c < 3; c++)
                out_row[3 * (size_t)x + c] = fixed_to_u8(rgb[c]);
        }
    }
}
#endif

bool vh_resize_code_available(vh_resize_code code)
{
    switch (code) {
    case VH_RESIZE_CODE_BEST:
    case VH_RESIZE_CODE_PORTABLE:
        return true;
    case VH_RESIZE_CODE_AVX2:
#ifdef HAVE_AVX2_CODE
        return __builtin_cpu_supports("avx2");
#else
        return false;
#endif
    case VH_RESIZE_CODE_NEON:
#ifdef HAVE_NEON_CODE
        return true; /* Advanced SIMD is part of the aarch64 base architecture */
#else
        return false;
#endif
    }
    return false;
}

static void resample_horizontal(const uint8_t *src, size_t src_stride, uint32_t row0,
                                uint32_t n_rows, const resample_axis *across, uint8_t *out,
                                size_t out_stride)
{
    if (!across->pairs) {
        horizontal_scalar(src, src_stride, row0, n_rows, across, 0, out, out_stride, 0);
        return;
    }
#if defined(HAVE_AVX2_CODE)
    horizontal_pairs_avx2(src, src_stride, row0, n_rows, across, out, out_stride);
#elif defined(HAVE_NEON_CODE)
    horizontal_pairs_neon(src, src_stride, row0, n_rows, across, out, out_stride);
#endif
    /* the outputs at the row's end that the vector loop leaves (the pairs layout is the vector
     * code's: only AVX2 or NEON asks for it) */
    horizontal_scalar(src, src_stride, row0, n_rows, across, across->n_vector, out, out_stride, 1);
}

static void resample_vertical(const uint8_t *src, size_t src_stride, uint32_t row0,
                              uint32_t width, const resample_axis *down, uint8_t *out,
                              size_t out_stride, vh_resize_code code)
{
#ifdef HAVE_AVX2_CODE
    if (code == VH_RESIZE_CODE_AVX2) {
        vertical_avx2(src, src_stride, row0, width, down, out, out_stride);
        return;
    }
#endif
    (void)code;
    vertical_portable(src, src_stride, row0, width, down, out, out_stride);
}

/* Output rows [y0, y1) of the dst_w x dst_h resize into dst (its row 0 is output row y0): each
 * output row depends on its own source rows only, so a part is the whole's rows, bit for bit. */
static vh_status resize_rows(const uint8_t *src, uint32_t src_w, uint32_t src_h, size_t src_stride, uint8_t *dst,
                             uint32_t dst_w, uint32_t dst_h, uint32_t y0, uint32_t y1, vh_resize_code code,
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
    if (y0 >= y1 || y1 > dst_h)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "resize: output rows %u..%u of %u", y0, y1, dst_h);
    size_t src_row_bytes = (size_t)src_w * 3; /* sides are bounded: no overflow */
    size_t dst_stride = (size_t)dst_w * 3;
    if (src_stride == 0)
        src_stride = src_row_bytes;
    if (src_stride < src_row_bytes)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT,
                            "resize: source stride %zu is less than width %u * 3", src_stride,
                            src_w);
    if (code == VH_RESIZE_CODE_BEST)
        code = vh_resize_code_available(VH_RESIZE_CODE_AVX2)   ? VH_RESIZE_CODE_AVX2
               : vh_resize_code_available(VH_RESIZE_CODE_NEON) ? VH_RESIZE_CODE_NEON
                                                               : VH_RESIZE_CODE_PORTABLE;
    else if (!vh_resize_code_available(code))
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT,
                            "resize: code path %d is not available on this CPU", (int)code);

    bool need_horizontal = dst_w != src_w;
    bool need_vertical = dst_h != src_h;
    if (!need_horizontal && !need_vertical) {
        for (uint32_t y = y0; y < y1; y++)
            memcpy(dst + (size_t)(y - y0) * dst_stride, src + (size_t)y * src_stride, dst_stride);
        return VH_OK;
    }

    resample_axis across = {0}, down = {0};
    uint8_t *between = NULL; /* the horizontal pass's output, when a vertical pass follows */
    vh_status status = VH_OK;
    if (need_horizontal &&
        (status = axis_init(&across, src_w, dst_w,
                            code == VH_RESIZE_CODE_AVX2 || code == VH_RESIZE_CODE_NEON, "horizontal",
                                 err)) != VH_OK)
        goto done;
    if (need_vertical &&
        (status = axis_init(&down, src_h, dst_h, false, "vertical", err)) != VH_OK)
        goto done;

    /* the vertical axis of rows y0..y1-1 only: a view into the whole's */
    resample_axis part = down;
    if (need_vertical) {
        part.out_size = y1 - y0;
        part.first += y0;
        part.count += y0;
        part.weights += (size_t)y0 * down.stride;
    }
    if (need_horizontal && need_vertical) {
        /* Only the source rows the vertical pass reads go through the horizontal pass. */
        uint32_t row0 = part.first[0];
        uint32_t row_end = part.first[part.out_size - 1] + part.count[part.out_size - 1];
        size_t between_bytes;
        if (__builtin_mul_overflow(dst_stride, (size_t)(row_end - row0), &between_bytes) ||
            !(between = malloc(between_bytes))) {
            status = vh_error_set(err, VH_ERR_OUT_OF_MEMORY,
                                  "resize: out of memory for a %ux%u intermediate image", dst_w,
                                  row_end - row0);
            goto done;
        }
        resample_horizontal(src, src_stride, row0, row_end - row0, &across, between, dst_stride);
        resample_vertical(between, dst_stride, row0, dst_w, &part, dst, dst_stride, code);
    } else if (need_horizontal) {
        resample_horizontal(src + (size_t)y0 * src_stride, src_stride, 0, y1 - y0, &across, dst, dst_stride);
    } else {
        resample_vertical(src, src_stride, 0, src_w, &part, dst, dst_stride, code);
    }

done:
    free(between);
    axis_free(&across);
    axis_free(&down);
    return status;
}

vh_status vh_resize_bicubic_rgb8_code(const uint8_t *src, uint32_t src_w, uint32_t src_h,
                                      size_t src_stride, uint8_t *dst, uint32_t dst_w,
                                      uint32_t dst_h, vh_resize_code code, vh_error *err)
{
    return resize_rows(src, src_w, src_h, src_stride, dst, dst_w, dst_h, 0, dst_h, code, err);
}

vh_status vh_resize_bicubic_rgb8_rows(const uint8_t *src, uint32_t src_w, uint32_t src_h,
                                      size_t src_stride, uint8_t *dst, uint32_t dst_w,
                                      uint32_t dst_h, uint32_t y0, uint32_t y1, vh_error *err)
{
    return resize_rows(src, src_w, src_h, src_stride, dst, dst_w, dst_h, y0, y1, VH_RESIZE_CODE_BEST, err);
}

vh_status vh_resize_bicubic_rgb8(const uint8_t *src, uint32_t src_w, uint32_t src_h,
                                 size_t src_stride, uint8_t *dst, uint32_t dst_w, uint32_t dst_h,
                                 vh_error *err)
{
    return vh_resize_bicubic_rgb8_code(src, src_w, src_h, src_stride, dst, dst_w, dst_h,
                                       VH_RESIZE_CODE_BEST, err);
}
