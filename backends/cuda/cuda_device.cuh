/*
 * Device helpers shared by the cuda backend's kernel files: bf16 storage (round to nearest even on
 * write, exact on read, packing pairs).
 */
#ifndef VH_CUDA_DEVICE_CUH
#define VH_CUDA_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda_kernels.h"

#define FULL_MASK 0xffffffffu

static __device__ __forceinline__ vhc_bf16 f2bf(float f)
{
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}

static __device__ __forceinline__ float bf2f(vhc_bf16 b)
{
    return __uint_as_float(((unsigned)b) << 16);
}

/* The low / high bf16 of a 32-bit word (the lower address is the low half: little-endian). */
static __device__ __forceinline__ float bf_lo(unsigned w)
{
    return __uint_as_float(w << 16);
}

static __device__ __forceinline__ float bf_hi(unsigned w)
{
    return __uint_as_float(w & 0xffff0000u);
}

static __device__ __forceinline__ unsigned pack_bf2(float a, float b)
{
    return (unsigned)f2bf(a) | ((unsigned)f2bf(b) << 16);
}

/* The sum of v over the block (blockDim.x a multiple of 32); every thread gets the same bits. red:
 * blockDim.x / 32 floats of shared memory, which consecutive calls may share (the first barrier
 * keeps a call's writes from a previous call's reads). */
static __device__ __forceinline__ float vhc_block_sum(float v, float *red)
{
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = 0.0f;
    for (int k = 0; k < warps; k++) t += red[k];
    return t;
}

/* 1 / sqrt(biased variance + eps) of the n values v (a row the block holds, in shared or global
 * memory) about their mean: the second pass of torch's LayerNorm, no cancellation whatever the mean. */
static __device__ __forceinline__ float vhc_block_rstd(const float *v, int n, float mean, float eps, float *red)
{
    float sq = 0.0f;
    for (int c = threadIdx.x; c < n; c += blockDim.x) {
        const float d = v[c] - mean;
        sq += d * d;
    }
    return rsqrtf(vhc_block_sum(sq, red) / (float)n + eps);
}

#endif
