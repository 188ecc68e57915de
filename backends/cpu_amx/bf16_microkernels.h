/*
 * The bf16 GEMM's two micro-kernels (bf16_microkernels.c), one contract: over k_steps K steps of
 * 32, a 32 x 32 block of C (fp32, rows 32 floats apart) gets
 *
 *   c (+)= A[32 rows, k_steps * 32] . B
 *
 * a: bf16, row r's K step s at a + r a_stride + s a_step (bf16_activations' layouts; rows padded
 * with zeros up to 32); b: a panel's tiles from
 * its first step in the run (k_steps * 1024 elements, bf16_gemm.h's layout); accumulate: c holds
 * the sums of earlier K steps. Internal to cpu_amx.
 */
#ifndef VH_CPU_AMX_BF16_MICROKERNELS_H
#define VH_CPU_AMX_BF16_MICROKERNELS_H

#include <stdint.h>

/* AMX: 2 x 2 tiles (tmm0-3 C, tmm4-5 A, tmm6-7 B). prefetch_b: hint B's lines a few steps ahead
 * into L2 (the first row block's pass, which brings B from memory). The calling thread must have run
 * bf16_amx_tiles_begin (and runs bf16_amx_tiles_end when its work is done). */
void bf16_microkernel_amx(const uint16_t *a, int64_t a_stride, int64_t a_step, const uint16_t *b, int64_t k_steps,
                          float *c, int accumulate, int prefetch_b);
void bf16_amx_tiles_begin(void);
void bf16_amx_tiles_end(void);

/* AVX-512 bf16: only the first `rows` (1..32) rows are computed, so a decode step's single row
 * costs one pass over B, not 32 rows of work. */
void bf16_microkernel_avx512(const uint16_t *a, int64_t a_stride, int64_t a_step, const uint16_t *b,
                             int64_t k_steps, float *c, int accumulate, int rows);

/* The vector parts of the driver (AVX-512 F), bit for bit what their scalar forms give except
 * bf16_silu_mul_row's e^x (a polynomial within a few ulp of expf) and bf16_bias_gelu_row's erf:
 *   bf16_round_row: dst[i] = bf16(x[i] * rs * w[i]) (w NULL: bf16(x[i])), round to nearest even;
 *   bf16_silu_mul_row: y[i] = silu(gate[i]) * up[i]. */
void bf16_round_row(const float *x, const float *w, float rs, uint16_t *dst, int64_t n);
void bf16_silu_mul_row(const float *gate, const float *up, float *y, int64_t n);
/* y[i] = gelu(c[i] + bias[i]) (bias NULL: none), exact GELU (x / 2) (1 + erf(x / sqrt 2)) with
 * 1 + erf from erfc's Chebyshev fit (fractional error < 1.2e-7, Numerical Recipes' erfcc): within
 * a few ulp where GELU is large and to its own relative accuracy where it vanishes. */
void bf16_bias_gelu_row(const float *c, const float *bias, float *y, int64_t n);

#endif
