/*
 * cpu_amx's linear layers on its own bf16 GEMM (bf16_gemm.h): each weight matrix packed once at
 * load (q|k|v stacked and gate|up paired when the executor fuses them), activations rounded to bf16
 * (RMS-normalised on the way when the call asks) into the executor's one buffer, the residual add,
 * the SiLU gate and the ViT's GELU in the GEMM's epilogue. AMX tiles from bf16_gemm_amx_min_rows
 * rows, AVX-512 bf16 below (decode steps) and on CPUs without AMX. Also the AVX-512 attention for
 * many rows (avx512_attention.h), with its scratch.
 */
#include "bf16_linear.h"

#include <stdlib.h>
#include <string.h>

#include "avx512_attention.h"
#include "backend_error.h"
#include "backend_knobs.h"
#include "block_variants.h"
#include "bf16_gemm.h"
#include "thread_pool_openmp.h"

struct bf16_linear {
    vh_thread_pool *pool;
    bf16_gemm_scratch *scratch;
    bf16_activations act;              /* the current call's input, bf16 */
    bf16_kernel kernel;                /* AUTO; VH_BF16_KERNEL=avx512 / amx to force one (benchmarks) */
    avx512_attention *attention;       /* many-row attention's scratch (executors with LLM or ViT blocks) */
};

/* The keys and the key width the attention of the held blocks needs at most: an LLM block's
 * context and KV width, a ViT block's tokens and width (0, 0: no attention here). */
static void attention_needs(const vh_executor_params *p, int64_t *keys, int64_t *width)
{
    *keys = *width = 0;
    const vh_model_desc *m = p->model;
    for (uint32_t i = p->first_block; i < p->first_block + p->n_blocks && i < m->n_blocks; i++) {
        const vh_block_desc *d = &m->blocks[i];
        const int index = vh_block_variant_of(m, d);
        if (index < 0 || !vh_block_variants[index].attends) continue;
        int64_t k = 0, w = 0;
        if (vh_block_variants[index].llm_layer) {
            k = p->max_context;
            w = (int64_t)m->llm.n_kv_heads * m->llm.head_dim;
        } else {
            const uint32_t t = m->slots[d->inputs[0]].tower;
            if (t >= m->n_towers) continue;
            k = (int64_t)m->towers[t].n_prefix + m->towers[t].n_patches;
            w = m->towers[t].embed_dim;
        }
        if (k > *keys) *keys = k;
        if (w > *width) *width = w;
    }
}

void *bf16_linear_create(vh_thread_pool *pool, const vh_executor_params *params, int64_t max_in, char *err,
                         size_t err_size)
{
    bf16_linear *l = calloc(1, sizeof *l);
    if (!l) {
        vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cpu_amx: out of memory");
        return NULL;
    }
    l->pool = pool;
    const char *kernel = vh_knob_value(VH_KNOB_BF16_KERNEL);
    l->kernel = kernel && !strcmp(kernel, "avx512") ? BF16_KERNEL_AVX512
                : kernel && !strcmp(kernel, "amx")  ? BF16_KERNEL_AMX
                                                    : BF16_KERNEL_AUTO;
    l->scratch = bf16_gemm_scratch_create(vh_thread_pool_size(pool));
    /* the activation buffer at its largest now, so that no run allocates */
    const int64_t rows = params->max_rows > 1 ? params->max_rows : 1;
    vh_status st = l->scratch ? bf16_activations_reserve(&l->act, rows, max_in) : VH_ERR_OUT_OF_MEMORY;
    int64_t keys, width;
    attention_needs(params, &keys, &width);
    if (!st && keys && !(l->attention = avx512_attention_create(keys, width))) st = VH_ERR_OUT_OF_MEMORY;
    if (st) {
        vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cpu_amx: out of memory (GEMM scratch for %lld rows)",
                        (long long)rows);
        bf16_linear_destroy(l);
        return NULL;
    }
    return l;
}

void bf16_linear_destroy(void *ctx)
{
    bf16_linear *l = ctx;
    if (!l) return;
    bf16_gemm_scratch_destroy(l->scratch);
    bf16_activations_free(&l->act);
    avx512_attention_destroy(l->attention);
    free(l);
}

static vh_status pack(bf16_linear *l, const vh_tensor_view *const *w, int n, bf16_pack_layout layout,
                      void **prepared, uint64_t *bytes, char *err, size_t err_size)
{
    *prepared = NULL;
    bf16_packed *p = malloc(sizeof *p);
    if (!p) return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cpu_amx: out of memory");
    vh_status st = bf16_pack(l->pool, w, n, layout, p, err, err_size);
    if (st) {
        free(p);
        return st;
    }
    *bytes += bf16_packed_bytes(p);
    *prepared = p;
    return VH_OK;
}

vh_status bf16_linear_prepare(void *ctx, const vh_tensor_view *w, void **prepared, uint64_t *bytes, char *err,
                              size_t err_size)
{
    return pack(ctx, &w, 1, BF16_PACK_STACK, prepared, bytes, err, err_size);
}

vh_status bf16_linear_prepare_fused(void *ctx, const vh_tensor_view *const *w, int n, cpu_fuse fuse, void **prepared,
                                    uint64_t *bytes, char *err, size_t err_size)
{
    return pack(ctx, w, n, fuse == CPU_FUSE_GATED ? BF16_PACK_GATED : BF16_PACK_STACK, prepared, bytes, err,
                err_size);
}

void bf16_linear_release(void *ctx, void *prepared)
{
    (void)ctx;
    bf16_packed_free(prepared);
    free(prepared);
}

/* Packing ran on the creating thread's OpenMP team, which runs do not use: let it go. */
void bf16_linear_finish_load(void *ctx)
{
    (void)ctx;
    vh_openmp_release_team();
}

vh_status bf16_linear_fused(void *ctx, const cpu_linear_call *call, char *err, size_t err_size)
{
    bf16_linear *l = ctx;
    const bf16_packed *w = call->prepared;
    if (!w || w->k != call->in || (call->epilogue == CPU_EPILOGUE_SILU_MUL) != (w->layout == BF16_PACK_GATED))
        return vh_backend_fail(err, err_size, VH_ERR_BACKEND_FAILED,
                               "cpu_amx: linear layer of %lld inputs on a matrix that does not match it",
                               (long long)call->in);
    if (call->rows <= 0) return VH_OK;
    if (bf16_activations_load(l->pool, &l->act, call->x, call->x_stride, call->rows, call->in, call->rms_weight,
                              call->rms_eps))
        return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cpu_amx: out of memory (%lld rows)",
                               (long long)call->rows);
    const bf16_epilogue epilogue = call->epilogue == CPU_EPILOGUE_ADD        ? BF16_EPI_ADD
                                   : call->epilogue == CPU_EPILOGUE_SILU_MUL ? BF16_EPI_SILU_MUL
                                   : call->epilogue == CPU_EPILOGUE_GELU     ? BF16_EPI_GELU
                                                                             : BF16_EPI_STORE;
    const bf16_gemm_args args = {.a = &l->act, .w = w, .bias = call->bias, .epilogue = epilogue, .y = call->y,
                                 .y_stride = call->y_stride};
    bf16_gemm(l->pool, l->scratch, &args, l->kernel);
    return VH_OK;
}

int bf16_linear_attention(void *ctx, const vhk_attention_args *args)
{
    bf16_linear *l = ctx;
    if (!avx512_attention_fits(l->attention, args)) return 0;
    avx512_attention_run(l->attention, l->pool, args);
    return 1;
}

vh_status bf16_linear_run(void *ctx, const float *x, int64_t x_stride, int64_t rows, int64_t in,
                          const vh_tensor_view *w, const void *prepared, const float *bias, float *y, int64_t y_stride,
                          char *err, size_t err_size)
{
    (void)w;
    const cpu_linear_call call = {.x = x, .x_stride = x_stride, .rows = rows, .in = in, .prepared = prepared,
                                  .bias = bias, .epilogue = CPU_EPILOGUE_STORE, .y = y, .y_stride = y_stride};
    return bf16_linear_fused(ctx, &call, err, err_size);
}
