/*
 * Kernels of the tower layer with 2-D RoPE (cuda_rope_tower_layer.c, EVA-02's blocks): the
 * projections into window order with their biases and the interleaved 2-D rotation, the attention
 * output back to grid order, and the SwiGLU with its sub-LayerNorm. Hand-written because no library
 * here fuses them; the GEMMs and the attention are cuBLASLt's and the flash kernel's.
 */
#include <stdint.h>

#include "cuda_device.cuh"

#define WT_THREADS 256

/* Grid token (r, c) of window-order index i: window i / (w w) of nw a side, then row-major within. */
static __device__ __forceinline__ void window_cell(int64_t i, int w, int nw, int *r, int *c, int *wr, int *wc)
{
    const int ww = w * w, win = (int)(i / ww), in = (int)(i % ww);
    *wr = in / w;
    *wc = in % w;
    *r = (win / nw) * w + *wr;
    *c = (win % nw) * w + *wc;
}

/* The rotation of window position pos (a row or a column within the window) and pair j of a
 * head's half, as the reference's float32 table: t = pos / w * rope_grid, angle t / theta^(2j / half);
 * table [w][hd / 4] (cos, sin). Once per layer: the scatter's threads then read it instead of each
 * computing a power, a cosine and a sine. */
__global__ void k_rope_table(float2 *__restrict__ table, int w, int quarter, int hp, int rope_grid, float theta)
{
    const int id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= w * quarter) return;
    const int pos = id / quarter, j = id % quarter;
    const float t = (float)pos / (float)w * (float)rope_grid;
    const float angle = t * (1.0f / powf(theta, (float)(2 * j) / (float)hp));
    table[id] = make_float2(cosf(angle), sinf(angle));
}

extern "C" void vhc_rope_table(cudaStream_t s, float *table, int w, int hd, int rope_grid, float theta)
{
    const int n = w * (hd / 4);
    if (n <= 0) return;
    k_rope_table<<<(unsigned)((n + WT_THREADS - 1) / WT_THREADS), WT_THREADS, 0, s>>>((float2 *)table, w, hd / 4,
                                                                                     hd / 2, rope_grid, theta);
}

/* One thread per rotation pair (2 channels) of one padded token:
 * out[img][i] = rope(src[img][grid token of i] + bias), the bias alone (or 0) where i is padding. */
__global__ void __launch_bounds__(WT_THREADS)
k_window_scatter(const float *__restrict__ src, int64_t src_ld, const float *__restrict__ bias,
                 vhc_bf16 *__restrict__ out, int g, int w, int nw, int D, int hd, const float2 *__restrict__ rope,
                 int64_t pairs_per_image)
{
    const int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int img = blockIdx.y, half_d = D / 2;
    if (id >= pairs_per_image) return;
    const int64_t i = id / half_d;
    const int p = (int)(id % half_d), hp = hd / 2, quarter = hd / 4;
    const int head = p / hp, jj = p % hp;
    const int second = jj >= quarter, j = second ? jj - quarter : jj;
    const int ch = head * hd + (second ? hp : 0) + 2 * j;
    int r, c, wr, wc;
    window_cell(i, w, nw, &r, &c, &wr, &wc);
    const int P = nw * w, Tp = P * P;
    float a = bias ? bias[ch] : 0.0f, b = bias ? bias[ch + 1] : 0.0f;
    if (r < g && c < g) {
        const float2 x = *(const float2 *)(src + ((int64_t)img * g * g + (int64_t)r * g + c) * src_ld + ch);
        a += x.x;
        b += x.y;
    }
    if (rope) {
        const float2 cs = rope[(second ? wc : wr) * quarter + j];
        const float x = a, y = b;
        a = x * cs.x - y * cs.y;
        b = y * cs.x + x * cs.y;
    }
    *(unsigned *)(out + ((int64_t)img * Tp + i) * D + ch) = pack_bf2(a, b);
}

/* The same, one thread per 8 channels (4 pairs of one head's half: hd % 16 == 0): 32-byte reads of
 * the source and the bias, a 16-byte store, the same arithmetic per pair as k_window_scatter. */
__global__ void __launch_bounds__(WT_THREADS)
k_window_scatter8(const float *__restrict__ src, int64_t src_ld, const float *__restrict__ bias,
                  vhc_bf16 *__restrict__ out, int g, int w, int nw, int D, int hd, const float2 *__restrict__ rope,
                  int64_t groups_per_image)
{
    const int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int img = blockIdx.y, groups = D / 8;
    if (id >= groups_per_image) return;
    const int64_t i = id / groups;
    const int ch = (int)(id % groups) * 8, hp = hd / 2, quarter = hd / 4;
    const int in_head = ch % hd, second = in_head >= hp, j0 = (second ? in_head - hp : in_head) / 2;
    int r, c, wr, wc;
    window_cell(i, w, nw, &r, &c, &wr, &wc);
    const int P = nw * w, Tp = P * P;
    float v[8];
    if (bias) {
        const float4 b0 = *(const float4 *)(bias + ch), b1 = *(const float4 *)(bias + ch + 4);
        v[0] = b0.x, v[1] = b0.y, v[2] = b0.z, v[3] = b0.w, v[4] = b1.x, v[5] = b1.y, v[6] = b1.z, v[7] = b1.w;
    } else {
        for (int k = 0; k < 8; k++) v[k] = 0.0f;
    }
    if (r < g && c < g) {
        const float *x = src + ((int64_t)img * g * g + (int64_t)r * g + c) * src_ld + ch;
        const float4 x0 = *(const float4 *)x, x1 = *(const float4 *)(x + 4);
        v[0] += x0.x, v[1] += x0.y, v[2] += x0.z, v[3] += x0.w, v[4] += x1.x, v[5] += x1.y, v[6] += x1.z, v[7] += x1.w;
    }
    unsigned packed[4];
    for (int k = 0; k < 4; k++) {
        float a = v[2 * k], b = v[2 * k + 1];
        if (rope) {
            const float2 cs = rope[(second ? wc : wr) * quarter + j0 + k];
            const float x = a, y = b;
            a = x * cs.x - y * cs.y;
            b = y * cs.x + x * cs.y;
        }
        packed[k] = pack_bf2(a, b);
    }
    *(uint4 *)(out + ((int64_t)img * Tp + i) * D + ch) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
}

extern "C" void vhc_window_scatter(cudaStream_t s, const float *src, int64_t src_ld, const float *bias,
                                   vhc_bf16 *out, int images, int g, int w, int D, int heads, const float *rope_table)
{
    const int nw = (g + w - 1) / w, hd = D / heads;
    const int64_t tokens = (int64_t)nw * w * nw * w;
    if (images <= 0 || tokens <= 0 || D <= 0) return;
    /* 8 channels a thread where they are 4 pairs of one half-head and every access is aligned */
    if (hd % 16 == 0 && src_ld % 4 == 0 && ((uintptr_t)src & 15) == 0 && ((uintptr_t)bias & 15) == 0 &&
        ((uintptr_t)out & 15) == 0) {
        const int64_t groups = tokens * (D / 8);
        const dim3 grid((unsigned)((groups + WT_THREADS - 1) / WT_THREADS), (unsigned)images);
        k_window_scatter8<<<grid, WT_THREADS, 0, s>>>(src, src_ld, bias, out, g, w, nw, D, hd,
                                                      (const float2 *)rope_table, groups);
        return;
    }
    const int64_t pairs = tokens * (D / 2);
    const dim3 grid((unsigned)((pairs + WT_THREADS - 1) / WT_THREADS), (unsigned)images);
    k_window_scatter<<<grid, WT_THREADS, 0, s>>>(src, src_ld, bias, out, g, w, nw, D, hd, (const float2 *)rope_table,
                                                 pairs);
}

/* One thread per 8 channels (16 bytes) of a real token: grid order out of window order in. */
__global__ void __launch_bounds__(WT_THREADS)
k_window_gather(const vhc_bf16 *__restrict__ in, vhc_bf16 *__restrict__ out, int g, int w, int nw, int D,
                int64_t groups_per_image)
{
    const int64_t id = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int img = blockIdx.y, groups = D / 8;
    if (id >= groups_per_image) return;
    const int64_t t = id / groups;
    const int k = (int)(id % groups), r = (int)(t / g), c = (int)(t % g);
    const int64_t i = ((int64_t)(r / w) * nw + c / w) * w * w + (r % w) * w + c % w;
    const int64_t Tp = (int64_t)nw * w * nw * w;
    *(uint4 *)(out + ((int64_t)img * g * g + t) * D + 8 * k) = *(const uint4 *)(in + ((int64_t)img * Tp + i) * D + 8 * k);
}

extern "C" void vhc_window_gather(cudaStream_t s, const vhc_bf16 *in, vhc_bf16 *out, int images, int g, int w, int D)
{
    const int nw = (g + w - 1) / w;
    const int64_t groups = (int64_t)g * g * (D / 8);
    if (images <= 0 || groups <= 0) return;
    const dim3 grid((unsigned)((groups + WT_THREADS - 1) / WT_THREADS), (unsigned)images);
    k_window_gather<<<grid, WT_THREADS, 0, s>>>(in, out, g, w, nw, D, groups);
}

/* One block per row: h = silu(gate + gate_bias) * (up + up_bias) in fp32 (shared memory), then
 * out = bf16(LayerNorm(h) * gamma + beta) with a two-pass biased variance, as the reference's
 * float32 ffn_ln. gu's rows gu_ld apart, gate at [0, F), up at [up_col, up_col + F); out's rows
 * out_ld apart, columns [F, out_ld) zero (the down GEMM reads them). */

__global__ void __launch_bounds__(WT_THREADS)
k_swiglu_layernorm_bf16(const float *__restrict__ gu, int64_t gu_ld, int up_col, const float *__restrict__ gate_bias,
                        const float *__restrict__ up_bias, const float *__restrict__ gamma,
                        const float *__restrict__ beta, vhc_bf16 *__restrict__ out, int64_t out_ld, int F, float eps)
{
    extern __shared__ float h[];
    __shared__ float red[WT_THREADS / 32];
    const int64_t row = blockIdx.x;
    const float *g = gu + row * gu_ld, *u = g + up_col;
    float sum = 0.0f;
    int c0 = 0; /* float4 reads of gate, up and their biases where all are 16-byte aligned */
    if ((((uintptr_t)g | (uintptr_t)u | (uintptr_t)gate_bias | (uintptr_t)up_bias) & 15) == 0 && gate_bias &&
        up_bias) {
        c0 = F & ~3;
        for (int c = 4 * threadIdx.x; c < c0; c += 4 * blockDim.x) {
            const float4 a4 = *(const float4 *)(g + c), b4 = *(const float4 *)(u + c);
            const float4 ga = *(const float4 *)(gate_bias + c), ub = *(const float4 *)(up_bias + c);
            const float a[4] = {a4.x + ga.x, a4.y + ga.y, a4.z + ga.z, a4.w + ga.w};
            const float b[4] = {b4.x + ub.x, b4.y + ub.y, b4.z + ub.z, b4.w + ub.w};
            for (int k = 0; k < 4; k++) {
                const float v = a[k] / (1.0f + expf(-a[k])) * b[k];
                h[c + k] = v;
                sum += v;
            }
        }
    }
    for (int c = c0 + threadIdx.x; c < F; c += blockDim.x) {
        const float a = g[c] + (gate_bias ? gate_bias[c] : 0.0f), b = u[c] + (up_bias ? up_bias[c] : 0.0f);
        const float v = a / (1.0f + expf(-a)) * b;
        h[c] = v;
        sum += v;
    }
    const float mean = vhc_block_sum(sum, red) / (float)F;
    const float rstd = vhc_block_rstd(h, F, mean, eps, red);
    vhc_bf16 *o = out + row * out_ld;
    for (int c = threadIdx.x; c < F; c += blockDim.x) o[c] = f2bf((h[c] - mean) * rstd * gamma[c] + beta[c]);
    for (int64_t c = F + threadIdx.x; c < out_ld; c += blockDim.x) o[c] = 0; /* the padding the GEMM reads */
}

extern "C" void vhc_swiglu_layernorm_bf16(cudaStream_t s, const float *gu, int64_t gu_ld, int up_col,
                                          const float *gate_bias, const float *up_bias, const float *gamma,
                                          const float *beta, vhc_bf16 *out, int64_t out_ld, int rows, int F, float eps)
{
    if (rows <= 0 || F <= 0) return;
    k_swiglu_layernorm_bf16<<<(unsigned)rows, WT_THREADS, (size_t)F * sizeof(float), s>>>(
        gu, gu_ld, up_col, gate_bias, up_bias, gamma, beta, out, out_ld, F, eps);
}
