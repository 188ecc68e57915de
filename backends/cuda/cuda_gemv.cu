/*
 * Linear layers for a handful of rows (decode steps): a pass over the weights.
 *
 *     D[m, n] (+)= sum_k A[m, k] W[n, k]      m < M <= VHC_GEMV_MAX_ROWS
 *
 * Why by hand: at one row a linear layer is bound by reading W once; cuBLASLt's kernels for these
 * shapes leave a quarter of the H200's copy bandwidth unused (doc/performance.md). Here one warp
 * owns one output column n: its lanes stream W[n, :] in 16-byte pieces (8 bf16), GEMV_UNROLL
 * pieces in flight per lane, read with the streaming cache hint (each weight is used once), and
 * multiply each piece with the M input rows (read through L1: every warp reuses them).
 *
 * Numerics: per lane one fp32 FMA chain over its pieces in k order, then a butterfly warp sum.
 * The order depends on K only, so a row's result does not depend on M or on the other rows.
 */
#include <stdint.h>

#include "cuda_device.cuh"

#define GEMV_WARPS 4  /* output columns per block */
#define GEMV_UNROLL 8 /* 16-byte weight pieces in flight per lane */
#define PIECE 8       /* bf16 per 16-byte piece */

/* acc + the dot product of 8 bf16 pairs, in element order. */
static __device__ __forceinline__ float dot8(uint4 w, uint4 a, float acc)
{
    acc = fmaf(bf_lo(w.x), bf_lo(a.x), acc);
    acc = fmaf(bf_hi(w.x), bf_hi(a.x), acc);
    acc = fmaf(bf_lo(w.y), bf_lo(a.y), acc);
    acc = fmaf(bf_hi(w.y), bf_hi(a.y), acc);
    acc = fmaf(bf_lo(w.z), bf_lo(a.z), acc);
    acc = fmaf(bf_hi(w.z), bf_hi(a.z), acc);
    acc = fmaf(bf_lo(w.w), bf_lo(a.w), acc);
    acc = fmaf(bf_hi(w.w), bf_hi(a.w), acc);
    return acc;
}

/* acc[m] = sum_k A[m, k] W[n, k] for m < M, for the warp's weight row w = W + n K; every lane ends
 * with all M sums. */
static __device__ __forceinline__ void gemv_dots(const vhc_bf16 *__restrict__ A, int64_t lda,
                                                 const vhc_bf16 *__restrict__ wrow, int K, float *acc, const int M)
{
    const int lane = threadIdx.x & 31;
    const uint4 *w = (const uint4 *)wrow;
    const int pieces = K / PIECE;
#pragma unroll
    for (int m = 0; m < M; m++) acc[m] = 0.0f;
    int p = lane;
    for (; p + 32 * (GEMV_UNROLL - 1) < pieces; p += 32 * GEMV_UNROLL) {
        uint4 wv[GEMV_UNROLL];
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) wv[u] = __ldcs(w + p + 32 * u);
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
#pragma unroll
            for (int m = 0; m < M; m++) acc[m] = dot8(wv[u], __ldg((const uint4 *)(A + m * lda) + p + 32 * u), acc[m]);
        }
    }
    for (; p < pieces; p += 32) {
        const uint4 wv = __ldcs(w + p);
#pragma unroll
        for (int m = 0; m < M; m++) acc[m] = dot8(wv, __ldg((const uint4 *)(A + m * lda) + p), acc[m]);
    }
#pragma unroll
    for (int m = 0; m < M; m++) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[m] += __shfl_xor_sync(FULL_MASK, acc[m], o);
    }
}

/* gemv_dots for two weight rows at once (their loads interleaved: twice the bytes in flight of
 * two calls in a row); each sum in the same order as gemv_dots, so the same bits. */
static __device__ __forceinline__ void gemv_dots2(const vhc_bf16 *__restrict__ A, int64_t lda,
                                                  const vhc_bf16 *__restrict__ row1, const vhc_bf16 *__restrict__ row2,
                                                  int K, float *acc1, float *acc2, const int M)
{
    const int lane = threadIdx.x & 31;
    const uint4 *w1 = (const uint4 *)row1, *w2 = (const uint4 *)row2;
    const int pieces = K / PIECE;
#pragma unroll
    for (int m = 0; m < M; m++) acc1[m] = acc2[m] = 0.0f;
    int p = lane;
    for (; p + 32 * (GEMV_UNROLL - 1) < pieces; p += 32 * GEMV_UNROLL) {
        uint4 v1[GEMV_UNROLL], v2[GEMV_UNROLL];
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
            v1[u] = __ldcs(w1 + p + 32 * u);
            v2[u] = __ldcs(w2 + p + 32 * u);
        }
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++) {
#pragma unroll
            for (int m = 0; m < M; m++) {
                const uint4 a = __ldg((const uint4 *)(A + m * lda) + p + 32 * u);
                acc1[m] = dot8(v1[u], a, acc1[m]);
                acc2[m] = dot8(v2[u], a, acc2[m]);
            }
        }
    }
    for (; p < pieces; p += 32) {
        const uint4 v1 = __ldcs(w1 + p), v2 = __ldcs(w2 + p);
#pragma unroll
        for (int m = 0; m < M; m++) {
            const uint4 a = __ldg((const uint4 *)(A + m * lda) + p);
            acc1[m] = dot8(v1, a, acc1[m]);
            acc2[m] = dot8(v2, a, acc2[m]);
        }
    }
#pragma unroll
    for (int m = 0; m < M; m++) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            acc1[m] += __shfl_xor_sync(FULL_MASK, acc1[m], o);
            acc2[m] += __shfl_xor_sync(FULL_MASK, acc2[m], o);
        }
    }
}

/* The warp's output column, or -1 past the last one (the whole warp). */
static __device__ __forceinline__ int gemv_warp_column(int n_columns)
{
    const int n = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5);
    return n < n_columns ? n : -1;
}

/* D[m, n] (+)= dots */
static __device__ __forceinline__ void gemv_store(const vhc_bf16 *__restrict__ A, int64_t lda,
                                                  const vhc_bf16 *__restrict__ W, float *__restrict__ D, int64_t ldd,
                                                  int N, int K, int accumulate, const int M)
{
    const int n = gemv_warp_column(N), lane = threadIdx.x & 31;
    if (n < 0) return;
    float acc[VHC_GEMV_MAX_ROWS];
    gemv_dots(A, lda, W + (int64_t)n * K, K, acc, M);
#pragma unroll
    for (int m = 0; m < M; m++) {
        if (lane == m) { /* lane m stores row m */
            float *d = D + m * ldd + n;
            *d = accumulate ? *d + acc[m] : acc[m];
        }
    }
}

/* act[m, n] = bf16(silu(gate) * up) from weight rows n (gate) and F + n (up) */
static __device__ __forceinline__ void gemv_silu(const vhc_bf16 *__restrict__ A, int64_t lda,
                                                 const vhc_bf16 *__restrict__ W, vhc_bf16 *__restrict__ act,
                                                 int64_t ld_act, int F, int K, const int M)
{
    const int n = gemv_warp_column(F), lane = threadIdx.x & 31;
    if (n < 0) return;
    float g[VHC_GEMV_MAX_ROWS], u[VHC_GEMV_MAX_ROWS];
    gemv_dots2(A, lda, W + (int64_t)n * K, W + ((int64_t)F + n) * K, K, g, u, M);
#pragma unroll
    for (int m = 0; m < M; m++)
        if (lane == m) act[m * ld_act + n] = f2bf(silu_mul(g[m], u[m]));
}

/* Column pair (i, i + hd/2) of head `head` of q | k | v, rotated (q, k) and stored as bf16: q to
 * q_out [M, Hq hd], k and v into the caches at rows[m].kv_write. */
static __device__ __forceinline__ void gemv_rope(const vhc_bf16 *__restrict__ A, int64_t lda,
                                                 const vhc_bf16 *__restrict__ W, int K,
                                                 const vhc_row *__restrict__ rows,
                                                 const float *__restrict__ inv_freq, vhc_bf16 *__restrict__ q_out,
                                                 vhc_bf16 *__restrict__ k_cache, vhc_bf16 *__restrict__ v_cache,
                                                 int n_heads, int n_kv_heads, int hd, const int M)
{
    const int half = hd >> 1, lane = threadIdx.x & 31;
    const int unit = gemv_warp_column((n_heads + 2 * n_kv_heads) * half);
    if (unit < 0) return;
    const int head = unit / half, i = unit - head * half;
    const int64_t c1 = (int64_t)head * hd + i;
    float a[VHC_GEMV_MAX_ROWS], b[VHC_GEMV_MAX_ROWS];
    gemv_dots2(A, lda, W + c1 * K, W + (c1 + half) * K, K, a, b, M);
#pragma unroll
    for (int m = 0; m < M; m++) {
        if (lane != m) continue;
        float oa = a[m], ob = b[m];
        vhc_bf16 *dst;
        if (head < n_heads + n_kv_heads) {
            const float angle = (float)rows[m].rope_pos * inv_freq[i];
            rope_rotate(a[m], b[m], cosf(angle), sinf(angle), &oa, &ob);
            dst = head < n_heads ? q_out + ((int64_t)m * n_heads + head) * hd
                                 : k_cache + rows[m].kv_write + (int64_t)(head - n_heads) * hd;
        } else {
            dst = v_cache + rows[m].kv_write + (int64_t)(head - n_heads - n_kv_heads) * hd;
        }
        dst[i] = f2bf(oa);
        dst[i + half] = f2bf(ob);
    }
}

#define GEMV_PARAMS                                                                                                 \
    const vhc_bf16 *__restrict__ A, int64_t lda, const vhc_bf16 *__restrict__ W, float *__restrict__ D, int64_t ldd, \
        int N, int K, int accumulate
#define GEMV_KERNEL(M)                                                                                              \
    __global__ void __launch_bounds__(GEMV_WARPS * 32) k_gemv_##M(GEMV_PARAMS)                                      \
    {                                                                                                               \
        gemv_store(A, lda, W, D, ldd, N, K, accumulate, M);                                                         \
    }
GEMV_KERNEL(1)
GEMV_KERNEL(2)
GEMV_KERNEL(3)
GEMV_KERNEL(4)
GEMV_KERNEL(5)
GEMV_KERNEL(6)
GEMV_KERNEL(7)
GEMV_KERNEL(8)

#define SILU_PARAMS                                                                                                 \
    const vhc_bf16 *__restrict__ A, int64_t lda, const vhc_bf16 *__restrict__ W, vhc_bf16 *__restrict__ act,        \
        int64_t ld_act, int F, int K
#define SILU_KERNEL(M)                                                                                              \
    __global__ void __launch_bounds__(GEMV_WARPS * 32) k_gemv_silu_##M(SILU_PARAMS)                                 \
    {                                                                                                               \
        gemv_silu(A, lda, W, act, ld_act, F, K, M);                                                                 \
    }
SILU_KERNEL(1)
SILU_KERNEL(2)
SILU_KERNEL(3)
SILU_KERNEL(4)
SILU_KERNEL(5)
SILU_KERNEL(6)
SILU_KERNEL(7)
SILU_KERNEL(8)

#define ROPE_PARAMS                                                                                                 \
    const vhc_bf16 *__restrict__ A, int64_t lda, const vhc_bf16 *__restrict__ W, int K,                             \
        const vhc_row *__restrict__ rows, const float *__restrict__ inv_freq, vhc_bf16 *__restrict__ q_out,         \
        vhc_bf16 *__restrict__ k_cache, vhc_bf16 *__restrict__ v_cache, int n_heads, int n_kv_heads, int hd
#define ROPE_KERNEL(M)                                                                                              \
    __global__ void __launch_bounds__(GEMV_WARPS * 32) k_gemv_rope_##M(ROPE_PARAMS)                                 \
    {                                                                                                               \
        gemv_rope(A, lda, W, K, rows, inv_freq, q_out, k_cache, v_cache, n_heads, n_kv_heads, hd, M);              \
    }
ROPE_KERNEL(1)
ROPE_KERNEL(2)
ROPE_KERNEL(3)
ROPE_KERNEL(4)
ROPE_KERNEL(5)
ROPE_KERNEL(6)
ROPE_KERNEL(7)
ROPE_KERNEL(8)

extern "C" int vhc_gemv_supported(const vhc_bf16 *A, int64_t lda, int64_t M, int64_t K, const vhc_bf16 *W, int64_t N,
                                  const float *D, int64_t ldd)
{
    return M >= 1 && M <= VHC_GEMV_MAX_ROWS && K >= PIECE && K % PIECE == 0 && K <= INT32_MAX && N >= 1 &&
           N <= (int64_t)INT32_MAX - GEMV_WARPS && lda % PIECE == 0 && lda >= K && ldd >= N &&
           ((uintptr_t)A & 15) == 0 && ((uintptr_t)W & 15) == 0 && D != NULL;
}

extern "C" void vhc_gemv(cudaStream_t s, const vhc_bf16 *A, int64_t lda, int64_t M, int64_t K, const vhc_bf16 *W,
                         int64_t N, float *D, int64_t ldd, int accumulate)
{
    static void (*const kernels[VHC_GEMV_MAX_ROWS])(GEMV_PARAMS) = {k_gemv_1, k_gemv_2, k_gemv_3, k_gemv_4,
                                                                     k_gemv_5, k_gemv_6, k_gemv_7, k_gemv_8};
    if (!vhc_gemv_supported(A, lda, M, K, W, N, D, ldd)) return;
    const unsigned blocks = (unsigned)((N + GEMV_WARPS - 1) / GEMV_WARPS);
    kernels[M - 1]<<<blocks, GEMV_WARPS * 32, 0, s>>>(A, lda, W, D, ldd, (int)N, (int)K, accumulate);
}

extern "C" void vhc_gemv_silu_mul(cudaStream_t s, const vhc_bf16 *A, int64_t lda, int64_t M, int64_t K,
                                  const vhc_bf16 *W, int64_t F, vhc_bf16 *act, int64_t ld_act)
{
    static void (*const kernels[VHC_GEMV_MAX_ROWS])(SILU_PARAMS) = {
        k_gemv_silu_1, k_gemv_silu_2, k_gemv_silu_3, k_gemv_silu_4,
        k_gemv_silu_5, k_gemv_silu_6, k_gemv_silu_7, k_gemv_silu_8};
    if (!act || ld_act < F || F > INT32_MAX / 2 || !vhc_gemv_supported(A, lda, M, K, W, 2 * F, (const float *)act, 2 * F))
        return;
    const unsigned blocks = (unsigned)((F + GEMV_WARPS - 1) / GEMV_WARPS);
    kernels[M - 1]<<<blocks, GEMV_WARPS * 32, 0, s>>>(A, lda, W, act, ld_act, (int)F, (int)K);
}

extern "C" void vhc_gemv_rope_qkv(cudaStream_t s, const vhc_bf16 *A, int64_t lda, int64_t M, int64_t K,
                                  const vhc_bf16 *W, const vhc_row *rows, const float *inv_freq, vhc_bf16 *q_out,
                                  vhc_bf16 *k_cache, vhc_bf16 *v_cache, int n_heads, int n_kv_heads, int head_dim)
{
    static void (*const kernels[VHC_GEMV_MAX_ROWS])(ROPE_PARAMS) = {
        k_gemv_rope_1, k_gemv_rope_2, k_gemv_rope_3, k_gemv_rope_4,
        k_gemv_rope_5, k_gemv_rope_6, k_gemv_rope_7, k_gemv_rope_8};
    if (n_heads <= 0 || n_kv_heads < 0 || head_dim < 2 || (head_dim & 1) || !rows || !inv_freq) return;
    const int64_t N = (int64_t)(n_heads + 2 * n_kv_heads) * head_dim;
    if (!vhc_gemv_supported(A, lda, M, K, W, N, (const float *)q_out, N)) return;
    const int64_t units = N / 2;
    const unsigned blocks = (unsigned)((units + GEMV_WARPS - 1) / GEMV_WARPS);
    kernels[M - 1]<<<blocks, GEMV_WARPS * 32, 0, s>>>(A, lda, W, (int)K, rows, inv_freq, q_out, k_cache, v_cache,
                                                      n_heads, n_kv_heads, head_dim);
}
