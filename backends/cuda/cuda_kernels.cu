/*
 * The cuda backend's CUDA C kernels; the contract (semantics of every launcher) is cuda_kernels.h.
 *
 * Conventions
 *  - Every launcher returns at once after enqueueing on its stream; a launcher whose work is empty
 *    (rows, n, T... <= 0) or whose arguments it cannot serve (see each one) enqueues nothing.
 *  - Math is fp32 with the accurate library functions (expf, erff, cosf, sinf, sqrtf, IEEE division:
 *    this file must not be built with --use_fast_math); bf16 is storage only, written with
 *    round-to-nearest-even (__float2bfloat16_rn) and read exactly (a 16-bit shift).
 *  - Reductions are fp32 in an order fixed by the launch configuration, which depends only on the
 *    sizes: the same inputs give the same bits on every run.
 *  - Pointers are assumed aligned only to their element (4 bytes fp32, 2 bytes bf16). Vector
 *    loads and stores (16-byte float4, 8-byte bf16 x 4) are used only after the launcher (or, where
 *    the address depends on device-resident metadata, the kernel) has checked the alignment of
 *    every address involved; otherwise the same kernel takes its scalar path.
 *  - Grids: rows go on gridDim.x (up to 2^31 - 1) for one-block-per-row kernels; element-wise
 *    kernels put rows on gridDim.y capped at 65535 and loop over the rest.
 */
#include <math.h>
#include <stdint.h>

#include "cuda_device.cuh"

/* ------------------------------------------------------------------------------------------------
 * Helpers
 */

/* Llama's MLP gate: silu(g) * u, silu(g) = g / (1 + e^-g), in fp32. */
static __device__ __forceinline__ float silu_mul(float g, float u)
{
    return (g / (1.0f + expf(-g))) * u;
}

/* HF rotate-half RoPE of the pair (a, b) = (x[i], x[i + hd/2]), with c = cosf(angle), sn =
 * sinf(angle) of angle = pos * inv_freq[i] (fp32): x * cos + rotate_half(x) * sin with
 * rotate_half = (-x2, x1), each product rounded. */
static __device__ __forceinline__ void rope_rotate(float a, float b, float c, float sn, float *oa, float *ob)
{
    *oa = __fadd_rn(__fmul_rn(a, c), __fmul_rn(-b, sn));
    *ob = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, sn));
}

/* Four bf16 values at p (8-byte aligned). */
static __device__ __forceinline__ void store_bf4(vhc_bf16 *p, float a, float b, float c, float d)
{
    uint2 t;
    t.x = pack_bf2(a, b);
    t.y = pack_bf2(c, d);
    *(uint2 *)p = t;
}

static __device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

/* Sum of v over the block (blockDim.x a multiple of 32, at most 32 warps); every thread gets the
 * same bits. sh: 32 floats of shared memory not used by a concurrent block_sum. */
static __device__ float block_sum(float v, float *sh)
{
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.0f;
    int nw = (int)(blockDim.x >> 5);
    for (int i = 0; i < nw; i++) t += sh[i];
    return t;
}

static int aligned_to(const void *p, uintptr_t a)
{
    return ((uintptr_t)p & (a - 1)) == 0;
}

/* Threads for a one-block-per-row kernel over `units` work items: a multiple of 32 in [32, cap]. */
static int row_threads(int64_t units, int cap)
{
    int64_t t = (units + 31) / 32 * 32;
    if (t < 32) t = 32;
    if (t > cap) t = cap;
    return (int)t;
}

#define EW_THREADS 256 /* element-wise kernels: threads per block, 4 columns per thread */

/* Grid of an element-wise kernel over [rows, cols] with 4 columns per thread. */
static dim3 ew_grid(int rows, int64_t cols)
{
    int64_t groups = (cols + 3) / 4;
    dim3 g((unsigned)((groups + EW_THREADS - 1) / EW_THREADS), (unsigned)(rows < 65535 ? rows : 65535), 1);
    return g;
}

/* ------------------------------------------------------------------------------------------------
 * Norms: one block per row, the row read twice (LayerNorm three times; the repeats hit L1/L2), or
 * once from registers where a block holds the whole row (RMSNorm up to 4096 values).
 */

#define NORM_MAX_THREADS 256

__global__ void __launch_bounds__(NORM_MAX_THREADS)
k_rmsnorm_bf16(const float *__restrict__ x, const float *__restrict__ w, vhc_bf16 *__restrict__ out, int dim,
               float eps, const int32_t *__restrict__ row_index, int vec)
{
    __shared__ float sh[32];
    const int r = blockIdx.x;
    const int64_t src = row_index ? (int64_t)row_index[r] : (int64_t)r;
    const float *xr = x + src * dim;
    vhc_bf16 *o = out + (int64_t)r * dim;
    float ss = 0.0f;
    if (vec) {
        const float4 *x4 = (const float4 *)xr;
        const int n4 = dim >> 2;
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 t = x4[i];
            ss = fmaf(t.x, t.x, ss);
            ss = fmaf(t.y, t.y, ss);
            ss = fmaf(t.z, t.z, ss);
            ss = fmaf(t.w, t.w, ss);
        }
    } else {
        for (int i = threadIdx.x; i < dim; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
    }
    ss = block_sum(ss, sh);
    /* HF LlamaRMSNorm: x * rsqrt(mean(x^2) + eps), then weight * that (two fp32 products) */
    const float rs = 1.0f / sqrtf(ss / (float)dim + eps);
    if (vec) {
        const float4 *x4 = (const float4 *)xr, *w4 = (const float4 *)w;
        const int n4 = dim >> 2;
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 t = x4[i], g = w4[i];
            store_bf4(o + 4 * (int64_t)i, g.x * (t.x * rs), g.y * (t.y * rs), g.z * (t.z * rs), g.w * (t.w * rs));
        }
    } else {
        for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = f2bf(w[i] * (xr[i] * rs));
    }
}

/* Rows of at most 4 * NORM_REG_THREADS values, vectorisable: each thread holds one float4 of the
 * row in registers, so the row is read once (a decode step's norms are latency, not bandwidth). */
#define NORM_REG_THREADS 1024

__global__ void __launch_bounds__(NORM_REG_THREADS)
k_rmsnorm_bf16_reg(const float *__restrict__ x, const float *__restrict__ w, vhc_bf16 *__restrict__ out, int dim,
                   float eps, const int32_t *__restrict__ row_index)
{
    __shared__ float sh[32];
    const int r = blockIdx.x, i = threadIdx.x, n4 = dim >> 2;
    const int64_t src = row_index ? (int64_t)row_index[r] : (int64_t)r;
    float4 t = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (i < n4) t = ((const float4 *)(x + src * dim))[i];
    float ss = fmaf(t.x, t.x, 0.0f);
    ss = fmaf(t.y, t.y, ss);
    ss = fmaf(t.z, t.z, ss);
    ss = fmaf(t.w, t.w, ss);
    ss = block_sum(ss, sh);
    const float rs = 1.0f / sqrtf(ss / (float)dim + eps);
    if (i < n4) {
        const float4 g = ((const float4 *)w)[i];
        store_bf4(out + (int64_t)r * dim + 4 * (int64_t)i, g.x * (t.x * rs), g.y * (t.y * rs), g.z * (t.z * rs),
                  g.w * (t.w * rs));
    }
}

extern "C" void vhc_rmsnorm_bf16(cudaStream_t s, const float *x, const float *w, vhc_bf16 *out, int rows, int dim,
                                 float eps, const int32_t *row_index)
{
    if (rows <= 0 || dim <= 0) return;
    int vec = (dim % 4 == 0) && aligned_to(x, 16) && aligned_to(w, 16) && aligned_to(out, 8);
    if (vec && dim / 4 <= NORM_REG_THREADS) {
        k_rmsnorm_bf16_reg<<<(unsigned)rows, row_threads(dim / 4, NORM_REG_THREADS), 0, s>>>(x, w, out, dim, eps,
                                                                                            row_index);
        return;
    }
    int threads = row_threads(vec ? dim / 4 : dim, NORM_MAX_THREADS);
    k_rmsnorm_bf16<<<(unsigned)rows, threads, 0, s>>>(x, w, out, dim, eps, row_index, vec);
}

__global__ void __launch_bounds__(NORM_MAX_THREADS)
k_layernorm_bf16(const float *__restrict__ x, const float *__restrict__ gamma, const float *__restrict__ beta,
                 vhc_bf16 *__restrict__ out, int dim, float eps, int vec)
{
    __shared__ float sh_mean[32], sh_var[32];
    const int r = blockIdx.x;
    const float *xr = x + (int64_t)r * dim;
    vhc_bf16 *o = out + (int64_t)r * dim;
    const int n4 = dim >> 2;
    float sum = 0.0f;
    if (vec) {
        const float4 *x4 = (const float4 *)xr;
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 t = x4[i];
            sum += t.x;
            sum += t.y;
            sum += t.z;
            sum += t.w;
        }
    } else {
        for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i];
    }
    const float mean = block_sum(sum, sh_mean) / (float)dim;
    /* two-pass biased variance: no cancellation whatever the mean */
    float sq = 0.0f;
    if (vec) {
        const float4 *x4 = (const float4 *)xr;
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 t = x4[i];
            float d0 = t.x - mean, d1 = t.y - mean, d2 = t.z - mean, d3 = t.w - mean;
            sq = fmaf(d0, d0, sq);
            sq = fmaf(d1, d1, sq);
            sq = fmaf(d2, d2, sq);
            sq = fmaf(d3, d3, sq);
        }
    } else {
        for (int i = threadIdx.x; i < dim; i += blockDim.x) {
            float d = xr[i] - mean;
            sq = fmaf(d, d, sq);
        }
    }
    const float var = block_sum(sq, sh_var) / (float)dim;
    const float rstd = 1.0f / sqrtf(var + eps);
    if (vec) {
        const float4 *x4 = (const float4 *)xr, *g4 = (const float4 *)gamma, *b4 = (const float4 *)beta;
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 t = x4[i], g = g4[i], b = b4[i];
            store_bf4(o + 4 * (int64_t)i, (t.x - mean) * rstd * g.x + b.x, (t.y - mean) * rstd * g.y + b.y,
                      (t.z - mean) * rstd * g.z + b.z, (t.w - mean) * rstd * g.w + b.w);
        }
    } else {
        for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = f2bf((xr[i] - mean) * rstd * gamma[i] + beta[i]);
    }
}

extern "C" void vhc_layernorm_bf16(cudaStream_t s, const float *x, const float *gamma, const float *beta,
                                   vhc_bf16 *out, int rows, int dim, float eps)
{
    if (rows <= 0 || dim <= 0) return;
    int vec = (dim % 4 == 0) && aligned_to(x, 16) && aligned_to(gamma, 16) && aligned_to(beta, 16) &&
              aligned_to(out, 8);
    int threads = row_threads(vec ? dim / 4 : dim, NORM_MAX_THREADS);
    k_layernorm_bf16<<<(unsigned)rows, threads, 0, s>>>(x, gamma, beta, out, dim, eps, vec);
}

/* ------------------------------------------------------------------------------------------------
 * Element-wise kernels over [rows, cols]: thread = 4 consecutive columns of every row
 * blockIdx.y, blockIdx.y + gridDim.y, ...; vec: cols % 4 == 0 and every pointer aligned for
 * float4 / bf16 x 4 access.
 */

/* torch's exact GELU in fp32: (x * 0.5) * (1 + erf(x / sqrt 2)) */
static __device__ __forceinline__ float gelu_exact(float x)
{
    return (x * 0.5f) * (1.0f + erff(x * 0.707106781186547524f));
}

__global__ void __launch_bounds__(EW_THREADS)
k_bias_gelu_bf16(const float *__restrict__ in, const float *__restrict__ bias, vhc_bf16 *__restrict__ out,
                 int rows, int cols, int vec)
{
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (c >= cols) return;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *ir = in + (int64_t)r * cols;
        vhc_bf16 *orow = out + (int64_t)r * cols;
        if (vec) {
            float4 t = *(const float4 *)(ir + c);
            if (bias) {
                float4 b = *(const float4 *)(bias + c);
                t.x += b.x;
                t.y += b.y;
                t.z += b.z;
                t.w += b.w;
            }
            store_bf4(orow + c, gelu_exact(t.x), gelu_exact(t.y), gelu_exact(t.z), gelu_exact(t.w));
        } else {
            for (int64_t i = c; i < c + 4 && i < cols; i++) {
                float t = ir[i];
                if (bias) t += bias[i];
                orow[i] = f2bf(gelu_exact(t));
            }
        }
    }
}

extern "C" void vhc_bias_gelu_bf16(cudaStream_t s, const float *in, const float *bias, vhc_bf16 *out, int rows,
                                   int cols)
{
    if (rows <= 0 || cols <= 0) return;
    int vec = (cols % 4 == 0) && aligned_to(in, 16) && aligned_to(bias, 16) && aligned_to(out, 8);
    k_bias_gelu_bf16<<<ew_grid(rows, cols), EW_THREADS, 0, s>>>(in, bias, out, rows, cols, vec);
}

/* out may alias in: no __restrict__ on them. */
__global__ void __launch_bounds__(EW_THREADS)
k_bias_add_f32(const float *in, const float *__restrict__ bias, float *out, int rows, int cols, int vec)
{
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (c >= cols) return;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *ir = in + (int64_t)r * cols;
        float *orow = out + (int64_t)r * cols;
        if (vec) {
            float4 t = *(const float4 *)(ir + c), b = *(const float4 *)(bias + c);
            t.x += b.x;
            t.y += b.y;
            t.z += b.z;
            t.w += b.w;
            *(float4 *)(orow + c) = t;
        } else {
            for (int64_t i = c; i < c + 4 && i < cols; i++) orow[i] = ir[i] + bias[i];
        }
    }
}

extern "C" void vhc_bias_add_f32(cudaStream_t s, const float *in, const float *bias, float *out, int rows, int cols)
{
    if (rows <= 0 || cols <= 0) return;
    int vec = (cols % 4 == 0) && aligned_to(in, 16) && aligned_to(bias, 16) && aligned_to(out, 16);
    k_bias_add_f32<<<ew_grid(rows, cols), EW_THREADS, 0, s>>>(in, bias, out, rows, cols, vec);
}

/* x + scale * (t + bias), each operation rounded to fp32 in that order (no contraction), as the
 * PyTorch modules do it: Linear bias, LayerScale product, residual sum. */
static __device__ __forceinline__ float residual_one(float x, float t, const float *bias, const float *scale,
                                                     int64_t c)
{
    if (bias) t = __fadd_rn(t, bias[c]);
    if (scale) t = __fmul_rn(scale[c], t);
    return __fadd_rn(x, t);
}

__global__ void __launch_bounds__(EW_THREADS)
k_residual_add(float *__restrict__ x, const float *__restrict__ t, const float *__restrict__ bias,
               const float *__restrict__ scale, int rows, int dim, int vec)
{
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (c >= dim) return;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        float *xr = x + (int64_t)r * dim;
        const float *tr = t + (int64_t)r * dim;
        if (vec) {
            float4 a = *(float4 *)(xr + c), b = *(const float4 *)(tr + c);
            a.x = residual_one(a.x, b.x, bias, scale, c);
            a.y = residual_one(a.y, b.y, bias, scale, c + 1);
            a.z = residual_one(a.z, b.z, bias, scale, c + 2);
            a.w = residual_one(a.w, b.w, bias, scale, c + 3);
            *(float4 *)(xr + c) = a;
        } else {
            for (int64_t i = c; i < c + 4 && i < dim; i++) xr[i] = residual_one(xr[i], tr[i], bias, scale, i);
        }
    }
}

extern "C" void vhc_residual_add(cudaStream_t s, float *x, const float *t, const float *bias, const float *scale,
                                 int rows, int dim)
{
    if (rows <= 0 || dim <= 0) return;
    /* bias / scale are read per element even on the vector path: only x and t need alignment */
    int vec = (dim % 4 == 0) && aligned_to(x, 16) && aligned_to(t, 16);
    k_residual_add<<<ew_grid(rows, dim), EW_THREADS, 0, s>>>(x, t, bias, scale, rows, dim, vec);
}

/* no __launch_bounds__: with it ptxas aims at 32 registers on sm_80 and spills */
__global__ void k_silu_mul_bf16(const float *__restrict__ gu, vhc_bf16 *__restrict__ out, int rows, int F, int vec)
{
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (c >= F) return;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *g = gu + (int64_t)r * 2 * F, *u = g + F;
        vhc_bf16 *orow = out + (int64_t)r * F;
        if (vec) {
            float4 a = *(const float4 *)(g + c), b = *(const float4 *)(u + c);
            store_bf4(orow + c, silu_mul(a.x, b.x), silu_mul(a.y, b.y), silu_mul(a.z, b.z), silu_mul(a.w, b.w));
        } else {
            for (int64_t i = c; i < c + 4 && i < F; i++) orow[i] = f2bf(silu_mul(g[i], u[i]));
        }
    }
}

extern "C" void vhc_silu_mul_bf16(cudaStream_t s, const float *gu, vhc_bf16 *out, int rows, int F)
{
    if (rows <= 0 || F <= 0) return;
    int vec = (F % 4 == 0) && aligned_to(gu, 16) && aligned_to(out, 8);
    k_silu_mul_bf16<<<ew_grid(rows, F), EW_THREADS, 0, s>>>(gu, out, rows, F, vec);
}

__global__ void __launch_bounds__(EW_THREADS)
k_f32_to_bf16(const float *__restrict__ in, vhc_bf16 *__restrict__ out, int64_t n, int vec)
{
    const int64_t groups = (n + 3) / 4, step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += step) {
        const int64_t i = g * 4;
        if (vec && i + 4 <= n) {
            float4 t = *(const float4 *)(in + i);
            store_bf4(out + i, t.x, t.y, t.z, t.w);
        } else {
            for (int64_t j = i; j < i + 4 && j < n; j++) out[j] = f2bf(in[j]);
        }
    }
}

extern "C" void vhc_f32_to_bf16(cudaStream_t s, const float *in, vhc_bf16 *out, int64_t n)
{
    if (n <= 0) return;
    int vec = aligned_to(in, 16) && aligned_to(out, 8);
    int64_t blocks = ((n + 3) / 4 + EW_THREADS - 1) / EW_THREADS;
    if (blocks > (1 << 20)) blocks = 1 << 20; /* grid-stride beyond */
    k_f32_to_bf16<<<(unsigned)blocks, EW_THREADS, 0, s>>>(in, out, n, vec);
}

/* ------------------------------------------------------------------------------------------------
 * ViT qkv split: [T, 3D] (+ bias) -> q, k, v [T, D] bf16. Thread = 4 columns of the 3D.
 */

__global__ void __launch_bounds__(EW_THREADS)
k_vit_qkv_split(const float *__restrict__ qkv, const float *__restrict__ bias, vhc_bf16 *__restrict__ q,
                vhc_bf16 *__restrict__ k, vhc_bf16 *__restrict__ v, int T, int D, int vec)
{
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4, width = 3 * (int64_t)D;
    if (c >= width) return;
    for (int t = blockIdx.y; t < T; t += gridDim.y) {
        const float *row = qkv + (int64_t)t * width;
        if (vec) { /* D % 4 == 0: the 4 columns lie in one of q, k, v */
            const int64_t part = c / D, cc = c - part * D;
            vhc_bf16 *dst = (part == 0 ? q : part == 1 ? k : v) + (int64_t)t * D + cc;
            float4 a = *(const float4 *)(row + c);
            if (bias) {
                float4 b = *(const float4 *)(bias + c);
                a.x += b.x;
                a.y += b.y;
                a.z += b.z;
                a.w += b.w;
            }
            store_bf4(dst, a.x, a.y, a.z, a.w);
        } else {
            for (int64_t i = c; i < c + 4 && i < width; i++) {
                const int64_t part = i / D, cc = i - part * D;
                vhc_bf16 *dst = (part == 0 ? q : part == 1 ? k : v) + (int64_t)t * D + cc;
                float a = row[i];
                if (bias) a += bias[i];
                *dst = f2bf(a);
            }
        }
    }
}

extern "C" void vhc_vit_qkv_split(cudaStream_t s, const float *qkv, const float *bias, vhc_bf16 *q, vhc_bf16 *k,
                                  vhc_bf16 *v, int T, int D)
{
    if (T <= 0 || D <= 0) return;
    int vec = (D % 4 == 0) && aligned_to(qkv, 16) && aligned_to(bias, 16) && aligned_to(q, 8) && aligned_to(k, 8) &&
              aligned_to(v, 8);
    k_vit_qkv_split<<<ew_grid(T, 3 * (int64_t)D), EW_THREADS, 0, s>>>(qkv, bias, q, k, v, T, D, vec);
}

/* ------------------------------------------------------------------------------------------------
 * LLM RoPE + cache write: blocks (row, slice): the row's (i, i + hd/2) pairs of q | k | v are cut into
 * slices of blockDim pairs (so a decode step's single row still fills many SMs); with many rows a
 * block takes several slices of its row in turn (fewer blocks, each computing the row's cos / sin
 * once). Each block puts the row's cos / sin (one pair per frequency) in shared memory, then thread
 * = one pair of a slice.
 */

#define ROPE_MAX_THREADS 256

__global__ void __launch_bounds__(ROPE_MAX_THREADS)
k_llm_rope_qkv(const float *__restrict__ qkv, const vhc_row *__restrict__ rows, vhc_bf16 *__restrict__ q_out,
               vhc_bf16 *__restrict__ k_cache, vhc_bf16 *__restrict__ v_cache, int n_heads, int n_kv_heads,
               int hd, const float *__restrict__ inv_freq)
{
    extern __shared__ float cs[]; /* cos [half] | sin [half] */
    const int r = blockIdx.x, half = hd >> 1;
    const float pos = (float)rows[r].rope_pos;
    const int64_t kv_write = rows[r].kv_write;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        const float angle = pos * inv_freq[i]; /* fp32, as transformers' (t * inv_freq) */
        cs[i] = cosf(angle);
        cs[half + i] = sinf(angle);
    }
    __syncthreads();
    const int width = n_heads + 2 * n_kv_heads, units = width * half;
    const float *row = qkv + (int64_t)r * width * hd;
    for (int u = blockIdx.y * blockDim.x + threadIdx.x; u < units; u += gridDim.y * blockDim.x) {
        const int head = u / half, i = u - head * half;
        const float a = row[head * hd + i], b = row[head * hd + i + half];
        vhc_bf16 *dst;
        float oa = a, ob = b;
        if (head < n_heads + n_kv_heads) {
            rope_rotate(a, b, cs[i], cs[half + i], &oa, &ob);
            dst = head < n_heads ? q_out + ((int64_t)r * n_heads + head) * hd
                                 : k_cache + kv_write + (int64_t)(head - n_heads) * hd;
        } else {
            dst = v_cache + kv_write + (int64_t)(head - n_heads - n_kv_heads) * hd;
        }
        dst[i] = f2bf(oa);
        dst[i + half] = f2bf(ob);
    }
}

extern "C" void vhc_rope_inv_freq(float theta, int head_dim, float *out)
{
    /* transformers: inv_freq = 1.0 / (base ** (arange(0, dim, 2).float() / dim)), all fp32; the fp32
     * power comes from the double one, rounded once (what a correctly rounded powf gives) */
    for (int i = 0; i < head_dim / 2; i++) {
        const float e = (float)(2 * i) / (float)head_dim;
        const float pw = (float)pow((double)theta, (double)e);
        out[i] = 1.0f / pw;
    }
}

extern "C" void vhc_llm_rope_qkv(cudaStream_t s, const float *qkv, const vhc_row *rows, vhc_bf16 *q_out,
                                 vhc_bf16 *k_cache, vhc_bf16 *v_cache, int R, int n_heads, int n_kv_heads,
                                 int head_dim, const float *inv_freq)
{
    /* rotate-half RoPE needs an even head_dim */
    if (R <= 0 || n_heads <= 0 || n_kv_heads < 0 || head_dim < 2 || (head_dim & 1)) return;
    int64_t units = (int64_t)(n_heads + 2 * n_kv_heads) * (head_dim / 2);
    int threads = row_threads(units, ROPE_MAX_THREADS);
    int64_t slices = (units + threads - 1) / threads;
    if (slices > 65535) return; /* > 16M pairs per row: no such model */
    const int64_t slice_blocks = 1024 / R > 1 ? 1024 / R : 1; /* ~1024 blocks in all where rows allow */
    size_t smem = (size_t)head_dim * sizeof(float);
    dim3 grid((unsigned)R, (unsigned)(slices < slice_blocks ? slices : slice_blocks), 1);
    k_llm_rope_qkv<<<grid, threads, smem, s>>>(qkv, rows, q_out, k_cache, v_cache, n_heads, n_kv_heads, head_dim,
                                               inv_freq);
}

/* ------------------------------------------------------------------------------------------------
 * Attention: a warp's pass over the keys of one (query row, head) (att_pass); dense calls give each
 * warp a row's keys, the row kernel further down splits a row's keys over several warps. Lane l
 * holds elements [l E, l E + E) of q and of the output accumulator (E = 1, 2, 4 or 8: the smallest
 * power of two with 32 E >= head_dim). Keys stream in blocks of ATT_KB = 8 (all 16 K / V loads of
 * a block issued before their first use; launches with few warps take a variant that also loads
 * the next block while computing the current one). Per block:
 *  - each lane: 8 partial dot products over its E elements (fp32 FMA chain, e ascending);
 *  - a reduce-scatter over the warp: halving steps at lane offsets 16, 8, 4 leave lane l with the
 *    sum over 8 lanes of the partials of key kb(l) = 4 bit4(l) + 2 bit3(l) + bit2(l); a butterfly
 *    at offsets 2, 1 completes the 32-lane sum (identical bits in the 4 lanes holding one key:
 *    fp32 addition is commutative). 9 shuffles for 8 dot products instead of 40;
 *  - score s = dot * scale; block max by a butterfly at 16, 8, 4; online softmax: the running max
 *    m, the running sum l and the accumulator rescaled by expf(m_old - m_new); each lane computes
 *    expf for its own key and the 8 weights are broadcast (8 shuffles);
 *  - acc[e] = acc[e] * corr + sum_kb p_kb v_kb[e] (FMA chain, kb ascending).
 * K and V of a warp are read with 2E-byte vector loads when head_dim % E == 0 and the warp's K and
 * V rows (base, kv_stride, kv head offset) are 2E-byte aligned (checked per warp, as the base
 * comes from device memory); otherwise with 2-byte loads. q and out use 2-byte accesses.
 * A row with n_keys <= 0 gets zeros.
 */

#define ATT_WARPS 4 /* warps per block: consecutive query rows of one head, so they share K/V in L1 */
#define ATT_KB 8    /* keys per block */
#define ATT_MAXW 4  /* 32-bit words per lane per key row: E / 2 for E up to 8 */

/* bf16 element e of a lane's packed words */
static __device__ __forceinline__ float att_elt(const unsigned *w, int e)
{
    return (e & 1) ? bf_hi(w[e >> 1]) : bf_lo(w[e >> 1]);
}

/* E bf16 values at p into packed words; nvalid (0..E) of them exist; VEC: one 2E-byte load. */
static __device__ __forceinline__ void att_load(const vhc_bf16 *__restrict__ p, int nvalid, unsigned *w, const int E,
                                                const int VEC)
{
#pragma unroll
    for (int i = 0; i < ATT_MAXW; i++) w[i] = 0u;
    if (VEC) { /* nvalid is 0 or E */
        if (nvalid > 0) {
            if (E == 8) {
                uint4 t = __ldg((const uint4 *)p);
                w[0] = t.x;
                w[1] = t.y;
                w[2] = t.z;
                w[3] = t.w;
            } else if (E == 4) {
                uint2 t = __ldg((const uint2 *)p);
                w[0] = t.x;
                w[1] = t.y;
            } else {
                w[0] = __ldg((const unsigned int *)p);
            }
        }
    } else {
#pragma unroll
        for (int e = 0; e < E; e++) {
            if (e < nvalid) {
                unsigned b = __ldg(p + e);
                w[e >> 1] |= (e & 1) ? (b << 16) : b;
            }
        }
    }
}

/* K and V of keys j0 .. j0 + nk - 1 (nk <= ATT_KB; the others zero). */
static __device__ __forceinline__ void att_load_block(const vhc_bf16 *__restrict__ kp, const vhc_bf16 *__restrict__ vp,
                                                      int64_t kv_stride, int j0, int nk, int nvalid,
                                                      unsigned kw[ATT_KB][ATT_MAXW], unsigned vw[ATT_KB][ATT_MAXW],
                                                      const int E, const int VEC)
{
#pragma unroll
    for (int kb = 0; kb < ATT_KB; kb++) {
        const int64_t off = (int64_t)(j0 + kb) * kv_stride;
        att_load(kp + off, kb < nk ? nvalid : 0, kw[kb], E, VEC);
        att_load(vp + off, kb < nk ? nvalid : 0, vw[kb], E, VEC);
    }
}

/* One block of ATT_KB keys (nk of them real) into the running m, l, acc. */
static __device__ __forceinline__ void att_step(const unsigned kw[ATT_KB][ATT_MAXW],
                                                const unsigned vw[ATT_KB][ATT_MAXW], int nk, const float *qf,
                                                float *acc, float *m, float *l, float scale, int lane, const int E)
{
    float part[ATT_KB];
#pragma unroll
    for (int kb = 0; kb < ATT_KB; kb++) {
        float d = 0.0f;
#pragma unroll
        for (int e = 0; e < E; e++) d = fmaf(qf[e], att_elt(kw[kb], e), d);
        part[kb] = d;
    }
    /* reduce-scatter: after step st (offset 16 >> st) a lane keeps half of its keys */
#pragma unroll
    for (int st = 0; st < 3; st++) {
        const int o = 16 >> st, hk = ATT_KB >> (st + 1);
        const bool upper = (lane & o) != 0;
#pragma unroll
        for (int i = 0; i < hk; i++) {
            const float send = upper ? part[i] : part[i + hk];
            const float keep = upper ? part[i + hk] : part[i];
            part[i] = keep + __shfl_xor_sync(FULL_MASK, send, o);
        }
    }
    float dot = part[0];
    dot += __shfl_xor_sync(FULL_MASK, dot, 2);
    dot += __shfl_xor_sync(FULL_MASK, dot, 1);
    const int mykey = ((lane >> 4) & 1) * 4 + ((lane >> 3) & 1) * 2 + ((lane >> 2) & 1);
    const float sc = mykey < nk ? dot * scale : -INFINITY;
    float mb = fmaxf(sc, __shfl_xor_sync(FULL_MASK, sc, 16));
    mb = fmaxf(mb, __shfl_xor_sync(FULL_MASK, mb, 8));
    mb = fmaxf(mb, __shfl_xor_sync(FULL_MASK, mb, 4));
    const float m_new = fmaxf(*m, mb);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new; /* only with -inf scores: keep NaN out */
    const float corr = expf(*m - m_use);
    const float p = expf(sc - m_use);
    float pk[ATT_KB];
    float psum = 0.0f;
#pragma unroll
    for (int kb = 0; kb < ATT_KB; kb++) {
        const int src = ((kb >> 2) & 1) * 16 + ((kb >> 1) & 1) * 8 + (kb & 1) * 4;
        pk[kb] = __shfl_sync(FULL_MASK, p, src);
        psum += pk[kb];
    }
    *l = *l * corr + psum;
#pragma unroll
    for (int e = 0; e < E; e++) {
        float a = acc[e] * corr;
#pragma unroll
        for (int kb = 0; kb < ATT_KB; kb++) a = fmaf(pk[kb], att_elt(vw[kb], e), a);
        acc[e] = a;
    }
    *m = m_new;
}

/* All keys of one warp's (row, head); kp, vp: the lane's first element of key 0. PF: load the next
 * block of keys while computing the current one (more registers: for launches with few warps). */
static __device__ __forceinline__ void att_keys(const vhc_bf16 *__restrict__ kp, const vhc_bf16 *__restrict__ vp,
                                                int64_t kv_stride, int n, int nvalid, const float *qf, float *acc,
                                                float *m_out, float *l, float scale, int lane, const int E,
                                                const int VEC, const int PF)
{
    float m = -INFINITY;
    unsigned kc[ATT_KB][ATT_MAXW], vc[ATT_KB][ATT_MAXW];
    int j0 = 0;
    if (PF) {
        if (n >= ATT_KB) att_load_block(kp, vp, kv_stride, 0, ATT_KB, nvalid, kc, vc, E, VEC);
        while (j0 + ATT_KB <= n) {
            const bool have_next = j0 + 2 * ATT_KB <= n;
            unsigned kn[ATT_KB][ATT_MAXW], vn[ATT_KB][ATT_MAXW];
            if (have_next) att_load_block(kp, vp, kv_stride, j0 + ATT_KB, ATT_KB, nvalid, kn, vn, E, VEC);
            att_step(kc, vc, ATT_KB, qf, acc, &m, l, scale, lane, E);
            if (have_next) {
#pragma unroll
                for (int kb = 0; kb < ATT_KB; kb++) {
#pragma unroll
                    for (int i = 0; i < ATT_MAXW; i++) {
                        kc[kb][i] = kn[kb][i];
                        vc[kb][i] = vn[kb][i];
                    }
                }
            }
            j0 += ATT_KB;
        }
    } else {
        for (; j0 + ATT_KB <= n; j0 += ATT_KB) {
            att_load_block(kp, vp, kv_stride, j0, ATT_KB, nvalid, kc, vc, E, VEC);
            att_step(kc, vc, ATT_KB, qf, acc, &m, l, scale, lane, E);
        }
    }
    if (j0 < n) {
        att_load_block(kp, vp, kv_stride, j0, n - j0, nvalid, kc, vc, E, VEC);
        att_step(kc, vc, n - j0, qf, acc, &m, l, scale, lane, E);
    }
    *m_out = m;
}

/* One warp over keys [0, n) of one (row, head): qh is the row's head in q, kp / vp the kv head's
 * elements of key 0. Leaves the lane's E accumulator elements in acc, the running max in *m and
 * sum in *l (acc = 0, m = -inf, l = 0 when n <= 0); returns how many of the E elements exist. */
static __device__ __forceinline__ int att_pass(const vhc_bf16 *__restrict__ qh, const vhc_bf16 *__restrict__ kp,
                                               const vhc_bf16 *__restrict__ vp, int64_t kv_stride, int n, int hd,
                                               float scale, float *acc, float *m, float *l, const int E,
                                               const int PF)
{
    const int lane = threadIdx.x & 31, d0 = lane * E;
    const int nvalid = hd - d0 <= 0 ? 0 : (hd - d0 >= E ? E : hd - d0);
    float qf[8];
#pragma unroll
    for (int e = 0; e < E; e++) {
        qf[e] = e < nvalid ? bf2f(qh[d0 + e]) : 0.0f;
        acc[e] = 0.0f;
    }
    *l = 0.0f;
    const uintptr_t al = (uintptr_t)kp | (uintptr_t)vp | (uintptr_t)(kv_stride * 2);
    const bool vec = E > 1 && hd % E == 0 && (al & (uintptr_t)(2 * E - 1)) == 0;
    if (vec)
        att_keys(kp + d0, vp + d0, kv_stride, n, nvalid, qf, acc, m, l, scale, lane, E, 1, PF);
    else
        att_keys(kp + d0, vp + d0, kv_stride, n, nvalid, qf, acc, m, l, scale, lane, E, 0, PF);
    return nvalid;
}

/* Dense attention (no row metadata): warp = query row r of head blockIdx.y over n_keys keys. */
static __device__ __forceinline__ void att_warp(const vhc_bf16 *__restrict__ q, int64_t q_stride,
                                                const vhc_bf16 *__restrict__ k, const vhc_bf16 *__restrict__ v,
                                                int64_t kv_stride, int n_keys, vhc_bf16 *__restrict__ out,
                                                int64_t out_stride, int R, int group, int hd, float scale,
                                                const int E, const int PF)
{
    const int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (r >= R) return; /* whole warp; no block-wide synchronisation below */
    const int h = blockIdx.y, kvh = h / group, d0 = (threadIdx.x & 31) * E;
    float acc[8], m, l;
    const int nvalid = att_pass(q + (int64_t)r * q_stride + (int64_t)h * hd, k + (int64_t)kvh * hd,
                                v + (int64_t)kvh * hd, kv_stride, n_keys, hd, scale, acc, &m, &l, E, PF);
    vhc_bf16 *op = out + (int64_t)r * out_stride + (int64_t)h * hd + d0;
#pragma unroll
    for (int e = 0; e < E; e++)
        if (e < nvalid) op[e] = f2bf(n_keys > 0 ? acc[e] / l : 0.0f);
}

/*
 * Attention of rows with their own sequences (LLM batches): one block per (row, head), its keys cut
 * into up to ATT_SPLIT contiguous slices of whole ATT_KB-key blocks, one warp each (the per-warp
 * loop above, prefetching), so a decode step's few (row, head) pairs still fill the GPU. The slices
 * merge in shared memory, in warp order: M = max m_w, L = sum_w l_w e^(m_w - M),
 * out = sum_w acc_w e^(m_w - M) / L. The slicing depends on the row's n_keys only, so a row's
 * result does not depend on the other rows of the batch.
 */
#define ATT_SPLIT 8          /* warps per (row, head) */
#define ATT_SPLIT_MIN_KEYS 32 /* keys per warp at least, before another warp joins */

static __device__ __forceinline__ void att_split(const vhc_bf16 *__restrict__ q, int64_t q_stride,
                                                 const vhc_bf16 *__restrict__ k, const vhc_bf16 *__restrict__ v,
                                                 int64_t kv_stride, const vhc_row *__restrict__ rows,
                                                 vhc_bf16 *__restrict__ out, int64_t out_stride, int group, int hd,
                                                 float scale, const int E, const int PF)
{
    __shared__ float sm_m[ATT_SPLIT], sm_l[ATT_SPLIT], sm_acc[ATT_SPLIT][256];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const int r = blockIdx.x, h = blockIdx.y, kvh = h / group;
    const int64_t base = rows[r].kv_seq_base;
    const int n = rows[r].n_keys;
    int nsplit = (n + ATT_SPLIT_MIN_KEYS - 1) / ATT_SPLIT_MIN_KEYS;
    nsplit = nsplit < 1 ? 1 : nsplit > ATT_SPLIT ? ATT_SPLIT : nsplit;
    const int per = n <= 0 ? 0 : ((n + nsplit - 1) / nsplit + ATT_KB - 1) / ATT_KB * ATT_KB;
    const int j0 = w * per, j1 = j0 + per < n ? j0 + per : n;
    const int d0 = lane * E;
    float acc[8], l, m;
    const int nvalid = att_pass(q + (int64_t)r * q_stride + (int64_t)h * hd,
                                k + base + (int64_t)kvh * hd + (int64_t)j0 * kv_stride,
                                v + base + (int64_t)kvh * hd + (int64_t)j0 * kv_stride, kv_stride,
                                j1 > j0 ? j1 - j0 : 0, hd, scale, acc, &m, &l, E, PF);
    if (lane == 0) sm_m[w] = m, sm_l[w] = l;
#pragma unroll
    for (int e = 0; e < E; e++)
        if (e < nvalid) sm_acc[w][d0 + e] = acc[e];
    __syncthreads();
    const int nw = (int)(blockDim.x >> 5);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float mx = -INFINITY;
        for (int i = 0; i < nw; i++) mx = fmaxf(mx, sm_m[i]);
        float o = 0.0f;
        if (mx != -INFINITY) {
            float sum = 0.0f, a = 0.0f;
            for (int i = 0; i < nw; i++) {
                const float c = expf(sm_m[i] - mx); /* 0 for an empty slice (m = -inf) */
                sum = fmaf(sm_l[i], c, sum);
                a = fmaf(sm_acc[i][d], c, a);
            }
            o = a / sum;
        }
        out[(int64_t)r * out_stride + (int64_t)h * hd + d] = f2bf(o);
    }
}

#define ATT_SPLIT_PARAMS                                                                                            \
    const vhc_bf16 *__restrict__ q, int64_t q_stride, const vhc_bf16 *__restrict__ k, const vhc_bf16 *__restrict__ v, \
        int64_t kv_stride, const vhc_row *__restrict__ rows, vhc_bf16 *__restrict__ out, int64_t out_stride,          \
        int group, int hd, float scale
#define ATT_SPLIT_KERNEL(name, E, PF)                                                                              \
    __global__ void __launch_bounds__(ATT_SPLIT * 32) name(ATT_SPLIT_PARAMS)                                       \
    {                                                                                                              \
        att_split(q, q_stride, k, v, kv_stride, rows, out, out_stride, group, hd, scale, E, PF);                  \
    }
ATT_SPLIT_KERNEL(k_attention_split_e1, 1, 1)
ATT_SPLIT_KERNEL(k_attention_split_e2, 2, 1)
ATT_SPLIT_KERNEL(k_attention_split_e4, 4, 1)
ATT_SPLIT_KERNEL(k_attention_split_e8, 8, 0)

#define ATT_PARAMS                                                                                                 \
    const vhc_bf16 *__restrict__ q, int64_t q_stride, const vhc_bf16 *__restrict__ k, const vhc_bf16 *__restrict__ v, \
        int64_t kv_stride, int n_keys, vhc_bf16 *__restrict__ out, int64_t out_stride, int R, int group, int hd,      \
        float scale
#define ATT_ARGS q, q_stride, k, v, kv_stride, n_keys, out, out_stride, R, group, hd, scale

/* ATT_KERNEL_MIN: with a minimum of resident blocks per SM in __launch_bounds__, which caps the
 * registers; used where that costs no spills (checked with -Xptxas -v for sm_80 .. sm_90).
 * Elsewhere an explicit minimum made ptxas allocate more registers or spill. */
#define ATT_KERNEL(name, E, PF)                                                                                    \
    __global__ void __launch_bounds__(ATT_WARPS * 32) name(ATT_PARAMS)                                             \
    {                                                                                                              \
        att_warp(ATT_ARGS, E, PF);                                                                                 \
    }
#define ATT_KERNEL_MIN(name, E, PF, MIN_BLOCKS)                                                                    \
    __global__ void __launch_bounds__(ATT_WARPS * 32, MIN_BLOCKS) name(ATT_PARAMS)                                 \
    {                                                                                                              \
        att_warp(ATT_ARGS, E, PF);                                                                                 \
    }
ATT_KERNEL_MIN(k_attention_e1, 1, 0, 5)
ATT_KERNEL_MIN(k_attention_e2, 2, 0, 5)
ATT_KERNEL(k_attention_e4, 4, 0)
ATT_KERNEL(k_attention_e8, 8, 0)
ATT_KERNEL(k_attention_pf_e1, 1, 1)
ATT_KERNEL(k_attention_pf_e2, 2, 1)
ATT_KERNEL(k_attention_pf_e4, 4, 1)
/* no prefetching variant for E = 8 (head_dim > 128): its registers would spill */

/* Launches with at most this many warps (decode steps) take the prefetching kernels: too few warps
 * per SM to hide the load latency otherwise. Both variants compute the same bits. */
#define ATT_PF_MAX_WARPS 1024

extern "C" void vhc_attention(cudaStream_t s, const vhc_bf16 *q, int64_t q_stride, const vhc_bf16 *k,
                              const vhc_bf16 *v, int64_t kv_stride, const vhc_row *rows, int n_keys_dense,
                              vhc_bf16 *out, int64_t out_stride, int R, int n_heads, int n_kv_heads, int head_dim,
                              float scale)
{
    if (R <= 0 || n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0 || head_dim <= 0 || head_dim > 256 ||
        n_heads > 65535)
        return;
    const int group = n_heads / n_kv_heads;
    if (rows) {
        void (*split)(ATT_SPLIT_PARAMS) = head_dim <= 32   ? k_attention_split_e1
                                          : head_dim <= 64  ? k_attention_split_e2
                                          : head_dim <= 128 ? k_attention_split_e4
                                                            : k_attention_split_e8;
        dim3 sgrid((unsigned)R, (unsigned)n_heads, 1);
        split<<<sgrid, ATT_SPLIT * 32, 0, s>>>(q, q_stride, k, v, kv_stride, rows, out, out_stride, group, head_dim,
                                               scale);
        return;
    }
    if (vhc_flash_attention_supported(q, q_stride, k, v, kv_stride, out_stride, n_heads, n_kv_heads, head_dim)) {
        vhc_flash_attention(s, q, q_stride, k, v, kv_stride, out, out_stride, R, n_heads, n_kv_heads, head_dim, scale,
                            n_keys_dense, -1);
        return;
    }
    const int wpb = R < ATT_WARPS ? R : ATT_WARPS;
    dim3 grid((unsigned)((R + wpb - 1) / wpb), (unsigned)n_heads, 1);
    const int threads = 32 * wpb;
    const int pf = (int64_t)R * n_heads <= ATT_PF_MAX_WARPS;
    void (*kernel)(ATT_PARAMS);
    if (head_dim <= 32)
        kernel = pf ? k_attention_pf_e1 : k_attention_e1;
    else if (head_dim <= 64)
        kernel = pf ? k_attention_pf_e2 : k_attention_e2;
    else if (head_dim <= 128)
        kernel = pf ? k_attention_pf_e4 : k_attention_e4;
    else
        kernel = k_attention_e8;
    kernel<<<grid, threads, 0, s>>>(q, q_stride, k, v, kv_stride, n_keys_dense, out, out_stride, R, group, head_dim,
                                    scale);
}

/* ------------------------------------------------------------------------------------------------
 * Embedding rows: x[r] = table[token] (bf16 -> fp32, exact) or patch_embeds[patch].
 */

__global__ void __launch_bounds__(EW_THREADS)
k_embed_rows(const vhc_bf16 *__restrict__ table, const float *__restrict__ patch_embeds,
             const vhc_row *__restrict__ rows, float *__restrict__ x, int R, int dim, int vec)
{
    const int64_t c = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (c >= dim) return;
    for (int r = blockIdx.y; r < R; r += gridDim.y) {
        const int token = rows[r].token;
        float *xr = x + (int64_t)r * dim;
        if (token >= 0) {
            const vhc_bf16 *src = table + (int64_t)token * dim;
            if (vec) {
                uint2 t = *(const uint2 *)(src + c);
                *(float4 *)(xr + c) = make_float4(bf_lo(t.x), bf_hi(t.x), bf_lo(t.y), bf_hi(t.y));
            } else {
                for (int64_t i = c; i < c + 4 && i < dim; i++) xr[i] = bf2f(src[i]);
            }
        } else {
            const float *src = patch_embeds + (int64_t)rows[r].patch * dim;
            if (vec) {
                *(float4 *)(xr + c) = *(const float4 *)(src + c);
            } else {
                for (int64_t i = c; i < c + 4 && i < dim; i++) xr[i] = src[i];
            }
        }
    }
}

extern "C" void vhc_embed_rows(cudaStream_t s, const vhc_bf16 *table, const float *patch_embeds, const vhc_row *rows,
                               float *x, int R, int dim)
{
    if (R <= 0 || dim <= 0) return;
    int vec = (dim % 4 == 0) && aligned_to(table, 8) && aligned_to(patch_embeds, 16) && aligned_to(x, 16);
    k_embed_rows<<<ew_grid(R, dim), EW_THREADS, 0, s>>>(table, patch_embeds, rows, x, R, dim, vec);
}

/* ------------------------------------------------------------------------------------------------
 * Argmax per row: one block per row; (value, index) pairs under a total order (NaN above every
 * number, then the value, then the lower index), so the result does not depend on the order of
 * the scan or of the reduction.
 */

#define ARGMAX_THREADS 1024

/* (v, i) beats (bv, bi) */
static __device__ __forceinline__ bool am_better(float v, int64_t i, float bv, int64_t bi)
{
    const bool vn = v != v, bn = bv != bv;
    if (vn || bn) return vn && (!bn || i < bi);
    return v > bv || (v == bv && i < bi);
}

static __device__ __forceinline__ void am_take(float v, int64_t i, float *bv, int64_t *bi)
{
    if (am_better(v, i, *bv, *bi)) {
        *bv = v;
        *bi = i;
    }
}

__global__ void __launch_bounds__(ARGMAX_THREADS)
k_argmax_rows(const float *__restrict__ logits, int64_t n, int32_t *__restrict__ out, int vec)
{
    __shared__ float sv[32];
    __shared__ int64_t si[32];
    const float *x = logits + (int64_t)blockIdx.x * n;
    float bv = -INFINITY;
    int64_t bi = INT64_MAX; /* loses to every element, -inf included (lower index) */
    int64_t i = threadIdx.x;
    if (vec) {
        const float4 *x4 = (const float4 *)x;
        const int64_t n4 = n / 4;
#pragma unroll 4
        for (int64_t g = threadIdx.x; g < n4; g += blockDim.x) {
            float4 t = x4[g];
            am_take(t.x, 4 * g, &bv, &bi);
            am_take(t.y, 4 * g + 1, &bv, &bi);
            am_take(t.z, 4 * g + 2, &bv, &bi);
            am_take(t.w, 4 * g + 3, &bv, &bi);
        }
        i = 4 * n4 + threadIdx.x;
    }
    for (; i < n; i += blockDim.x) am_take(x[i], i, &bv, &bi);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ov = __shfl_xor_sync(FULL_MASK, bv, o);
        const int64_t oi = __shfl_xor_sync(FULL_MASK, bi, o);
        am_take(ov, oi, &bv, &bi);
    }
    if ((threadIdx.x & 31) == 0) {
        sv[threadIdx.x >> 5] = bv;
        si[threadIdx.x >> 5] = bi;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        const int nw = (int)(blockDim.x >> 5);
        for (int w = 1; w < nw; w++) am_take(sv[w], si[w], &bv, &bi);
        out[blockIdx.x] = bi == INT64_MAX ? -1 : (int32_t)bi;
    }
}

extern "C" void vhc_argmax_rows(cudaStream_t s, const float *logits, int rows, int64_t n, int32_t *out)
{
    if (rows <= 0) return;
    if (n < 0) n = 0; /* every row gets -1 */
    int vec = (n % 4 == 0) && aligned_to(logits, 16);
    int threads = row_threads(vec ? n / 4 : n, ARGMAX_THREADS);
    k_argmax_rows<<<(unsigned)rows, threads, 0, s>>>(logits, n, out, vec);
}

/* ------------------------------------------------------------------------------------------------
 * ViT input side: im2col, token assembly, gathering patch tokens for the projector. Small (a few
 * hundred KB per image): one thread per output value, coalesced writes.
 */

__global__ void __launch_bounds__(EW_THREADS)
k_im2col_bf16(const float *__restrict__ pixels, int S, int P, int G, vhc_bf16 *__restrict__ out, int ld, int64_t total)
{
    const int row_len = 3 * P * P, pp = P * P;
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += step) {
        const int64_t prow = idx / ld;
        const int col = (int)(idx - prow * ld);
        if (col >= row_len) {
            out[idx] = 0;
            continue;
        }
        const int gy = (int)(prow / G), gx = (int)(prow - (int64_t)gy * G);
        const int ch = col / pp, rem = col - ch * pp;
        const int ky = rem / P, kx = rem - ky * P;
        out[idx] = f2bf(pixels[((int64_t)ch * S + (int64_t)gy * P + ky) * S + (int64_t)gx * P + kx]);
    }
}

extern "C" void vhc_im2col_bf16(cudaStream_t s, const float *pixels, int S, int P, vhc_bf16 *out, int ld)
{
    if (S <= 0 || P <= 0 || S < P || ld < 3 * P * P) return;
    const int G = S / P;
    const int64_t total = (int64_t)G * G * ld;
    int64_t blocks = (total + EW_THREADS - 1) / EW_THREADS;
    if (blocks > (1 << 20)) blocks = 1 << 20;
    k_im2col_bf16<<<(unsigned)blocks, EW_THREADS, 0, s>>>(pixels, S, P, G, out, ld, total);
}

__global__ void __launch_bounds__(EW_THREADS)
k_vit_assemble(const float *__restrict__ patch_tokens, const float *__restrict__ patch_bias,
               const float *__restrict__ cls, const float *__restrict__ reg, const float *__restrict__ pos, int prefix,
               int pos_first, float *__restrict__ x, int n_tok, int D)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= D) return;
    const int has_cls = cls != NULL;
    for (int t = blockIdx.y; t < n_tok; t += gridDim.y) {
        float val;
        if (t < prefix) {
            val = (has_cls && t == 0) ? cls[c] : reg[(int64_t)(t - has_cls) * D + c];
        } else {
            val = patch_tokens[(int64_t)(t - prefix) * D + c];
            if (patch_bias) val = __fadd_rn(val, patch_bias[c]);
        }
        if (pos && t >= pos_first) val = __fadd_rn(val, pos[(int64_t)(t - pos_first) * D + c]);
        x[(int64_t)t * D + c] = val;
    }
}

extern "C" void vhc_vit_assemble(cudaStream_t s, const float *patch_tokens, const float *patch_bias, const float *cls,
                                 const float *reg, int n_reg, const float *pos, int pos_covers_prefix, float *x, int NP,
                                 int D)
{
    if (D <= 0 || NP < 0) return;
    if (!reg || n_reg < 0) n_reg = 0;
    const int prefix = (cls ? 1 : 0) + n_reg, n_tok = prefix + NP;
    if (n_tok <= 0) return;
    const int pos_first = pos_covers_prefix ? 0 : prefix;
    dim3 grid((unsigned)((D + EW_THREADS - 1) / EW_THREADS), (unsigned)(n_tok < 65535 ? n_tok : 65535), 1);
    k_vit_assemble<<<grid, EW_THREADS, 0, s>>>(patch_tokens, patch_bias, cls, reg, pos, prefix, pos_first, x, n_tok,
                                               D);
}

__global__ void __launch_bounds__(EW_THREADS)
k_gather_patches_bf16(const float *__restrict__ tokens, int prefix, int N, int D, vhc_bf16 *__restrict__ out,
                      int out_col, int Dv)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= D) return;
    for (int n = blockIdx.y; n < N; n += gridDim.y)
        out[(int64_t)n * Dv + out_col + c] = f2bf(tokens[((int64_t)prefix + n) * D + c]);
}

extern "C" void vhc_gather_patches_bf16(cudaStream_t s, const float *tokens, int prefix, int N, int D, vhc_bf16 *out,
                                        int out_col, int Dv)
{
    if (N <= 0 || D <= 0) return;
    dim3 grid((unsigned)((D + EW_THREADS - 1) / EW_THREADS), (unsigned)(N < 65535 ? N : 65535), 1);
    k_gather_patches_bf16<<<grid, EW_THREADS, 0, s>>>(tokens, prefix, N, D, out, out_col, Dv);
}
