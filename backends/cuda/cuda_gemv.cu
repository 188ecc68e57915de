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

/* D[m, n] (+)= dots */
static __device__ __forceinline__ void gemv_store(const vhc_bf16 *__restrict__ A, int64_t lda,
                                                  const vhc_bf16 *__restrict__ W, float *__restrict__ D, int64_t ldd,
                                                  int N, int K, int accumulate, const int M)
{
    const int n = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (n >= N) return; /* the whole warp */
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
