/*
 * The bf16 GEMM's micro-kernels (bf16_microkernels.h), written by hand: AMX tiles where the rows
 * fill them, AVX-512 bf16 dot products for few rows. Compiled for any x86-64 (target attributes);
 * run only where bf16_gemm.c found the instructions.
 */
#include "bf16_microkernels.h"
#include "avx512_exp.h"

#include <immintrin.h>
#include <string.h>

/* ---- AMX ---- */

/* The tile palette (Intel SDM, LDTILECFG): palette 1, eight tiles of 16 rows x 64 bytes. */
typedef struct tile_config {
    uint8_t palette_id, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* LDTILECFG through an asm operand that is the whole structure: GCC 12's _tile_loadconfig names
 * only its first 8 bytes, so the compiler drops the stores of the rest (seen: a #UD on the tiles). */
__attribute__((target("amx-tile"))) void bf16_amx_tiles_begin(void)
{
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette_id = 1;
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

/* Give the tile state back, so the kernel need not save 8 KB of tiles at each context switch. */
__attribute__((target("amx-tile"))) void bf16_amx_tiles_end(void)
{
    _tile_release();
}

#define AMX_PREFETCH_STEPS 4

__attribute__((target("amx-tile,amx-bf16"))) void bf16_microkernel_amx(const uint16_t *a, int64_t a_stride,
                                                                        int64_t a_step, const uint16_t *b,
                                                                        int64_t k_steps, float *c, int accumulate,
                                                                        int prefetch_b)
{
    const long a_bytes = (long)a_stride * 2;
    const uint16_t *a_low = a + 16 * a_stride;
    __asm__ volatile("" ::: "memory"); /* the tile loads and stores are asm without memory operands */
    if (accumulate) {
        _tile_loadd(0, c, 128);
        _tile_loadd(1, c + 16, 128);
        _tile_loadd(2, c + 512, 128);
        _tile_loadd(3, c + 528, 128);
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    for (int64_t s = 0; s < k_steps; s++) {
        const uint16_t *bs = b + s * 1024;
        if (prefetch_b)
            for (int line = 0; line < 32; line++)
                _mm_prefetch((const char *)(bs + AMX_PREFETCH_STEPS * 1024 + line * 32), _MM_HINT_T1);
        _tile_loadd(4, a + s * a_step, a_bytes);
        _tile_loadd(6, bs, 64);
        _tile_loadd(7, bs + 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a_low + s * a_step, a_bytes);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, c, 128);
    _tile_stored(1, c + 16, 128);
    _tile_stored(2, c + 512, 128);
    _tile_stored(3, c + 528, 128);
    __asm__ volatile("" ::: "memory");
}

/* ---- AVX-512 bf16 ---- */

#define AVX512_BF16 __attribute__((target("avx512f,avx512bf16"), always_inline)) static inline

/* R rows (a compile-time count after inlining) x 32 columns: two zmm accumulators a row. B row j of
 * a step (16 columns' pairs) is one zmm; row r's pair (k = 2j, 2j + 1) is broadcast. The loads of
 * the step PREFETCH_STEPS ahead are hinted, for the weight stream of a decode step. */
#define PREFETCH_STEPS 4
AVX512_BF16 void avx512_rows(const uint16_t *a, int64_t a_stride, int64_t a_step, const uint16_t *b,
                             int64_t k_steps, float *c, int accumulate, const int R)
{
    __m512 acc[8][2];
    for (int r = 0; r < R; r++) {
        acc[r][0] = accumulate ? _mm512_loadu_ps(c + r * 32) : _mm512_setzero_ps();
        acc[r][1] = accumulate ? _mm512_loadu_ps(c + r * 32 + 16) : _mm512_setzero_ps();
    }
    for (int64_t s = 0; s < k_steps; s++) {
        const uint16_t *bs = b + s * 1024;
        const uint16_t *as = a + s * a_step;
        for (int j = 0; j < 16; j++) {
            _mm_prefetch((const char *)(bs + PREFETCH_STEPS * 1024 + j * 32), _MM_HINT_T0);
            _mm_prefetch((const char *)(bs + PREFETCH_STEPS * 1024 + 512 + j * 32), _MM_HINT_T0);
            const __m512i b0 = _mm512_load_si512((const void *)(bs + j * 32));
            const __m512i b1 = _mm512_load_si512((const void *)(bs + 512 + j * 32));
            for (int r = 0; r < R; r++) {
                uint32_t pair;
                memcpy(&pair, as + r * a_stride + 2 * j, sizeof pair);
                const __m512i av = _mm512_set1_epi32((int)pair);
                acc[r][0] = _mm512_dpbf16_ps(acc[r][0], (__m512bh)av, (__m512bh)b0);
                acc[r][1] = _mm512_dpbf16_ps(acc[r][1], (__m512bh)av, (__m512bh)b1);
            }
        }
    }
    for (int r = 0; r < R; r++) {
        _mm512_storeu_ps(c + r * 32, acc[r][0]);
        _mm512_storeu_ps(c + r * 32 + 16, acc[r][1]);
    }
}

#define ROWS_FN(R)                                                                                                 \
    __attribute__((target("avx512f,avx512bf16"))) static void avx512_rows_##R(                                     \
        const uint16_t *a, int64_t a_stride, int64_t a_step, const uint16_t *b, int64_t k_steps, float *c,          \
        int accumulate)                                                                                            \
    {                                                                                                              \
        avx512_rows(a, a_stride, a_step, b, k_steps, c, accumulate, R);                                            \
    }
ROWS_FN(1)
ROWS_FN(2)
ROWS_FN(3)
ROWS_FN(4)
ROWS_FN(5)
ROWS_FN(6)
ROWS_FN(7)
ROWS_FN(8)

typedef void (*rows_fn)(const uint16_t *, int64_t, int64_t, const uint16_t *, int64_t, float *, int);
static const rows_fn rows_fns[9] = {NULL,          avx512_rows_1, avx512_rows_2, avx512_rows_3, avx512_rows_4,
                                    avx512_rows_5, avx512_rows_6, avx512_rows_7, avx512_rows_8};

void bf16_microkernel_avx512(const uint16_t *a, int64_t a_stride, int64_t a_step, const uint16_t *b,
                             int64_t k_steps, float *c, int accumulate, int rows)
{
    for (int r0 = 0; r0 < rows; r0 += 8) {
        const int n = rows - r0 < 8 ? rows - r0 : 8;
        rows_fns[n](a + r0 * a_stride, a_stride, a_step, b, k_steps, c + r0 * 32, accumulate);
    }
}

/* ---- the driver's vector parts ---- */

#define AVX512F __attribute__((target("avx512f,avx512bw,avx512vl")))

/* vh_f32_to_bf16 on 16 lanes: round to nearest even, NaN kept a (quiet) NaN. */
AVX512F static inline __m256i round16(__m512 v)
{
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet));
}

AVX512F void bf16_round_row(const float *x, const float *w, float rs, uint16_t *dst, int64_t n)
{
    const __m512 scale = _mm512_set1_ps(rs);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        if (w) v = _mm512_mul_ps(_mm512_loadu_ps(w + i), _mm512_mul_ps(v, scale)); /* w * (x * rs), as vhk_rmsnorm */
        _mm256_storeu_si256((__m256i *)(dst + i), round16(v));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        if (w) v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + i), _mm512_mul_ps(v, scale));
        _mm256_mask_storeu_epi16(dst + i, m, round16(v));
    }
}

/* silu(g) = g sigmoid(g), sigmoid from e = e^-|g| (never overflows): 1 / (1 + e) for g >= 0,
 * e / (1 + e) below. */
AVX512F static inline __m512 silu_mul16(__m512 g, __m512 u)
{
    const __m512 e = avx512_exp_nonpositive(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(g)));
    const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    const __mmask16 negative = _mm512_cmp_ps_mask(g, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 sigmoid = _mm512_mask_mul_ps(inv, negative, inv, e);
    return _mm512_mul_ps(_mm512_mul_ps(g, sigmoid), u);
}

AVX512F void bf16_silu_mul_row(const float *gate, const float *up, float *y, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, silu_mul16(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, silu_mul16(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i)));
    }
}

/* erfc(z) for z >= 0 (Numerical Recipes' erfcc: t = 1 / (1 + z / 2), t e^(-z^2 + P(t)), fractional
 * error < 1.2e-7); the exponent is <= 0 but for rounding at z ~ 0, where e^x's reduction is exact. */
AVX512F static inline __m512 erfc_nonnegative(__m512 z)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 t = _mm512_div_ps(one, _mm512_fmadd_ps(_mm512_set1_ps(0.5f), z, one));
    static const float c[10] = {-1.26551223f, 1.00002368f, 0.37409196f, 0.09678418f, -0.18628806f,
                                0.27886807f,  -1.13520398f, 1.48851587f, -0.82215223f, 0.17087277f};
    __m512 p = _mm512_set1_ps(c[9]);
    for (int i = 8; i >= 0; i--) p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(c[i]));
    const __m512 exponent = _mm512_fnmadd_ps(z, z, p); /* -z^2 + P(t) */
    return _mm512_mul_ps(t, avx512_exp_nonpositive(_mm512_min_ps(exponent, _mm512_setzero_ps())));
}

/* (x / 2) (1 + erf(x / sqrt 2)): 1 + erf(u) is 2 - erfc(u) for u >= 0 and erfc(-u) below, so it
 * keeps its relative accuracy where GELU vanishes (large negative x). */
AVX512F static inline __m512 gelu16(__m512 x)
{
    const __m512 u = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));
    const __m512 e = erfc_nonnegative(_mm512_abs_ps(u));
    const __mmask16 negative = _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 one_plus_erf = _mm512_mask_mov_ps(_mm512_sub_ps(_mm512_set1_ps(2.0f), e), negative, e);
    return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)), one_plus_erf);
}

AVX512F void bf16_bias_gelu_row(const float *c, const float *bias, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, c + i);
        if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + i));
        _mm512_mask_storeu_ps(y + i, m, gelu16(v));
    }
}
