/*
 * Kernels of the blocks on query sets (cuda_query_chain.c, cuda_modulated_norm.c,
 * cuda_query_layer.c: the PETR heads' MLPs, MLN and post-norm decoder layers): a GEMM's input
 * assembled in bf16 (a sum of rows, columns side by side), a GEMM output finished row by row
 * (bias, LayerNorm, activation), the MLN's modulation. Hand-written because no library here fuses
 * them; the GEMMs and the attention are cuBLASLt's and the flash kernel's.
 */
#include <math.h>
#include <stdint.h>

#include "cuda_device.cuh"

#define QK_THREADS 256

/* out[i] = bf16(a[i] + b[i]) (b NULL: bf16(a[i])). */
__global__ void __launch_bounds__(QK_THREADS)
k_add_bf16(const float *__restrict__ a, const float *__restrict__ b, vhc_bf16 *__restrict__ out, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = f2bf(b ? a[i] + b[i] : a[i]);
}

static unsigned grid_for(int64_t n)
{
    int64_t blocks = (n + QK_THREADS - 1) / QK_THREADS;
    return (unsigned)(blocks > 65535 * 8 ? 65535 * 8 : blocks);
}

extern "C" void vhc_add_bf16(cudaStream_t s, const float *a, const float *b, vhc_bf16 *out, int64_t n)
{
    if (n <= 0) return;
    k_add_bf16<<<grid_for(n), QK_THREADS, 0, s>>>(a, b, out, n);
}

/* dst[r, col + c] = bf16(src[r, c]), src [rows, width] contiguous, dst rows dst_ld apart. */
__global__ void __launch_bounds__(QK_THREADS)
k_copy_cols_bf16(const float *__restrict__ src, int64_t n, int width, vhc_bf16 *__restrict__ dst, int64_t dst_ld,
                 int col)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / width;
        const int c = (int)(i % width);
        dst[r * dst_ld + col + c] = f2bf(src[i]);
    }
}

extern "C" void vhc_copy_cols_bf16(cudaStream_t s, const float *src, int64_t rows, int width, vhc_bf16 *dst,
                                   int64_t dst_ld, int col)
{
    const int64_t n = rows * width;
    if (n <= 0) return;
    k_copy_cols_bf16<<<grid_for(n), QK_THREADS, 0, s>>>(src, n, width, dst, dst_ld, col);
}


/* One block a row: v = in + bias; LayerNorm (gamma, beta) when gamma; the activation; v to out
 * (fp32, may be in) and / or out_bf16. The row is held in shared memory, so out may alias in. */
__global__ void __launch_bounds__(QK_THREADS)
k_rows_finish(const float *in, const float *__restrict__ bias, const float *__restrict__ gamma,
              const float *__restrict__ beta, float eps, int act, float *out, vhc_bf16 *__restrict__ out_bf16, int cols)
{
    extern __shared__ float v[];
    __shared__ float red[QK_THREADS / 32];
    const int64_t row = blockIdx.x;
    const float *x = in + row * cols;
    float sum = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        v[c] = x[c] + (bias ? bias[c] : 0.0f);
        sum += v[c];
    }
    if (gamma) { /* biased variance, two passes over the held row (as torch's LayerNorm) */
        const float mean = vhc_block_sum(sum, red) / (float)cols;
        const float rstd = vhc_block_rstd(v, cols, mean, eps, red);
        for (int c = threadIdx.x; c < cols; c += blockDim.x) v[c] = (v[c] - mean) * rstd * gamma[c] + (beta ? beta[c] : 0.0f);
    }
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float y = v[c];
        if (act == VHC_ACT_RELU) y = fmaxf(y, 0.0f);
        else if (act == VHC_ACT_GELU) y = 0.5f * y * (1.0f + erff(y * 0.70710678118654752f));
        if (out) out[row * cols + c] = y;
        if (out_bf16) out_bf16[row * cols + c] = f2bf(y);
    }
}

extern "C" void vhc_rows_finish(cudaStream_t s, const float *in, const float *bias, const float *gamma,
                                const float *beta, float eps, int act, float *out, vhc_bf16 *out_bf16, int rows, int cols)
{
    if (rows <= 0 || cols <= 0) return;
    k_rows_finish<<<(unsigned)rows, QK_THREADS, (size_t)cols * sizeof(float), s>>>(in, bias, gamma, beta, eps, act, out,
                                                                                 out_bf16, cols);
}

/* One block a row: y = (gamma + gamma_bias) * LayerNorm(x) + (beta + beta_bias), the norm without
 * affine (StreamPETR's MLN); a NULL bias is 0. */
__global__ void __launch_bounds__(QK_THREADS)
k_modulated_layernorm(const float *__restrict__ x, const float *__restrict__ gamma, const float *__restrict__ gamma_bias,
                      const float *__restrict__ beta, const float *__restrict__ beta_bias, float *__restrict__ y, int D,
                      float eps)
{
    __shared__ float red[QK_THREADS / 32];
    const int64_t row = blockIdx.x;
    const float *xr = x + row * D;
    float sum = 0.0f;
    for (int c = threadIdx.x; c < D; c += blockDim.x) sum += xr[c];
    const float mean = vhc_block_sum(sum, red) / (float)D;
    const float rstd = vhc_block_rstd(xr, D, mean, eps, red);
    for (int c = threadIdx.x; c < D; c += blockDim.x) {
        const int64_t i = row * D + c;
        y[i] = (gamma[i] + (gamma_bias ? gamma_bias[c] : 0.0f)) * ((xr[c] - mean) * rstd) +
               (beta[i] + (beta_bias ? beta_bias[c] : 0.0f));
    }
}

extern "C" void vhc_modulated_layernorm(cudaStream_t s, const float *x, const float *gamma, const float *gamma_bias,
                                        const float *beta, const float *beta_bias, float *y, int rows, int D, float eps)
{
    if (rows <= 0 || D <= 0) return;
    k_modulated_layernorm<<<(unsigned)rows, QK_THREADS, 0, s>>>(x, gamma, gamma_bias, beta, beta_bias, y, D, eps);
}
