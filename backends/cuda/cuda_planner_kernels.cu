/*
 * Kernels of the driving planner (VH_BLOCK_VAE_GRU_PLANNER, cuda_planner.c) and of the head's
 * hidden rows: small, row-wise, fp32 math (bf16 only as the GEMMs' input storage), one thread per
 * value or one block per row. The sizes are a few segments by a few thousand values: these are
 * latency, not bandwidth; the GEMMs around them carry the work.
 */
#include <math.h>
#include <stdint.h>

#include "cuda_device.cuh"

#define THREADS 256

static unsigned blocks_for(int64_t n)
{
    return (unsigned)((n + THREADS - 1) / THREADS);
}

static __device__ float block_sum_rows(float v, float *sh)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.0f;
    for (int i = 0; i < (int)(blockDim.x >> 5); i++) t += sh[i];
    return t;
}

/* out[r] = w * (x[rows[r]] * rsqrt(mean(x^2) + eps)), fp32 (HF LlamaRMSNorm); bf16 copy too. */
__global__ void k_rmsnorm_rows_f32(const float *__restrict__ x, const float *__restrict__ w,
                                   const int32_t *__restrict__ rows, float *__restrict__ out,
                                   vhc_bf16 *__restrict__ out_bf16, int dim, float eps)
{
    __shared__ float sh[32];
    const int r = blockIdx.x;
    const float *xr = x + (int64_t)rows[r] * dim;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss = fmaf(xr[i], xr[i], ss);
    ss = block_sum_rows(ss, sh);
    const float rs = 1.0f / sqrtf(ss / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        const float v = w[i] * (xr[i] * rs);
        out[(int64_t)r * dim + i] = v;
        if (out_bf16) out_bf16[(int64_t)r * dim + i] = f2bf(v);
    }
}

extern "C" void vhc_rmsnorm_rows_f32(cudaStream_t s, const float *x, const float *w, const int32_t *rows, float *out,
                                     vhc_bf16 *out_bf16, int n, int dim, float eps)
{
    if (n <= 0 || dim <= 0) return;
    k_rmsnorm_rows_f32<<<n, THREADS, 0, s>>>(x, w, rows, out, out_bf16, dim, eps);
}

/* y = act(in + bias) as fp32 (optional) and bf16 (optional). */
__global__ void k_bias_act(const float *__restrict__ in, const float *__restrict__ bias, float *out,
                           vhc_bf16 *__restrict__ out_bf16, int64_t rows, int cols, int relu)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    float v = in[i] + (bias ? bias[i % cols] : 0.0f);
    if (relu && v < 0.0f) v = 0.0f;
    if (out) out[i] = v;
    if (out_bf16) out_bf16[i] = f2bf(v);
}

extern "C" void vhc_bias_act(cudaStream_t s, const float *in, const float *bias, float *out, vhc_bf16 *out_bf16,
                             int64_t rows, int cols, int relu)
{
    if (rows <= 0 || cols <= 0) return;
    k_bias_act<<<blocks_for(rows * cols), THREADS, 0, s>>>(in, bias, out, out_bf16, rows, cols, relu);
}

/* [mu | log_sigma] = dist + bias; log_sigma clamped; z = mu + exp(log_sigma) * eps (bf16 for the
 * GRU's input GEMM); mu and log_sigma written to each segment's plan. */
__global__ void k_plan_latent(const float *__restrict__ dist, const float *__restrict__ bias,
                              const float *__restrict__ noise, int noise_stride, int noise_offset,
                              float *__restrict__ plan, int plan_stride, int plan_offset, vhc_bf16 *__restrict__ z,
                              int S, int L, float min_ls, float max_ls)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= S * L) return;
    const int s = i / L, k = i % L;
    const float mu = dist[s * 2 * L + k] + bias[k];
    const float ls = fminf(fmaxf(dist[s * 2 * L + L + k] + bias[L + k], min_ls), max_ls);
    z[i] = f2bf(mu + expf(ls) * noise[s * noise_stride + noise_offset + k]);
    plan[s * plan_stride + plan_offset + k] = mu;
    plan[s * plan_stride + plan_offset + L + k] = ls;
}

extern "C" void vhc_plan_latent(cudaStream_t s, const float *dist, const float *bias, const float *noise,
                                int noise_stride, int noise_offset, float *plan, int plan_stride, int plan_offset,
                                vhc_bf16 *z, int S, int L, float min_ls, float max_ls)
{
    if (S <= 0 || L <= 0) return;
    k_plan_latent<<<blocks_for((int64_t)S * L), THREADS, 0, s>>>(dist, bias, noise, noise_stride, noise_offset, plan,
                                                                  plan_stride, plan_offset, z, S, L, min_ls, max_ls);
}

/* PyTorch's GRU cell, gates r, z, n: h = (1 - z) n + z h with n = tanh(gi_n + r (gh_n)). h fp32,
 * its bf16 copy for the next GEMM; y (optional): the bf16 row of step t of each segment. */
__global__ void k_gru_update(const float *__restrict__ gi, const float *__restrict__ b_ih,
                             const float *__restrict__ gh, const float *__restrict__ b_hh, float *__restrict__ h,
                             vhc_bf16 *__restrict__ h_bf16, vhc_bf16 *__restrict__ y, int S, int G, int T, int t)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= S * G) return;
    const int s = i / G, k = i % G;
    const float *a = gi + (int64_t)s * 3 * G, *c = gh + (int64_t)s * 3 * G;
    const float r = 1.0f / (1.0f + expf(-(a[k] + b_ih[k] + c[k] + b_hh[k])));
    const float u = 1.0f / (1.0f + expf(-(a[G + k] + b_ih[G + k] + c[G + k] + b_hh[G + k])));
    const float n = tanhf(a[2 * G + k] + b_ih[2 * G + k] + r * (c[2 * G + k] + b_hh[2 * G + k]));
    const float v = (1.0f - u) * n + u * h[i];
    h[i] = v;
    h_bf16[i] = f2bf(v);
    if (y) y[((int64_t)s * T + t) * G + k] = f2bf(v);
}

extern "C" void vhc_gru_update(cudaStream_t s, const float *gi, const float *b_ih, const float *gh, const float *b_hh,
                               float *h, vhc_bf16 *h_bf16, vhc_bf16 *y, int S, int G, int T, int t)
{
    if (S <= 0 || G <= 0) return;
    k_gru_update<<<blocks_for((int64_t)S * G), THREADS, 0, s>>>(gi, b_ih, gh, b_hh, h, h_bf16, y, S, G, T, t);
}

/* The GRU's initial states: layer l of segment s starts from f[s][l G .. (l + 1) G). */
__global__ void k_gru_init(const float *__restrict__ f, float *__restrict__ h, vhc_bf16 *__restrict__ h_bf16,
                           int layers, int S, int G)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= layers * S * G) return;
    const int l = i / (S * G), s = (i / G) % S, k = i % G;
    const float v = f[(int64_t)s * layers * G + l * G + k];
    h[i] = v;
    h_bf16[i] = f2bf(v);
}

extern "C" void vhc_gru_init(cudaStream_t s, const float *f, float *h, vhc_bf16 *h_bf16, int layers, int S, int G)
{
    if (layers <= 0 || S <= 0 || G <= 0) return;
    k_gru_init<<<blocks_for((int64_t)layers * S * G), THREADS, 0, s>>>(f, h, h_bf16, layers, S, G);
}

/* The decoder's input rows [f_s, g_(s, t) + bias] in bf16, row s T + t. */
__global__ void k_plan_concat(const float *__restrict__ f, const float *__restrict__ g, const float *__restrict__ bias,
                              vhc_bf16 *__restrict__ out, int S, int T, int F)
{
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)S * T * 2 * F) return;
    const int64_t row = i / (2 * F);
    const int c = (int)(i % (2 * F)), s = (int)(row / T);
    out[i] = f2bf(c < F ? f[(int64_t)s * F + c] : g[row * F + (c - F)] + bias[c - F]);
}

extern "C" void vhc_plan_concat(cudaStream_t s, const float *f, const float *g, const float *bias, vhc_bf16 *out,
                                int S, int T, int F)
{
    if (S <= 0 || T <= 0 || F <= 0) return;
    k_plan_concat<<<blocks_for((int64_t)S * T * 2 * F), THREADS, 0, s>>>(f, g, bias, out, S, T, F);
}

/* preds[s][m][t][2] of each segment's plan = the decoder's row s T + t, columns 2m, 2m + 1 (+ bias). */
__global__ void k_plan_preds(const float *__restrict__ out, const float *__restrict__ bias, float *__restrict__ plan,
                             int plan_stride, int plan_offset, int S, int T, int M)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= S * T * 2 * M) return;
    const int s = i / (T * 2 * M), t = (i / (2 * M)) % T, c = i % (2 * M), m = c / 2, xy = c % 2;
    plan[(int64_t)s * plan_stride + plan_offset + (m * T + t) * 2 + xy] = out[i] + bias[c];
}

extern "C" void vhc_plan_preds(cudaStream_t s, const float *out, const float *bias, float *plan, int plan_stride,
                               int plan_offset, int S, int T, int M)
{
    if (S <= 0 || T <= 0 || M <= 0) return;
    k_plan_preds<<<blocks_for((int64_t)S * T * 2 * M), THREADS, 0, s>>>(out, bias, plan, plan_stride, plan_offset, S,
                                                                         T, M);
}
