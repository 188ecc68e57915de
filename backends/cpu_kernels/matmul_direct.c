/*
 * The direct GEMM: y[r, o] = dot(x[r, :], W[o, :]) (+ bias[o]) with W in F32, F16 or BF16,
 * converted to fp32 in registers as it is read (no conversion pass, no scratch). matmul.c uses it
 * for few rows (decode: the cost is streaming W once) and, where it beats OpenBLAS, for all rows.
 *
 * Every variant (AVX-512, AVX2, portable C) computes each dot product in the same canonical
 * order, so they give identical bits (see kernels_internal.h):
 *   acc[j] (j < 16) = fma(x[k], w[k], acc[j]) over k = j, j+16, j+32, ...; a final partial block
 *   is padded with zeros (fma(0, 0, a) == a); then sum = ((acc[j] + acc[j+8]) pairwise down to
 *   one value: j+4, j+2, j+1), then + bias.
 * AVX-512 keeps one 16-lane register per accumulator; AVX2 two 8-lane halves; NEON four 4-lane
 * quarters; C an array.
 *
 * Register tiles: MR rows of x times NR rows of W, with MR * NR accumulators live over the whole
 * k loop, so each converted W vector is used MR times and each x vector NR times (AVX-512 4 x 4,
 * AVX2 2 x 2, NEON 2 x 2, C 4 x 1). Cache blocking around the tiles is matmul.c's job.
 */
#include <math.h>
#include <string.h>

#include "kernels_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define VHK_X86 1
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

#define LANES 16

static inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Copy the last, partial block of a W row (count < 16 elements from k) into a zeroed buffer that
 * can be read as a full block. */
static inline void pad_w_block(const char *w_row, int64_t esize, int64_t k, int64_t count,
                               unsigned char buf[LANES * 4])
{
    memset(buf, 0, LANES * 4);
    memcpy(buf, w_row + k * esize, (size_t)(count * esize));
}

static inline void pad_x_block(const float *x, int64_t k, int64_t count, float buf[LANES])
{
    memset(buf, 0, LANES * sizeof(float));
    memcpy(buf, x + k, (size_t)count * sizeof(float));
}

/* ------------------------------------------------------------------------------------------------
 * Portable C.
 */
#define GENERIC_MR 4

static float reduce_lanes(const float a[LANES])
{
    float s8[8], s4[4];
    for (int j = 0; j < 8; j++) s8[j] = a[j] + a[j + 8];
    for (int j = 0; j < 4; j++) s4[j] = s8[j] + s8[j + 4];
    float s0 = s4[0] + s4[2], s1 = s4[1] + s4[3];
    return s0 + s1;
}

/* 16 weights from k (count of them real, the rest zero) as fp32. */
static void load_w_generic(const char *w_row, vh_dtype dtype, int64_t k, int64_t count,
                           float out[LANES])
{
    for (int64_t j = 0; j < LANES; j++) {
        if (j >= count) {
            out[j] = 0.0f;
        } else if (dtype == VH_DTYPE_F32) {
            memcpy(&out[j], w_row + (k + j) * 4, 4);
        } else {
            uint16_t h;
            memcpy(&h, w_row + (k + j) * 2, 2);
            out[j] = dtype == VH_DTYPE_BF16 ? vh_bf16_to_f32(h) : vh_f16_to_f32(h);
        }
    }
}

static void gemm_direct_generic(const vhk_gemm_direct *g, int64_t o_begin, int64_t o_end)
{
    int64_t esize = vhk_dtype_size(g->dtype);
    for (int64_t o = o_begin; o < o_end; o++) {
        const char *w_row = (const char *)g->w + o * g->in * esize;
        for (int64_t r0 = 0; r0 < g->rows; r0 += GENERIC_MR) {
            int64_t mr = min_i64(GENERIC_MR, g->rows - r0);
            float acc[GENERIC_MR][LANES] = {{0}};
            float wv[LANES], xv[LANES];
            for (int64_t k = 0; k < g->in; k += LANES) {
                int64_t count = min_i64(LANES, g->in - k);
                load_w_generic(w_row, g->dtype, k, count, wv);
                for (int64_t i = 0; i < mr; i++) {
                    pad_x_block(g->x + (r0 + i) * g->x_stride, k, count, xv);
                    for (int j = 0; j < LANES; j++) acc[i][j] = fmaf(xv[j], wv[j], acc[i][j]);
                }
            }
            for (int64_t i = 0; i < mr; i++) {
                float s = reduce_lanes(acc[i]);
                if (g->bias) s += g->bias[o];
                g->y[(r0 + i) * g->y_stride + o] = s;
            }
        }
    }
}

/* Expands to the 16 cases (mr, nr in 1..4) of a switch on (mr - 1) * 4 + (nr - 1) calling
 * TILE(g, r0, o0, mr, nr, dtype) with constant mr and nr, so each tile shape is specialised. */
#define VHK_TILE_CASES(TILE, g, r0, o0, dtype)                                            \
    case 0: TILE(g, r0, o0, 1, 1, dtype); break;  case 1: TILE(g, r0, o0, 1, 2, dtype); break; \
    case 2: TILE(g, r0, o0, 1, 3, dtype); break;  case 3: TILE(g, r0, o0, 1, 4, dtype); break; \
    case 4: TILE(g, r0, o0, 2, 1, dtype); break;  case 5: TILE(g, r0, o0, 2, 2, dtype); break; \
    case 6: TILE(g, r0, o0, 2, 3, dtype); break;  case 7: TILE(g, r0, o0, 2, 4, dtype); break; \
    case 8: TILE(g, r0, o0, 3, 1, dtype); break;  case 9: TILE(g, r0, o0, 3, 2, dtype); break; \
    case 10: TILE(g, r0, o0, 3, 3, dtype); break; case 11: TILE(g, r0, o0, 3, 4, dtype); break; \
    case 12: TILE(g, r0, o0, 4, 1, dtype); break; case 13: TILE(g, r0, o0, 4, 2, dtype); break; \
    case 14: TILE(g, r0, o0, 4, 3, dtype); break; case 15: TILE(g, r0, o0, 4, 4, dtype); break

#ifdef VHK_X86
/* ------------------------------------------------------------------------------------------------
 * AVX-512: one zmm per accumulator; tiles up to 4 x 4 (16 accumulators, 4 x and 4 w vectors).
 */
#define AVX512_INLINE static inline __attribute__((always_inline, target("avx512f")))

AVX512_INLINE __m512 load_w_avx512(const void *p, vh_dtype dtype)
{
    if (dtype == VH_DTYPE_F32) return _mm512_loadu_ps(p);
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    if (dtype == VH_DTYPE_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    return _mm512_cvtph_ps(h);
}

AVX512_INLINE float reduce_avx512(__m512 a)
{
    __m256 lo = _mm512_castps512_ps256(a);
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1));
    __m256 s8 = _mm256_add_ps(lo, hi);                                          /* j + j+8 */
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1)); /* j+4 */
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));                          /* j + j+2 */
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));                      /* 0 + 1 */
    return _mm_cvtss_f32(s1);
}

AVX512_INLINE void tile_avx512(const vhk_gemm_direct *g, int64_t r0, int64_t o0, int mr, int nr,
                               vh_dtype dtype)
{
    int64_t in = g->in, esize = vhk_dtype_size(dtype), xs = g->x_stride;
    const float *x = g->x + r0 * xs;
    const char *w = (const char *)g->w + o0 * in * esize;
    __m512 acc[4][4], wv[4];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) acc[i][j] = _mm512_setzero_ps();

    int64_t k = 0;
    for (; k + LANES <= in; k += LANES) {
        for (int j = 0; j < nr; j++) wv[j] = load_w_avx512(w + (j * in + k) * esize, dtype);
        for (int i = 0; i < mr; i++) {
            __m512 xv = _mm512_loadu_ps(x + i * xs + k);
            for (int j = 0; j < nr; j++) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }
    if (k < in) {
        unsigned char wbuf[LANES * 4];
        float xbuf[LANES];
        for (int j = 0; j < nr; j++) {
            pad_w_block(w + j * in * esize, esize, k, in - k, wbuf);
            wv[j] = load_w_avx512(wbuf, dtype);
        }
        for (int i = 0; i < mr; i++) {
            pad_x_block(x + i * xs, k, in - k, xbuf);
            __m512 xv = _mm512_loadu_ps(xbuf);
            for (int j = 0; j < nr; j++) acc[i][j] = _mm512_fmadd_ps(xv, wv[j], acc[i][j]);
        }
    }

    float *y = g->y + r0 * g->y_stride + o0;
    for (int i = 0; i < mr; i++) {
        for (int j = 0; j < nr; j++) {
            float s = reduce_avx512(acc[i][j]);
            if (g->bias) s += g->bias[o0 + j];
            y[i * g->y_stride + j] = s;
        }
    }
}

AVX512_INLINE void range_avx512(const vhk_gemm_direct *g, int64_t o_begin, int64_t o_end,
                                vh_dtype dtype)
{
    for (int64_t o0 = o_begin; o0 < o_end; o0 += 4) {
        int64_t nr = min_i64(4, o_end - o0);
        for (int64_t r0 = 0; r0 < g->rows; r0 += 4) {
            int64_t mr = min_i64(4, g->rows - r0);
            switch ((mr - 1) * 4 + (nr - 1)) { VHK_TILE_CASES(tile_avx512, g, r0, o0, dtype); }
        }
    }
}

__attribute__((target("avx512f")))
static void gemm_direct_avx512(const vhk_gemm_direct *g, int64_t o_begin, int64_t o_end)
{
    switch (g->dtype) {
    case VH_DTYPE_F32: range_avx512(g, o_begin, o_end, VH_DTYPE_F32); break;
    case VH_DTYPE_F16: range_avx512(g, o_begin, o_end, VH_DTYPE_F16); break;
    default: range_avx512(g, o_begin, o_end, VH_DTYPE_BF16); break;
    }
}

/* ------------------------------------------------------------------------------------------------
 * AVX2 + FMA + F16C: each 16-lane accumulator is two ymm halves (lanes 0-7, 8-15); tiles up to
 * 2 x 2 (8 ymm accumulators) so everything stays in the 16 registers.
 */
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,fma,f16c")))

typedef struct lanes16_avx2 {
    __m256 lo, hi;
} lanes16_avx2;

AVX2_INLINE __m256 load_w8_avx2(const void *p, vh_dtype dtype)
{
    if (dtype == VH_DTYPE_F32) return _mm256_loadu_ps(p);
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (dtype == VH_DTYPE_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    return _mm256_cvtph_ps(h);
}

AVX2_INLINE lanes16_avx2 load_w_avx2(const char *p, vh_dtype dtype)
{
    lanes16_avx2 v = {load_w8_avx2(p, dtype), load_w8_avx2(p + 8 * vhk_dtype_size(dtype), dtype)};
    return v;
}

AVX2_INLINE float reduce_avx2(lanes16_avx2 a)
{
    __m256 s8 = _mm256_add_ps(a.lo, a.hi);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1));
    return _mm_cvtss_f32(s1);
}

AVX2_INLINE void tile_avx2(const vhk_gemm_direct *g, int64_t r0, int64_t o0, int mr, int nr,
                           vh_dtype dtype)
{
    int64_t in = g->in, esize = vhk_dtype_size(dtype), xs = g->x_stride;
    const float *x = g->x + r0 * xs;
    const char *w = (const char *)g->w + o0 * in * esize;
    lanes16_avx2 acc[2][2], wv[2];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) acc[i][j].lo = acc[i][j].hi = _mm256_setzero_ps();

    int64_t k = 0;
    for (; k + LANES <= in; k += LANES) {
        for (int j = 0; j < nr; j++) wv[j] = load_w_avx2(w + (j * in + k) * esize, dtype);
        for (int i = 0; i < mr; i++) {
            __m256 xlo = _mm256_loadu_ps(x + i * xs + k), xhi = _mm256_loadu_ps(x + i * xs + k + 8);
            for (int j = 0; j < nr; j++) {
                acc[i][j].lo = _mm256_fmadd_ps(xlo, wv[j].lo, acc[i][j].lo);
                acc[i][j].hi = _mm256_fmadd_ps(xhi, wv[j].hi, acc[i][j].hi);
            }
        }
    }
    if (k < in) {
        unsigned char wbuf[LANES * 4];
        float xbuf[LANES];
        for (int j = 0; j < nr; j++) {
            pad_w_block(w + j * in * esize, esize, k, in - k, wbuf);
            wv[j] = load_w_avx2((const char *)wbuf, dtype);
        }
        for (int i = 0; i < mr; i++) {
            pad_x_block(x + i * xs, k, in - k, xbuf);
            __m256 xlo = _mm256_loadu_ps(xbuf), xhi = _mm256_loadu_ps(xbuf + 8);
            for (int j = 0; j < nr; j++) {
                acc[i][j].lo = _mm256_fmadd_ps(xlo, wv[j].lo, acc[i][j].lo);
                acc[i][j].hi = _mm256_fmadd_ps(xhi, wv[j].hi, acc[i][j].hi);
            }
        }
    }

    float *y = g->y + r0 * g->y_stride + o0;
    for (int i = 0; i < mr; i++) {
        for (int j = 0; j < nr; j++) {
            float s = reduce_avx2(acc[i][j]);
            if (g->bias) s += g->bias[o0 + j];
            y[i * g->y_stride + j] = s;
        }
    }
}

AVX2_INLINE void range_avx2(const vhk_gemm_direct *g, int64_t o_begin, int64_t o_end,
                            vh_dtype dtype)
{
    for (int64_t o0 = o_begin; o0 < o_end; o0 += 2) {
        int64_t nr = min_i64(2, o_end - o0);
        for (int64_t r0 = 0; r0 < g->rows; r0 += 2) {
            int64_t mr = min_i64(2, g->rows - r0);
            switch ((mr - 1) * 2 + (nr - 1)) {
            case 0: tile_avx2(g, r0, o0, 1, 1, dtype); break;
            case 1: tile_avx2(g, r0, o0, 1, 2, dtype); break;
            case 2: tile_avx2(g, r0, o0, 2, 1, dtype); break;
            default: tile_avx2(g, r0, o0, 2, 2, dtype); break;
            }
        }
    }
}

__attribute__((target("avx2,fma,f16c")))
static void gemm_direct_avx2(const vhk_gemm_direct *g, int64_t o_begin, int64_t o_end)
{
    switch (g->dtype) {
    case VH_DTYPE_F32: range_avx2(g, o_begin, o_end, VH_DTYPE_F32); break;
    case VH_DTYPE_F16: range_avx2(g, o_begin, o_end, VH_DTYPE_F16); break;
    default: range_avx2(g, o_begin, o_end, VH_DTYPE_BF16); break;
    }
}
#endif /* VHK_X86 */

#if defined(__aarch64__)
/* ------------------------------------------------------------------------------------------------
 * NEON (aarch64 Advanced SIMD, baseline there): each 16-lane accumulator is four 4-lane quarters
 * (lanes 0-3, 4-7, 8-11, 12-15); tiles up to 2 x 2 (16 accumulator registers of the 32), vfmaq
 * being the same fused multiply-add as fmaf.
 */
typedef struct lanes16_neon {
    float32x4_t q[4];
} lanes16_neon;

static inline __attribute__((always_inline)) lanes16_neon load_w_neon(const char *p, vh_dtype dtype)
{
    lanes16_neon v;
    if (dtype == VH_DTYPE_F32) {
        for (int i = 0; i < 4; i++) v.q[i] = vld1q_f32((const float *)p + 4 * i);
    } else {
        for (int half = 0; half < 2; half++) {
            uint16x8_t h = vld1q_u16((const uint16_t *)p + 8 * half);
            if (dtype == VH_DTYPE_BF16) {
                v.q[2 * half] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
                v.q[2 * half + 1] = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
            } else {
                float16x8_t f = vreinterpretq_f16_u16(h);
                v.q[2 * half] = vcvt_f32_f16(vget_low_f16(f));
                v.q[2 * half + 1] = vcvt_high_f32_f16(f);
            }
        }
    }
    return v;
}

/* The canonical tree: (j + j+8) is quarter 0 + 2 and 1 + 3, then j + j+4, j + j+2, 0 + 1. */
static inline __attribute__((always_inline)) float reduce_neon(lanes16_neon a)
{
    float32x4_t s4 = vaddq_f32(vaddq_f32(a.q[0], a.q[2]), vaddq_f32(a.q[1], a.q[3]));
    float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4));
    return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}

static inline __attribute__((always_inline)) void
fma_block_neon(lanes16_neon acc[2][2], const lanes16_neon wv[2], const float *x_rows[2], int mr, int nr)
{
    for (int i = 0; i < mr; i++) {
        for (int q = 0; q < 4; q++) {
            float32x4_t xq = vld1q_f32(x_rows[i] + 4 * q);
            for (int j = 0; j < nr; j++) acc[i][j].q[q] = vfmaq_f32(acc[i][j].q[q], xq, wv[j].q[q]);
        }
    }
}

static inline __attribute__((always_inline)) void
tile_neon(const vhk_gemm_direct *g, int64_t r0, int64_t o0, int mr, int nr, vh_dtype dtype)
{
    int64_t in = g->in, esize = vhk_dtype_size(dtype), xs = g->x_stride;
    const float *x = g->x + r0 * xs;
    const char *w = (const char *)g->w + o0 * in * esize;
    lanes16_neon acc[2][2], wv[2];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++)
            for (int q = 0; q < 4; q++) acc[i][j].q[q] = vdupq_n_f32(0.0f);

    int64_t k = 0;
    for (; k + LANES <= in; k += LANES) {
        const float *x_rows[2] = {x + k, x + (mr > 1 ? xs : 0) + k}; /* no pointer past a 1-row x */
        for (int j = 0; j < nr; j++) wv[j] = load_w_neon(w + (j * in + k) * esize, dtype);
        fma_block_neon(acc, wv, x_rows, mr, nr);
    }
    if (k < in) {
        unsigned char wbuf[LANES * 4];
        float xbuf[2][LANES];
        for (int j = 0; j < nr; j++) {
            pad_w_block(w + j * in * esize, esize, k, in - k, wbuf);
            wv[j] = load_w_neon((const char *)wbuf, dtype);
        }
        for (int i = 0; i < mr; i++) pad_x_block(x + i * xs, k, in - k, xbuf[i]);
        const float *x_rows[2] = {xbuf[0], xbuf[1]};
        fma_block_neon(acc, wv, x_rows, mr, nr);
    }

    float *y = g->y + r0 * g->y_stride + o0;
    for (int i = 0; i < mr; i++) {
        for (int j = 0; j < nr; j++) {
            float s = reduce_neon(acc[i][j]);
            if (g->bias) s += g->bias[o0 + j];
            y[i * g->y_stride + j] = s;
        }
    }
}

static inline __attribute__((always_inline)) void
range_neon(const vhk_gemm_direct *g, int64_t o_begin, int64_t o_end, vh_dtype dtype)
{
    for (int64_t o0 = o_begin; o0 < o_end; o0 += 2) {
        int64_t nr = min_i64(2, o_end - o0);
        for (int64_t r0 = 0; r0 < g->rows; r0 += 2) {
            int64_t mr = min_i64(2, g->rows - r0);
            switch ((mr - 1) * 2 + (nr - 1)) {
            case 0: tile_neon(g, r0, o0, 1, 1, dtype); break;
            case 1: tile_neon(g, r0, o0, 1, 2, dtype); break;
            case 2: tile_neon(g, r0, o0, 2, 1, dtype); break;
            default: tile_neon(g, r0, o0, 2, 2, dtype); break;
            }
        }
    }
}

static void gemm_direct_neon(const vhk_gemm_direct *g, int64_t o_begin, int64_t o_end)
{
    switch (g->dtype) {
    case VH_DTYPE_F32: range_neon(g, o_begin, o_end, VH_DTYPE_F32); break;
    case VH_DTYPE_F16: range_neon(g, o_begin, o_end, VH_DTYPE_F16); break;
    default: range_neon(g, o_begin, o_end, VH_DTYPE_BF16); break;
    }
}
#endif /* __aarch64__ */

void vhk_gemm_direct_run(vhk_isa isa, const vhk_gemm_direct *g, int64_t o_begin, int64_t o_end)
{
    if (o_begin >= o_end || g->rows <= 0) return;
#ifdef VHK_X86
    if (isa == VHK_ISA_AVX512) { gemm_direct_avx512(g, o_begin, o_end); return; }
    if (isa == VHK_ISA_AVX2) { gemm_direct_avx2(g, o_begin, o_end); return; }
#elif defined(__aarch64__)
    if (isa == VHK_ISA_NEON) { gemm_direct_neon(g, o_begin, o_end); return; }
#else
    (void)isa;
#endif
    gemm_direct_generic(g, o_begin, o_end);
}
