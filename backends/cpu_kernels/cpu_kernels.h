/*
 * cpu_kernels: the fp32 compute kernels of the cpu_generic backend.
 *
 * Data layout. Activations are fp32, row-major [rows, dim]. Weight matrices are read-only
 * vh_tensor_view's in the checkpoint's dtype (F32, F16 or BF16) with PyTorch Linear layout
 * W[out, in]; they are converted to fp32 on the fly or a panel at a time, never whole. Small
 * vectors (norm weights, biases, layer-scale) are fp32 arrays the caller converted once.
 *
 * Threads. Every kernel that takes a vh_thread_pool runs on it (NULL: on the calling thread only)
 * and returns when its output is complete. Results never depend on the pool's size: each output
 * value is computed by one thread in a fixed order.
 *
 * Errors. Kernels cannot fail: they allocate nothing (except the vhk_matmul's scratch), and their
 * preconditions (shapes, strides, sizes that fit the buffers) are the caller's to guarantee; the
 * core validated the model's shapes before the backend sees them. In-place use is allowed only
 * where a function says so.
 */
#ifndef VH_CPU_KERNELS_H
#define VH_CPU_KERNELS_H

#include <stdint.h>

#include "thread_pool.h"
#include "vlahybrid/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------------
 * Normalisation (norm.c). x and y are [rows, dim] and may be the same buffer.
 */

/* torch.nn.LayerNorm over the last dim: y = (x - mean) / sqrt(var + eps) * gamma + beta, with the
 * biased variance. Statistics are accumulated in double. */
void vhk_layernorm(vh_thread_pool *pool, const float *x, float *y, int64_t rows, int64_t dim,
                   const float *gamma, const float *beta, float eps);

/* Hugging Face LlamaRMSNorm: y = weight * (x * rsqrt(mean(x^2) + eps)), the mean accumulated in
 * double, the two products rounded in that order as transformers does in fp32. */
void vhk_rmsnorm(vh_thread_pool *pool, const float *x, float *y, int64_t rows, int64_t dim,
                 const float *weight, float eps);

/* ------------------------------------------------------------------------------------------------
 * Element-wise (activation.c, elementwise.c).
 */

/* In place: x = 0.5 x (1 + erf(x / sqrt 2)), torch's exact (not tanh) GELU. */
void vhk_gelu_exact(vh_thread_pool *pool, float *x, int64_t n);

/* In place: x = max(x, 0), NaN kept (torch.relu). */
void vhk_relu(vh_thread_pool *pool, float *x, int64_t n);

/* out = silu(gate) * up with silu(g) = g / (1 + exp(-g)). out may alias gate or up. */
void vhk_silu_mul(vh_thread_pool *pool, const float *gate, const float *up, float *out, int64_t n);

/* y += x over n values. */
void vhk_add(vh_thread_pool *pool, float *y, const float *x, int64_t n);

/* y[r, c] += scale[c] * x[r, c] on [rows, dim] (LayerScale then residual). scale NULL: y += x. */
void vhk_add_scaled(vh_thread_pool *pool, float *y, const float *x, const float *scale,
                    int64_t rows, int64_t dim);

/* y[r, c] += bias[c] on [rows, dim]. */
void vhk_add_bias(vh_thread_pool *pool, float *y, const float *bias, int64_t rows, int64_t dim);

/* ------------------------------------------------------------------------------------------------
 * Rotary position embedding (rope.c).
 *
 * Hugging Face Llama "rotate half" RoPE, in place. x holds `rows` rows of n_heads * head_dim
 * values, row r starting at x + r * row_stride, at position positions[r]. For each head and
 * i < head_dim / 2, with a = x[i], b = x[i + head_dim/2]:
 *     x[i] = a cos - b sin,   x[i + head_dim/2] = b cos + a sin,   angle = pos * inv_freq[i],
 * computed the way transformers' LlamaRotaryEmbedding does: inv_freq[i] = 1 / theta^(2i/head_dim)
 * in float32, the angle as a float32 product, cos and sin of that float32 angle.
 * head_dim must be even.
 */
void vhk_rope(vh_thread_pool *pool, float *x, int64_t row_stride, int64_t rows, int64_t n_heads,
              int64_t head_dim, const int32_t *positions, float theta);

/* 2-D interleaved RoPE (EVA-02's), in place. Per head of head_dim (a multiple of 4) channels: pair
 * (2p, 2p + 1), p < head_dim / 4, rotates by the row's angle p, pair head_dim/2 + (2p, 2p + 1) by the
 * column's: x' = x cos - y sin, y' = y cos + x sin. Row r of x (at x + r * row_stride) sits at grid
 * row row_of[r] and column col_of[r] of a window (or grid) of `side` tokens a side, whose tables
 * vhk_rope_2d_table makes: [side, head_dim / 4] cos and sin of angle (i / side * rope_grid) *
 * theta^(-2p / (head_dim / 2)), all in float32 as the reference computes them. */
void vhk_rope_2d_table(int64_t side, int64_t rope_grid, int64_t head_dim, float theta, float *cos_table,
                       float *sin_table);
void vhk_rope_2d(vh_thread_pool *pool, float *x, int64_t row_stride, int64_t rows, int64_t n_heads,
                 int64_t head_dim, const int32_t *row_of, const int32_t *col_of, const float *cos_table,
                 const float *sin_table);

/* ------------------------------------------------------------------------------------------------
 * Attention (attention.c).
 *
 * Multi-head scaled dot-product attention for one sequence, fp32. Query head h reads key/value
 * head h / (n_heads / n_kv_heads) (grouped-query attention; n_heads % n_kv_heads == 0).
 *   q:   n_rows rows of n_heads * head_dim, row i at q + i * q_stride
 *   k,v: n_kv rows of n_kv_heads * head_dim, row j at k + j * kv_stride (and v likewise)
 *   out: n_rows rows of n_heads * head_dim, row i at out + i * out_stride; must not overlap q, k, v
 * Row i attends to kv rows [0, first_position + i] when causal (clamped to n_kv), else to all
 * n_kv. Softmax is max-subtracted and computed online over blocks of 64 keys, so memory beyond
 * the output is a few KB of stack per thread (no score matrix). Work is split over (head, tile of
 * 4 query rows) pairs; exp is a vectorised polynomial within 1.3 ulp of e^x.
 * For ViT attention on a fused qkv buffer [T, 3D]: q = qkv, k = qkv + D, v = qkv + 2D, all with
 * stride 3D.
 */
typedef struct vhk_attention_args {
    const float *q;
    int64_t q_stride;
    const float *k;
    const float *v;
    int64_t kv_stride;
    float *out;
    int64_t out_stride;
    int64_t n_rows;
    int64_t n_kv;
    int64_t n_heads;
    int64_t n_kv_heads;
    int64_t head_dim;
    int64_t first_position;   /* position of row 0 (causal only) */
    int causal;
    float scale;              /* usually 1 / sqrt(head_dim) */
} vhk_attention_args;

void vhk_attention(vh_thread_pool *pool, const vhk_attention_args *args);

/* ------------------------------------------------------------------------------------------------
 * Linear layers (matmul.c).
 *
 * y[rows, out] = x[rows, in] W^T (+ bias), W an [out, in] view in F32, F16 or BF16.
 *  - direct GEMM: reads W in its dtype and converts in registers (AVX-512 / AVX2 / portable C,
 *    picked once per vhk_matmul from the CPU's features), register-tiled and cache-blocked,
 *    split over output columns on the pool. Each output is one fixed-order fp32 FMA chain
 *    (16 strided partial sums combined by a fixed tree): identical bits for every ISA variant,
 *    pool size and blocking.
 *  - sgemm: F32 weights go straight to cblas_sgemm; F16/BF16 weights are converted a panel of
 *    512 output rows at a time into a scratch buffer (on the pool) and each panel goes through
 *    cblas_sgemm (OpenBLAS's own threads; the pool is parked meanwhile, vh_thread_pool_park).
 * The direct GEMM serves rows below a threshold measured per CPU class (matmul.c): a handful of
 * rows for portable C, 24 for AVX2, 128 for AVX-512 when OpenBLAS also has AVX-512 kernels, and
 * every row count on AVX-512 CPUs where OpenBLAS runs AVX2 kernels (AMD Zen 4), where the direct
 * GEMM is faster throughout. A row can therefore round differently depending on how many rows
 * share the call (not on the pool size).
 */
typedef struct vhk_matmul vhk_matmul;

/* The state of linear layers for one executor. The panel scratch (512 x max_in floats) is
 * allocated by the first call that takes the panel path, if any (larger inputs still work, with
 * narrower panels; if the allocation fails, the direct GEMM serves the call). Keeps `pool` (may
 * be NULL) for later calls; the pool must outlive the vhk_matmul. Returns NULL when out of
 * memory. */
vhk_matmul *vhk_matmul_create(vh_thread_pool *pool, int64_t max_in);

/* NULL is allowed. */
void vhk_matmul_destroy(vhk_matmul *m);

/* y = x W^T + bias. x row r starts at x + r * x_stride (x_stride >= in); y row r at
 * y + r * y_stride (y_stride >= out, so a result can fill a column slice of a wider buffer).
 * w->shape = {out, in}; bias is [out] fp32 or NULL. y must not overlap x. Not thread-safe for one
 * vhk_matmul; calls cblas_sgemm from the calling thread. */
void vhk_linear(vhk_matmul *m, const float *x, int64_t x_stride, int64_t rows, int64_t in,
                const vh_tensor_view *w, const float *bias, float *y, int64_t y_stride);

/* ------------------------------------------------------------------------------------------------
 * Data movement (convert.c, patches.c, argmax.c). Single-threaded.
 */

/* ViT patch embedding as a matrix product: pixels [3, S, S] -> out [grid * grid, 3 * P * P]
 * (grid = S / P), patch (gy, gx) in row gy * grid + gx, its values in Conv2d weight order
 * (c, ky, kx). S must be a multiple of P. */
void vhk_im2col_patches(const float *pixels, int64_t image_size, int64_t patch, float *out);

/* dst[i] = src[i] as fp32 for n values of the given dtype (exact for F16 and BF16). */
void vhk_convert_to_f32(const void *src, vh_dtype dtype, float *dst, int64_t n);

/* Gather rows of an embedding table [V, D] (any dtype) as fp32: out[i, :] = table[ids[i], :].
 * An id outside [0, V) gives a row of zeros. */
void vhk_embed_rows(const vh_tensor_view *table, const int32_t *ids, int64_t n, float *out);

/* Index of the first maximum of x[0..n), as torch.argmax (a NaN counts as the maximum, the first
 * NaN wins). Returns -1 when n <= 0. */
int32_t vhk_argmax(const float *x, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* VH_CPU_KERNELS_H */
