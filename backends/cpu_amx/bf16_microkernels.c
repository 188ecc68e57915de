/*
 * The bf16 GEMM's micro-kernels (bf16_microkernels.h), written by hand: AMX tiles where the rows
 * fill them, AVX-512 bf16 dot products for few rows. Compiled for any x86-64 (target attributes);
 * run only where bf16_gemm.c found the instructions.
 */
#include "bf16_microkernels.h"

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

__attribute__((target("amx-tile,amx-bf16"))) void bf16_microkernel_amx(const uint16_t *a, int64_t a_stride,
                                                                        const uint16_t *b, int64_t k_steps, float *c,
                                                                        int accumulate)
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
        _tile_loadd(4, a + s * 32, a_bytes);
        _tile_loadd(6, bs, 64);
        _tile_loadd(7, bs + 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_loadd(5, a_low + s * 32, a_bytes);
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
AVX512_BF16 void avx512_rows(const uint16_t *a, int64_t a_stride, const uint16_t *b, int64_t k_steps, float *c,
                             int accumulate, const int R)
{
    __m512 acc[8][2];
    for (int r = 0; r < R; r++) {
        acc[r][0] = accumulate ? _mm512_loadu_ps(c + r * 32) : _mm512_setzero_ps();
        acc[r][1] = accumulate ? _mm512_loadu_ps(c + r * 32 + 16) : _mm512_setzero_ps();
    }
    for (int64_t s = 0; s < k_steps; s++) {
        const uint16_t *bs = b + s * 1024;
        const uint16_t *as = a + s * 32;
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
        const uint16_t *a, int64_t a_stride, const uint16_t *b, int64_t k_steps, float *c, int accumulate)          \
    {                                                                                                              \
        avx512_rows(a, a_stride, b, k_steps, c, accumulate, R);                                                    \
    }
ROWS_FN(1)
ROWS_FN(2)
ROWS_FN(3)
ROWS_FN(4)
ROWS_FN(5)
ROWS_FN(6)
ROWS_FN(7)
ROWS_FN(8)

typedef void (*rows_fn)(const uint16_t *, int64_t, const uint16_t *, int64_t, float *, int);
static const rows_fn rows_fns[9] = {NULL,          avx512_rows_1, avx512_rows_2, avx512_rows_3, avx512_rows_4,
                                    avx512_rows_5, avx512_rows_6, avx512_rows_7, avx512_rows_8};

void bf16_microkernel_avx512(const uint16_t *a, int64_t a_stride, const uint16_t *b, int64_t k_steps, float *c,
                             int accumulate, int rows)
{
    for (int r0 = 0; r0 < rows; r0 += 8) {
        const int n = rows - r0 < 8 ? rows - r0 : 8;
        rows_fns[n](a + r0 * a_stride, a_stride, b, k_steps, c + r0 * 32, accumulate);
    }
}
