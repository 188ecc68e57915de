/*
 * A decoder layer on the GPU (VH_BLOCK_TRANSFORMER: pre-norm RMSNorm, causal attention over the
 * KV cache with half-rotation RoPE, SiLU-gated MLP, optional q/k/v biases, LoRA kept apart) over a
 * packed batch (per-row metadata in e->llm.rows), its KV cache the block's state:
 *
 *   q|k|v = xn [Wq; Wk; Wv]^T (+ each segment's LoRA deltas, + the biases)  (one GEMM, fp32 out)
 *   x += o_proj(attention(rope(q), rope(k) -> cache, v -> cache))     (GEMM accumulates into x)
 *        attention: prefill segments on tensor cores, decode rows on the row kernel
 *   x += down_proj(silu(gate) * up)                                    (GEMM accumulates into x)
 */
#include <math.h>
#include <stdlib.h>

#include "cuda_executor.h"

/* Segments of at least this many rows (prefills) take the tensor-core kernel, all of them in one
 * launch over their tiles; runs of shorter ones (decode rows) take the row kernel, which splits
 * each row's keys over warps. */
#define FLASH_MIN_ROWS 16

static int by_last_key_desc(const void *a, const void *b)
{
    const vhc_attention_tile *x = a, *y = b;
    const int32_t kx = x->first_position + x->n_rows, ky = y->first_position + y->n_rows;
    if (kx != ky) return kx > ky ? -1 : 1;
    return x->first_row < y->first_row ? -1 : x->first_row > y->first_row; /* a total order: same plan every time */
}

void cuda_llm_plan_attention(vh_executor *e, const vh_batch *batch)
{
    const vh_llm_desc *l = &e->model->llm;
    llm_buffers *s = &e->llm;
    const int hd = (int)l->head_dim, H = (int)l->n_heads, Hkv = (int)l->n_kv_heads;
    const int64_t q_dim = (int64_t)H * hd, kv_dim = (int64_t)Hkv * hd;
    s->n_tiles = 0;
    if (!e->k_cache || !vhc_flash_attention_supported(s->q, q_dim, e->k_cache, e->v_cache, kv_dim, q_dim, H, Hkv, hd))
        return;
    uint32_t row = 0;
    for (uint32_t i = 0; i < batch->n_segments; row += batch->segments[i++].n_rows) {
        const vh_segment *seg = &batch->segments[i];
        if (seg->n_rows < FLASH_MIN_ROWS) continue;
        for (uint32_t r = 0; r < seg->n_rows && s->n_tiles < s->max_tiles; r += VHC_FLASH_TILE_ROWS)
            s->tiles_host[s->n_tiles++] = (vhc_attention_tile){
                .first_row = (int32_t)(row + r),
                .n_rows = (int32_t)(seg->n_rows - r < VHC_FLASH_TILE_ROWS ? seg->n_rows - r : VHC_FLASH_TILE_ROWS),
                .first_position = (int32_t)(seg->position + r),
                .kv_base = (int64_t)seg->sequence * e->params.max_context * kv_dim};
    }
    /* a causal tile's cost grows with its last key: launch the costliest first, so the waves of
     * blocks end together (the GPU starts blocks in about index order) */
    qsort(s->tiles_host, s->n_tiles, sizeof *s->tiles_host, by_last_key_desc);
}

/* The benchmark peer (VH_CUDA_KV_GATHER=1): each segment's keys and values, positions 0 .. its last
 * row, copied out of the cache; attention then reads the copies. */
static void gather_kv(vh_executor *e, const vh_batch *batch, const vhc_bf16 **k_cache, const vhc_bf16 **v_cache)
{
    const int64_t kv_dim = (int64_t)e->model->llm.n_kv_heads * e->model->llm.head_dim;
    for (uint32_t i = 0; i < batch->n_segments; i++) {
        const vh_segment *seg = &batch->segments[i];
        const int64_t base = (int64_t)seg->sequence * e->params.max_context * kv_dim;
        const size_t bytes = sizeof(vhc_bf16) * (size_t)(seg->position + seg->n_rows) * kv_dim;
        cudaMemcpyAsync(e->gather_k + base, *k_cache + base, bytes, cudaMemcpyDeviceToDevice, e->stream);
        cudaMemcpyAsync(e->gather_v + base, *v_cache + base, bytes, cudaMemcpyDeviceToDevice, e->stream);
    }
    *k_cache = e->gather_k;
    *v_cache = e->gather_v;
}

static void llm_attention(vh_executor *e, const vh_batch *batch, const vhc_bf16 *k_cache, const vhc_bf16 *v_cache)
{
    const vh_llm_desc *l = &e->model->llm;
    llm_buffers *s = &e->llm;
    const int hd = (int)l->head_dim, H = (int)l->n_heads, Hkv = (int)l->n_kv_heads;
    const int64_t q_dim = (int64_t)H * hd, kv_dim = (int64_t)Hkv * hd;
    const float scale = (float)(1.0 / sqrt((double)hd));
    if (e->gather_k) gather_kv(e, batch, &k_cache, &v_cache);
    vhc_flash_attention_tiles(e->stream, s->q, q_dim, k_cache, v_cache, kv_dim, s->attn, q_dim, s->tiles,
                              (int)s->n_tiles, H, Hkv, hd, scale);
    uint32_t row = 0, run_start = 0;
    for (uint32_t i = 0; i <= batch->n_segments; i++) {
        const vh_segment *seg = i < batch->n_segments ? &batch->segments[i] : NULL;
        const int flash = seg && seg->n_rows >= FLASH_MIN_ROWS && s->n_tiles > 0;
        if ((!seg || flash) && row > run_start) /* the run of short segments before this one */
            vhc_attention(e->stream, s->q + run_start * q_dim, q_dim, k_cache, v_cache, kv_dim, s->rows + run_start, 0,
                          s->attn + run_start * q_dim, q_dim, (int)(row - run_start), H, Hkv, hd, scale);
        if (!seg) break;
        row += seg->n_rows;
        if (flash) run_start = row;
    }
}

/* Projection proj's (0 q, 1 k, 2 v, 3 o) LoRA deltas accumulated into y (rows ldy apart; for q/k/v
 * columns of the fused output): for each run of consecutive segments of one set (their rows are
 * contiguous), t = x A^T, then y += bf16(t) B^T (B holds the scale). A set the block lacks for this
 * projection adds nothing; executor_run refused sets it lacks altogether. */
static vh_status lora(vh_executor *e, const cuda_block *b, const vh_batch *batch, int proj, const vhc_bf16 *x,
                      int64_t in, float *y, int64_t ldy, int64_t out, char *err, size_t err_size)
{
    if (!b->lora_sets) return VH_OK;
    llm_buffers *s = &e->llm;
    for (uint32_t g = 0, row = 0, set, n; vh_batch_adapter_run(batch, &g, &set, &n); row += n) {
        /* the pair to run: q's stands for q, k and v when the set's are one (x [Aq; Ak; Av]^T, t Bdiag^T
         * over the whole q|k|v output, which starts at q's y) */
        const int fused = b->qkv_lora_b[set] != NULL;
        if ((fused && proj > 0 && proj <= 2) || !b->lora_a[set][proj]) continue;
        const int64_t width = (fused && proj == 0 ? 3 : 1) * b->lora_ld[set][proj];
        const vhc_bf16 *bmat = fused && proj == 0 ? b->qkv_lora_b[set] : b->lora_b[set][proj];
        const int64_t n_out = fused && proj == 0 ? ldy : out;
        vh_status st;
        if ((st = vhc_linear(e->gemm, x + (size_t)row * in, in, n, in, b->lora_a[set][proj], width, s->lora_t, width, 0,
                             err, err_size)))
            return st;
        vhc_f32_to_bf16(e->stream, s->lora_t, s->lora_t_bf16, (int64_t)n * width);
        if ((st = vhc_linear(e->gemm, s->lora_t_bf16, width, n, width, bmat, n_out, y + (size_t)row * ldy, ldy, 1, err,
                             err_size)))
            return st;
    }
    return VH_OK;
}

vh_status cuda_llm_block(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    const vh_llm_desc *l = &e->model->llm;
    llm_buffers *s = &e->llm;
    const int R = (int)batch->n_rows, Dl = (int)l->hidden, F = (int)l->intermediate, hd = (int)l->head_dim;
    const int q_dim = (int)l->n_heads * hd, kv_dim = (int)l->n_kv_heads * hd, qkv_dim = q_dim + 2 * kv_dim;
    const size_t layer_cache = (size_t)e->params.max_sequences * e->params.max_context * kv_dim;
    vhc_bf16 *k_cache = e->k_cache + (size_t)(b->state - e->first_state) * layer_cache;
    vhc_bf16 *v_cache = e->v_cache + (size_t)(b->state - e->first_state) * layer_cache;
    vh_status st;

    VHC_MARK(e, "llm.norm", R);
    vhc_rmsnorm_bf16(e->stream, s->x, b->vec[VH_TF_ATTN_NORM_W], s->xn, R, Dl, b->info.norm_eps, NULL);
    VHC_MARK(e, "llm.qkv", R);
    if ((st = vhc_linear(e->gemm, s->xn, Dl, R, Dl, b->qkv_w, qkv_dim, s->qkv, qkv_dim, 0, err, err_size)))
        return st;
    if (b->lora_sets) VHC_MARK(e, "llm.qkv_lora", R);
    if ((st = lora(e, b, batch, 0, s->xn, Dl, s->qkv, qkv_dim, q_dim, err, err_size)) ||
        (st = lora(e, b, batch, 1, s->xn, Dl, s->qkv + q_dim, qkv_dim, kv_dim, err, err_size)) ||
        (st = lora(e, b, batch, 2, s->xn, Dl, s->qkv + q_dim + kv_dim, qkv_dim, kv_dim, err, err_size)))
        return st;
    if (b->qkv_bias) {
        VHC_MARK(e, "llm.qkv_bias", R);
        vhc_bias_add_f32(e->stream, s->qkv, b->qkv_bias, s->qkv, R, qkv_dim);
    }
    VHC_MARK(e, "llm.rope+kv", R);
    vhc_llm_rope_qkv(e->stream, s->qkv, s->rows, s->q, k_cache, v_cache, R, (int)l->n_heads, (int)l->n_kv_heads, hd,
                     s->rope_inv_freq);
    VHC_MARK(e, "llm.attention", R);
    llm_attention(e, batch, k_cache, v_cache);
    VHC_MARK(e, "llm.o_proj", R);
    if ((st = vhc_linear(e->gemm, s->attn, q_dim, R, q_dim, b->mat[VH_TF_O_W], Dl, s->x, Dl, 1, err, err_size)))
        return st;
    if (b->lora_sets) VHC_MARK(e, "llm.o_lora", R);
    if ((st = lora(e, b, batch, 3, s->attn, q_dim, s->x, Dl, Dl, err, err_size))) return st;

    VHC_MARK(e, "llm.norm", R);
    vhc_rmsnorm_bf16(e->stream, s->x, b->vec[VH_TF_MLP_NORM_W], s->xn, R, Dl, b->info.norm_eps, NULL);
    VHC_MARK(e, "llm.gate_up", R);
    if ((st = vhc_linear(e->gemm, s->xn, Dl, R, Dl, b->gate_up_w, 2 * F, s->gate_up, 2 * F, 0, err, err_size)))
        return st;
    VHC_MARK(e, "llm.silu_mul", R);
    vhc_silu_mul_bf16(e->stream, s->gate_up, s->act, R, F);
    VHC_MARK(e, "llm.down", R);
    return vhc_linear(e->gemm, s->act, F, R, F, b->mat[VH_TF_DOWN_W], Dl, s->x, Dl, 1, err, err_size);
}

