/*
 * A decoder layer on query sets on the GPU (VH_BLOCK_TRANSFORMER, post-norm LayerNorm, no RoPE;
 * DETR's, PETR's and StreamPETR's decoder layers; backends/cpu_common/cpu_query_layer.c is the
 * CPU's and says the math), per frame:
 *
 *   self-attention: kv = [x; extra], kv_pos = [pos; extra_pos];  cross-attention: kv = the key rows
 *   x = norm1(x + o(attention(q(x + pos), k(kv + kv_pos), v(kv))))
 *   x = norm2(x + down(relu(up(x))))               (VH_MLP_RELU; none with VH_MLP_NONE)
 *
 * The GEMMs' inputs in bf16 (the sums of rows and positions formed in the conversion), the
 * projections on cuBLASLt with fp32 outputs, the biases added where they turn bf16 for the flash
 * kernel, the residual stream and the norms fp32. With VH_TF_ATTN_MASK the rows at or past
 * mask_prefix attend to keys [mask_prefix, n_keys) only: a second flash launch on those rows and
 * keys.
 */
#include <math.h>

#include "backend_error.h"
#include "cuda_executor.h"
#include "cuda_memory_plan.h"

typedef vh_query_layer_shape query_layer_shape;

static query_layer_shape shape_of(const vh_executor *e, const cuda_block *b)
{
    return vh_query_layer_shape_of(e->model, b->desc, &b->info);
}

typedef struct layer_scratch {
    vhc_bf16 *qin, *kin, *vin;         /* [R, D], [K, D], [K, D] the projections' inputs */
    float *proj;                       /* [max(R, K), D] a projection's output */
    vhc_bf16 *q, *k, *v, *att, *xn;    /* [R, D], [K, D], [K, D], [R, D], [R, D] */
    float *hidden;                     /* [R, F] */
    vhc_bf16 *hidden_bf16;             /* [R, F] */
} layer_scratch;

static size_t carve(const query_layer_shape *s, char *base, layer_scratch *p)
{
    const size_t R = (size_t)s->R, K = (size_t)s->K, D = (size_t)s->D, F = (size_t)s->F;
    cuda_arena a = {.base = base};
    p->qin = cuda_arena_take(&a, R * D * 2);
    p->kin = cuda_arena_take(&a, K * D * 2);
    p->vin = cuda_arena_take(&a, K * D * 2);
    p->proj = cuda_arena_take(&a, (R > K ? R : K) * D * 4);
    p->q = cuda_arena_take(&a, R * D * 2);
    p->k = cuda_arena_take(&a, K * D * 2);
    p->v = cuda_arena_take(&a, K * D * 2);
    p->att = cuda_arena_take(&a, R * D * 2);
    p->xn = cuda_arena_take(&a, R * D * 2);
    p->hidden = cuda_arena_take(&a, R * F * 4);
    p->hidden_bf16 = cuda_arena_take(&a, R * F * 2);
    return a.used;
}

size_t cuda_query_layer_scratch_bytes(const vh_executor *e, const cuda_block *b)
{
    const query_layer_shape s = shape_of(e, b);
    layer_scratch p;
    return carve(&s, NULL, &p);
}

/* out = bf16(W in + bias): the projection through proj. */
static vh_status project(vh_executor *e, const cuda_block *b, int w_role, int b_role, const vhc_bf16 *in, int64_t rows,
                         int64_t D, float *proj, vhc_bf16 *out, char *err, size_t err_size)
{
    vh_status st = vhc_linear(e->gemm, in, D, rows, D, b->mat[w_role], D, proj, D, 0, err, err_size);
    if (!st) vhc_bias_act(e->stream, proj, b->vec[b_role], NULL, out, rows, (int)D, 0);
    return st;
}

/* Rows [first_row, first_row + n_rows) attend to keys [first_key, K). */
static void attend(vh_executor *e, const query_layer_shape *s, const layer_scratch *p, int64_t first_row,
                   int64_t n_rows, int64_t first_key)
{
    if (n_rows <= 0) return;
    const int hd = (int)(s->D / s->heads);
    vhc_flash_attention(e->stream, p->q + first_row * s->D, s->D, p->k + first_key * s->D, p->v + first_key * s->D,
                        s->D, p->att + first_row * s->D, s->D, (int)n_rows, (int)s->heads, (int)s->heads, hd,
                        (float)(1.0 / sqrt((double)hd)), (int)(s->K - first_key), -1);
}

/* The flash kernel's conditions (vhc_flash_attention_supported) hold for every pointer the layer
 * passes it when the heads are a multiple of 8 wide up to 128 (rows then 16-byte aligned). */
vh_status cuda_query_layer_check(const vh_executor *e, const cuda_block *b, char *err, size_t err_size)
{
    const query_layer_shape s = shape_of(e, b);
    const int64_t hd = s.heads ? s.D / s.heads : 0;
    if (hd % 8 || hd > 128 || hd == 0 || s.D > VHC_ROWS_FINISH_MAX_COLS)
        return vh_backend_fail(err, err_size, VH_ERR_UNSUPPORTED, "cuda: block %u: a decoder layer %lld wide in heads of "
                               "%lld: the GPU's takes heads of a multiple of 8 up to 128, widths up to %d",
                               (unsigned)(b->desc - e->model->blocks), (long long)s.D, (long long)hd,
                               VHC_ROWS_FINISH_MAX_COLS);
    return VH_OK;
}

vh_status cuda_query_layer(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    const query_layer_shape s = shape_of(e, b);
    const vh_block_desc *d = b->desc;
    const int64_t R = s.R, K = s.K, D = s.D;
    layer_scratch p;
    carve(&s, e->queries.scratch, &p);
    const uint32_t key_slot = s.cross || s.extra ? d->inputs[1 + s.pos] : 0;
    const int64_t prefix = b->info.mask_prefix;
    vh_status st;
    for (uint32_t f = 0; f < batch->n_frames; f++) {
        float *x = cuda_query_rows(e, d->output, f);
        cudaError_t ce;
        if (d->output != d->inputs[0] &&
            (ce = cudaMemcpyAsync(x, cuda_query_rows(e, d->inputs[0], f), sizeof(float) * (size_t)(R * D),
                                  cudaMemcpyDeviceToDevice, e->stream)))
            return cuda_fail(err, err_size, ce, "a decoder layer's rows");
        const float *pos = s.pos ? cuda_query_rows(e, d->inputs[1], f) : NULL;
        const float *key_pos = s.pos && (s.cross || s.extra) ? cuda_query_rows(e, d->inputs[3], f) : NULL;
        VHC_MARK(e, "query.inputs", (int)R);
        if (s.cross) { /* values: the key rows; keys: with their positions */
            const float *keys = cuda_query_rows(e, key_slot, f);
            vhc_add_bf16(e->stream, keys, NULL, p.vin, K * D);
            vhc_add_bf16(e->stream, keys, key_pos, p.kin, K * D);
        } else {
            vhc_add_bf16(e->stream, x, NULL, p.vin, R * D);
            vhc_add_bf16(e->stream, x, pos, p.kin, R * D);
            if (s.extra) {
                const float *extra = cuda_query_rows(e, key_slot, f);
                vhc_add_bf16(e->stream, extra, NULL, p.vin + R * D, (K - R) * D);
                vhc_add_bf16(e->stream, extra, key_pos, p.kin + R * D, (K - R) * D);
            }
        }
        vhc_add_bf16(e->stream, x, pos, p.qin, R * D);
        VHC_MARK(e, "query.qkv", (int)(R + 2 * K));
        if ((st = project(e, b, VH_TF_Q_W, VH_TF_Q_B, p.qin, R, D, p.proj, p.q, err, err_size)) ||
            (st = project(e, b, VH_TF_K_W, VH_TF_K_B, p.kin, K, D, p.proj, p.k, err, err_size)) ||
            (st = project(e, b, VH_TF_V_W, VH_TF_V_B, p.vin, K, D, p.proj, p.v, err, err_size)))
            return st;
        VHC_MARK(e, "query.attention", (int)R);
        if (prefix) {
            attend(e, &s, &p, 0, prefix, 0);
            attend(e, &s, &p, prefix, R - prefix, prefix);
        } else {
            attend(e, &s, &p, 0, R, 0);
        }
        VHC_MARK(e, "query.proj_norm", (int)R);
        if ((st = vhc_linear(e->gemm, p.att, D, R, D, b->mat[VH_TF_O_W], D, p.proj, D, 0, err, err_size))) return st;
        vhc_residual_add(e->stream, x, p.proj, b->vec[VH_TF_O_B], NULL, (int)R, (int)D);
        vhc_rows_finish(e->stream, x, NULL, b->vec[VH_TF_ATTN_NORM_W], b->vec[VH_TF_ATTN_NORM_B], b->info.norm_eps,
                        VHC_ACT_NONE, x, s.F ? p.xn : NULL, (int)R, (int)D);
        if (!s.F) continue;
        VHC_MARK(e, "query.mlp", (int)R);
        if ((st = vhc_linear(e->gemm, p.xn, D, R, D, b->mat[VH_TF_UP_W], s.F, p.hidden, s.F, 0, err, err_size)))
            return st;
        vhc_bias_act(e->stream, p.hidden, b->vec[VH_TF_UP_B], NULL, p.hidden_bf16, R, (int)s.F, 1);
        if ((st = vhc_linear(e->gemm, p.hidden_bf16, s.F, R, s.F, b->mat[VH_TF_DOWN_W], D, p.proj, D, 0, err, err_size)))
            return st;
        vhc_residual_add(e->stream, x, p.proj, b->vec[VH_TF_DOWN_B], NULL, (int)R, (int)D);
        vhc_rows_finish(e->stream, x, NULL, b->vec[VH_TF_MLP_NORM_W], b->vec[VH_TF_MLP_NORM_B], b->info.norm_eps,
                        VHC_ACT_NONE, x, NULL, (int)R, (int)D);
    }
    return VH_OK;
}
