/*
 * The cuda backend's kernels (cuda_kernels.cu), callable from C. Every launcher enqueues on the
 * given stream and returns at once; nothing synchronises or allocates. Errors surface through
 * cudaGetLastError / the stream.
 *
 * Precision: activations that feed a GEMM are bf16 (vhc_bf16 = raw bits); the residual streams,
 * GEMM outputs, norms' statistics, softmax and RoPE are fp32. Small vectors (norm weights, biases,
 * LayerScale, position/class/register embeddings) are fp32 on the device.
 *
 * Per-row metadata of an LLM batch (vhc_row) lives in device memory so that one captured CUDA
 * graph can replay a decode step whatever its position.
 */
#ifndef VH_CUDA_KERNELS_H
#define VH_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t vhc_bf16;

/* One LLM row of a batch. */
typedef struct vhc_row {
    int32_t token;       /* >= 0: vocabulary id; -1: take patch_embeds row `patch` */
    int32_t patch;       /* row of patch_embeds (image * n_image_tokens + k) for token -1 */
    int32_t rope_pos;    /* RoPE position */
    int32_t n_keys;      /* keys this row attends to, in its sequence: kv position + 1 */
    int64_t kv_seq_base; /* element offset of the row's sequence in one layer's K (or V) cache */
    int64_t kv_write;    /* element offset where the row's own K/V go in one layer's cache */
} vhc_row;

/* out[r, :] = bf16(w * x * rsqrt(mean(x^2) + eps)) for r < rows; with row_index, input row
 * row_index[r] (the head's last rows of segments). HF LlamaRMSNorm in fp32. */
void vhc_rmsnorm_bf16(cudaStream_t s, const float *x, const float *w, vhc_bf16 *out, int rows, int dim, float eps,
                      const int32_t *row_index);

/* out = bf16(LayerNorm(x) * gamma + beta), biased variance, fp32 statistics. */
void vhc_layernorm_bf16(cudaStream_t s, const float *x, const float *gamma, const float *beta, vhc_bf16 *out,
                        int rows, int dim, float eps);

/* out = bf16(gelu_exact(in + bias)); bias may be NULL. in, out: [rows, cols]. */
void vhc_bias_gelu_bf16(cudaStream_t s, const float *in, const float *bias, vhc_bf16 *out, int rows, int cols);

/* out = in + bias (out may alias in). [rows, cols]. */
void vhc_bias_add_f32(cudaStream_t s, const float *in, const float *bias, float *out, int rows, int cols);

/* x += scale * (t + bias), per column; bias and/or scale may be NULL. [rows, dim]. */
void vhc_residual_add(cudaStream_t s, float *x, const float *t, const float *bias, const float *scale, int rows,
                      int dim);

/* out[r, c] = bf16(silu(gu[r, c]) * gu[r, F + c]); gu is [rows, 2F] (gate | up). */
void vhc_silu_mul_bf16(cudaStream_t s, const float *gu, vhc_bf16 *out, int rows, int F);

/* out = bf16(in), n values. */
void vhc_f32_to_bf16(cudaStream_t s, const float *in, vhc_bf16 *out, int64_t n);

/* ViT: qkv [T, 3D] (+ bias [3D]) -> q, k, v [T, D] bf16 each (timm's layout: [q | k | v], each
 * [heads, head_dim]). */
void vhc_vit_qkv_split(cudaStream_t s, const float *qkv, const float *bias, vhc_bf16 *q, vhc_bf16 *k, vhc_bf16 *v,
                       int T, int D);

/* The tower layer with 2-D RoPE (cuda_rope_tower_kernels.cu). Window order: a grid of side g
 * padded to whole windows of side w (nw = ceil(g / w) a side), window by window, row-major within;
 * w = g is the grid itself.
 * vhc_rope_table: table [w][hd / 4] of (cos, sin) floats, the angle of window position pos and
 * pair j: pos / w * rope_grid / theta^(2j / (hd / 2)).
 * vhc_window_scatter: out [images, (nw w)^2, D] bf16 = src + bias (src [images, g g] rows src_ld
 * apart, fp32, 8-byte aligned; the bias alone, or 0 when NULL, at padding), rotated by rope_table
 * unless NULL: pair (2j, 2j+1) of each head's first half by the token's row within its window, of
 * its second half by its column.
 * vhc_window_gather: out [images, g g, D] grid order from in in window order (D % 8 == 0).
 * vhc_swiglu_layernorm_bf16: out = bf16(LayerNorm(silu(gate + gate_bias) * (up + up_bias)) gamma +
 * beta) per row over F columns, gate at columns [0, F) of gu's rows (gu_ld apart), up at [up_col,
 * up_col + F); out's rows out_ld >= F apart, columns [F, out_ld) set to 0; F <= VHC_SWIGLU_MAX_F;
 * biases may be NULL. */
#define VHC_SWIGLU_MAX_F 12288
void vhc_rope_table(cudaStream_t s, float *table, int w, int hd, int rope_grid, float theta);
void vhc_window_scatter(cudaStream_t s, const float *src, int64_t src_ld, const float *bias, vhc_bf16 *out,
                        int images, int g, int w, int D, int heads, const float *rope_table);
void vhc_window_gather(cudaStream_t s, const vhc_bf16 *in, vhc_bf16 *out, int images, int g, int w, int D);
void vhc_swiglu_layernorm_bf16(cudaStream_t s, const float *gu, int64_t gu_ld, int up_col, const float *gate_bias,
                               const float *up_bias, const float *gamma, const float *beta, vhc_bf16 *out,
                               int64_t out_ld, int rows, int F, float eps);

/* Blocks on query sets (cuda_query_kernels.cu).
 * vhc_add_bf16: out = bf16(a + b), b NULL: bf16(a); n values.
 * vhc_copy_cols_bf16: dst[r, col + c] = bf16(src[r, c]), src [rows, width] contiguous, dst rows
 * dst_ld apart (inputs side by side on channels).
 * vhc_rows_finish: per row v = in + bias (bias may be NULL), then LayerNorm(v) gamma + beta when
 * gamma is not NULL (biased variance, fp32), then the activation (VHC_ACT_*); v into out (fp32, may
 * be in) and / or out_bf16 (either may be NULL). cols <= VHC_ROWS_FINISH_MAX_COLS.
 * vhc_modulated_layernorm: y = (gamma + gamma_bias) * LayerNorm(x) + (beta + beta_bias), gamma and
 * beta [rows, D], the biases [D] (NULL: 0), the norm without affine. */
#define VHC_ACT_NONE 0
#define VHC_ACT_RELU 1
#define VHC_ACT_GELU 2
#define VHC_ROWS_FINISH_MAX_COLS 12288
void vhc_add_bf16(cudaStream_t s, const float *a, const float *b, vhc_bf16 *out, int64_t n);
void vhc_copy_cols_bf16(cudaStream_t s, const float *src, int64_t rows, int width, vhc_bf16 *dst, int64_t dst_ld,
                        int col);
void vhc_rows_finish(cudaStream_t s, const float *in, const float *bias, const float *gamma, const float *beta,
                     float eps, int act, float *out, vhc_bf16 *out_bf16, int rows, int cols);
void vhc_modulated_layernorm(cudaStream_t s, const float *x, const float *gamma, const float *gamma_bias,
                             const float *beta, const float *beta_bias, float *y, int rows, int D, float eps);

/* Host: RoPE's inverse frequencies, out[i] = 1 / theta^(2i/hd) in fp32 as transformers computes
 * them, i < head_dim / 2 (made once per executor and kept on the device). */
void vhc_rope_inv_freq(float theta, int head_dim, float *out);

/* LLM: qkv [R, (Hq + 2 Hkv) * hd] fp32 (q | k | v). Applies HF rotate-half RoPE at rows[r].rope_pos
 * to q and k (angle = pos * inv_freq[i] in fp32, inv_freq: device [hd/2] from vhc_rope_inv_freq;
 * cos/sin in fp32), writes q as bf16 [R, Hq * hd], and k, v as bf16 into k_cache / v_cache at
 * rows[r].kv_write. */
void vhc_llm_rope_qkv(cudaStream_t s, const float *qkv, const vhc_row *rows, vhc_bf16 *q_out, vhc_bf16 *k_cache,
                      vhc_bf16 *v_cache, int R, int n_heads, int n_kv_heads, int head_dim, const float *inv_freq);

/* Attention, fp32 online softmax, no score matrix in memory. Query row r, head h (kv head
 * h / (n_heads / n_kv_heads)) attends to keys j < n_keys at k + base + j * kv_stride + kvh * hd, where
 * with rows: base = rows[r].kv_seq_base, n_keys = rows[r].n_keys; without (rows NULL): base 0,
 * n_keys = n_keys_dense. Output bf16 at out + r * out_stride + h * hd. head_dim <= 256. With rows, a
 * row's keys are split over up to 8 warps whose partial softmax sums merge at the end, the split
 * depending on the row's n_keys only (a row's bits do not depend on the rest of the batch). */
void vhc_attention(cudaStream_t s, const vhc_bf16 *q, int64_t q_stride, const vhc_bf16 *k, const vhc_bf16 *v,
                   int64_t kv_stride, const vhc_row *rows, int n_keys_dense, vhc_bf16 *out, int64_t out_stride,
                   int R, int n_heads, int n_kv_heads, int head_dim, float scale);

/* Attention on tensor cores for many rows (cuda_flash_attention.cu): the layout of vhc_attention
 * without row metadata; query row r uses keys j < n_keys_dense (first_position < 0) or, causally,
 * j < first_position + r + 1 (a prefill segment whose row 0 is at first_position, its sequence's
 * keys at k / v). P enters P.V rounded to bf16 (FlashAttention's precision). Served when
 * vhc_flash_attention_supported: head_dim a multiple of 8 up to 128, K / V rows 16-byte aligned,
 * q 4-byte aligned with an even stride; vhc_flash_attention enqueues nothing otherwise. vhc_attention
 * takes this path itself for calls without rows that it serves. */
int vhc_flash_attention_supported(const vhc_bf16 *q, int64_t q_stride, const vhc_bf16 *k, const vhc_bf16 *v,
                                  int64_t kv_stride, int64_t out_stride, int n_heads, int n_kv_heads, int head_dim);
void vhc_flash_attention(cudaStream_t s, const vhc_bf16 *q, int64_t q_stride, const vhc_bf16 *k, const vhc_bf16 *v,
                         int64_t kv_stride, vhc_bf16 *out, int64_t out_stride, int R, int n_heads, int n_kv_heads,
                         int head_dim, float scale, int n_keys_dense, int first_position);

/* n_batch independent problems of that shape in one launch, problem b's q, k, v and out at
 * element offset b * batch_stride (a multiple of 8) from the pointers given: the ViT's images. */
void vhc_flash_attention_batch(cudaStream_t s, const vhc_bf16 *q, int64_t q_stride, const vhc_bf16 *k,
                               const vhc_bf16 *v, int64_t kv_stride, vhc_bf16 *out, int64_t out_stride, int R,
                               int n_heads, int n_kv_heads, int head_dim, float scale, int n_keys_dense,
                               int first_position, int n_batch, int64_t batch_stride);

/* The same kernel over many segments in one launch (a packed pass's prefills): each tile is up to
 * VHC_FLASH_TILE_ROWS query rows of one segment, rows first_row.. of q / out, its sequence's keys at
 * element offset kv_base of k / v, causal from first_position. A tile cut at the same rows as
 * vhc_flash_attention's blocks gives the same bits. tiles is device memory. */
#define VHC_FLASH_TILE_ROWS 64
typedef struct vhc_attention_tile {
    int32_t first_row, n_rows, first_position, unused;
    int64_t kv_base;
} vhc_attention_tile;
void vhc_flash_attention_tiles(cudaStream_t s, const vhc_bf16 *q, int64_t q_stride, const vhc_bf16 *k,
                               const vhc_bf16 *v, int64_t kv_stride, vhc_bf16 *out, int64_t out_stride,
                               const vhc_attention_tile *tiles, int n_tiles, int n_heads, int n_kv_heads,
                               int head_dim, float scale);

/* Linear layer for a few rows (cuda_gemv.cu): D[m, n] = sum_k A[m, k] W[n, k] (+ D[m, n] when
 * accumulate) for m < M, n < N; A rows lda apart, W [N, K] contiguous, D rows ldd apart, fp32 FMA
 * chains whose order depends on K only. Served when vhc_gemv_supported: 1 <= M <= VHC_GEMV_MAX_ROWS,
 * K a multiple of 8, lda a multiple of 8, A and W 16-byte aligned; vhc_gemv enqueues nothing
 * otherwise. */
#define VHC_GEMV_MAX_ROWS 8
int vhc_gemv_supported(const vhc_bf16 *A, int64_t lda, int64_t M, int64_t K, const vhc_bf16 *W, int64_t N,
                       const float *D, int64_t ldd);
void vhc_gemv(cudaStream_t s, const vhc_bf16 *A, int64_t lda, int64_t M, int64_t K, const vhc_bf16 *W, int64_t N,
              float *D, int64_t ldd, int accumulate);

/* x[r, :] = float(table[rows[r].token, :]) or patch_embeds[rows[r].patch, :]. */
void vhc_embed_rows(cudaStream_t s, const vhc_bf16 *table, const float *patch_embeds, const vhc_row *rows, float *x,
                    int R, int dim);

/* out[r] = first index of the maximum of logits[r, 0..n) (NaN counts as the maximum), as
 * torch.argmax. */
void vhc_argmax_rows(cudaStream_t s, const float *logits, int rows, int64_t n, int32_t *out);

/* pixels [3, S, S] fp32 -> patches [(S/P)^2, 3 P P] bf16, columns in Conv2d weight order (c, ky, kx),
 * patches row-major (gy, gx), rows ld >= 3 P P elements apart, the columns past 3 P P zero (a GEMM
 * over 3 P P = 588 columns, rows 8-byte aligned, is many times slower than over 592). */
void vhc_im2col_bf16(cudaStream_t s, const float *pixels, int S, int P, vhc_bf16 *out, int ld);
/* 3 P P rounded up to a multiple of 8 elements: rows 16-byte aligned. */
#define VHC_PATCH_LD(P) ((3 * (P) * (P) + 7) / 8 * 8)

/* ViT token assembly in timm's order [cls, reg..., patches]: patch rows = patch_tokens + patch_bias;
 * cls [D] and reg [n_reg, D] may be NULL/0; pos [L, D] is added to the last L tokens (L = patches when
 * pos_covers_prefix is 0, prefix + patches when 1). x: [prefix + NP, D]. */
void vhc_vit_assemble(cudaStream_t s, const float *patch_tokens, const float *patch_bias, const float *cls,
                      const float *reg, int n_reg, const float *pos, int pos_covers_prefix, float *x, int NP, int D);

/* out[n, out_col + c] = bf16(tokens[prefix + n, c]) for n < N, c < D; out is [N, Dv]. */
void vhc_gather_patches_bf16(cudaStream_t s, const float *tokens, int prefix, int N, int D, vhc_bf16 *out, int out_col,
                             int Dv);

/* ---- the head's hidden rows and the driving planner (cuda_planner_kernels.cu) ---- */

/* out[r] = w * (x[rows[r]] * rsqrt(mean(x^2) + eps)) fp32 (rows: device indices), and its bf16
 * copy when out_bf16 is not NULL. [n, dim]. */
void vhc_rmsnorm_rows_f32(cudaStream_t s, const float *x, const float *w, const int32_t *rows, float *out,
                          vhc_bf16 *out_bf16, int n, int dim, float eps);
/* act(in + bias), relu or identity, as fp32 (out) and/or bf16 (out_bf16); bias may be NULL. */
void vhc_bias_act(cudaStream_t s, const float *in, const float *bias, float *out, vhc_bf16 *out_bf16, int64_t rows,
                  int cols, int relu);
/* The latent: dist [S, 2L] + bias -> mu, clamped log_sigma into plan rows (plan_offset), z = mu +
 * exp(log_sigma) * noise (noise rows at noise_offset) as bf16 [S, L]. */
void vhc_plan_latent(cudaStream_t s, const float *dist, const float *bias, const float *noise, int noise_stride,
                     int noise_offset, float *plan, int plan_stride, int plan_offset, vhc_bf16 *z, int S, int L,
                     float min_ls, float max_ls);
/* GRU layer l's initial states from the features: h [layers, S, G] fp32 and bf16. f: [S, layers G]. */
void vhc_gru_init(cudaStream_t s, const float *f, float *h, vhc_bf16 *h_bf16, int layers, int S, int G);
/* One GRU cell step from the gate GEMMs' outputs gi, gh [S, 3G] (biases added here), h updated in
 * place (fp32, and its bf16 copy); y (may be NULL): row s T + t receives h in bf16. */
void vhc_gru_update(cudaStream_t s, const float *gi, const float *b_ih, const float *gh, const float *b_hh, float *h,
                    vhc_bf16 *h_bf16, vhc_bf16 *y, int S, int G, int T, int t);
/* out[s T + t] = bf16([f[s], g[s T + t] + bias]), [S T, 2F]. */
void vhc_plan_concat(cudaStream_t s, const float *f, const float *g, const float *bias, vhc_bf16 *out, int S, int T,
                     int F);
/* plan rows (plan_offset): preds[m][t][2] = out[s T + t][2m .. 2m + 2) + bias. */
void vhc_plan_preds(cudaStream_t s, const float *out, const float *bias, float *plan, int plan_stride, int plan_offset,
                    int S, int T, int M);

#ifdef __cplusplus
}
#endif
#endif
