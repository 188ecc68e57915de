/*
 * Weights to the GPU, once at creation: each tensor converted to the device's dtype on the host
 * (bf16 matrices, fp32 vectors) in a pinned staging buffer, then copied into the memory the plan
 * carved for it (cuda_memory_plan.c).
 */
#include "cuda_upload.h"

#include "backend_error.h"

#include <stdlib.h>
#include <string.h>

#define STAGING_BYTES ((size_t)64 << 20)

static void convert_to_bf16(const void *src, vh_dtype dtype, int64_t first, int64_t n, uint16_t *dst)
{
    if (dtype == VH_DTYPE_BF16) {
        memcpy(dst, (const uint16_t *)src + first, (size_t)n * 2);
    } else if (dtype == VH_DTYPE_F16) {
        const uint16_t *s = (const uint16_t *)src + first;
        for (int64_t i = 0; i < n; i++) dst[i] = vh_f32_to_bf16(vh_f16_to_f32(s[i]));
    } else {
        const float *s = (const float *)src + first;
        for (int64_t i = 0; i < n; i++) dst[i] = vh_f32_to_bf16(s[i]);
    }
}

static void convert_to_f32(const void *src, vh_dtype dtype, int64_t first, int64_t n, float *dst)
{
    if (dtype == VH_DTYPE_F32) {
        memcpy(dst, (const float *)src + first, (size_t)n * 4);
    } else {
        const uint16_t *s = (const uint16_t *)src + first;
        for (int64_t i = 0; i < n; i++) dst[i] = dtype == VH_DTYPE_BF16 ? vh_bf16_to_f32(s[i]) : vh_f16_to_f32(s[i]);
    }
}

vh_status cuda_upload(cuda_uploader *u, const vh_tensor_view *t, int to_f32, void *dst, char *err, size_t err_size)
{
    const int64_t n = cuda_n_elements(t), out_size = to_f32 ? 4 : 2, per_chunk = (int64_t)(STAGING_BYTES / 4);
    for (int64_t first = 0; first < n; first += per_chunk) {
        int64_t count = n - first < per_chunk ? n - first : per_chunk;
        if (to_f32) convert_to_f32(t->data, t->dtype, first, count, u->staging);
        else convert_to_bf16(t->data, t->dtype, first, count, u->staging);
        cudaError_t e = cudaMemcpy((char *)dst + first * out_size, u->staging, (size_t)(count * out_size),
                                   cudaMemcpyHostToDevice);
        if (e != cudaSuccess) return cuda_fail(err, err_size, e, t->name);
    }
    return VH_OK;
}

/* rows x cols values of t as bf16 rows ld elements apart, zeros past cols; each value times scale
 * first where scale is not 1 (a LoRA B, pre-scaled: one rounding to bf16 either way). */
vh_status cuda_upload_padded_rows(cuda_uploader *u, const vh_tensor_view *t, int64_t rows, int64_t cols, int64_t ld,
                                  float scale, void *dst, char *err, size_t err_size)
{
    const int64_t per_chunk = (int64_t)(STAGING_BYTES / 2) / ld;
    for (int64_t first = 0; first < rows; first += per_chunk) {
        const int64_t count = rows - first < per_chunk ? rows - first : per_chunk;
        uint16_t *staging = u->staging;
        for (int64_t r = 0; r < count; r++) {
            convert_to_bf16(t->data, t->dtype, (first + r) * cols, cols, staging + r * ld);
            for (int64_t c = 0; scale != 1.0f && c < cols; c++) {
                float f;
                convert_to_f32(t->data, t->dtype, (first + r) * cols + c, 1, &f);
                staging[r * ld + c] = vh_f32_to_bf16(f * scale);
            }
            memset(staging + r * ld + cols, 0, (size_t)(ld - cols) * 2);
        }
        cudaError_t e = cudaMemcpy((uint16_t *)dst + first * ld, staging, (size_t)(count * ld * 2),
                                   cudaMemcpyHostToDevice);
        if (e != cudaSuccess) return cuda_fail(err, err_size, e, t->name);
    }
    return VH_OK;
}

/* t's rows as columns [col0, col0 + cols) of `rows` rows of width ld (the rest zero), scaled, in bf16. */
vh_status cuda_upload_block_row(cuda_uploader *u, const vh_tensor_view *t, int64_t rows, int64_t cols, int64_t col0,
                                int64_t ld, float scale, void *dst, char *err, size_t err_size)
{
    const int64_t per_chunk = (int64_t)(STAGING_BYTES / 2) / ld;
    for (int64_t first = 0; first < rows; first += per_chunk) {
        const int64_t count = rows - first < per_chunk ? rows - first : per_chunk;
        uint16_t *staging = u->staging;
        memset(staging, 0, (size_t)(count * ld * 2));
        for (int64_t r = 0; r < count; r++)
            for (int64_t c = 0; c < cols; c++) {
                float f;
                convert_to_f32(t->data, t->dtype, (first + r) * cols + c, 1, &f);
                staging[r * ld + col0 + c] = vh_f32_to_bf16(f * scale);
            }
        cudaError_t e = cudaMemcpy((uint16_t *)dst + first * ld, staging, (size_t)(count * ld * 2),
                                   cudaMemcpyHostToDevice);
        if (e != cudaSuccess) return cuda_fail(err, err_size, e, t->name);
    }
    return VH_OK;
}

vh_status cuda_upload_weights(vh_executor *e, char *err, size_t err_size)
{
    cuda_uploader u;
    cudaError_t ce = cudaMallocHost(&u.staging, STAGING_BYTES);
    if (ce != cudaSuccess) return cuda_fail(err, err_size, ce, "pinned staging buffer");
    vh_status st = VH_OK;
    uint64_t total = 0, done = 0; /* progress: the bytes of the blocks' tensors */
    for (uint32_t i = 0; i < e->params.n_blocks; i++) total += vh_block_tensor_bytes(e->blocks[i].desc);
    for (uint32_t i = 0; i < e->params.n_blocks && st == VH_OK; i++) {
        cuda_block *b = &e->blocks[i];
        const vh_block_desc *d = b->desc;
        if (i && vh_executor_progress(&e->params, done, total)) { /* block i - 1 uploaded */
            st = vh_backend_fail(err, err_size, VH_ERR_CANCELLED, "cuda: cancelled after block %u of %u", i,
                                 e->params.n_blocks);
            break;
        }
        done += vh_block_tensor_bytes(d);
        for (uint32_t t = 0; t < CUDA_MAX_ROLES && st == VH_OK; t++) {
            const vh_tensor_view *v = &b->t[t];
            if (!v->data || cuda_is_packed_tensor(b, t)) continue;
            int duplicate = 0; /* a tied tensor already uploaded by an earlier block */
            for (uint32_t j = 0; j < i && !duplicate; j++)
                for (uint32_t k = 0; k < CUDA_MAX_ROLES; k++)
                    if (e->blocks[j].t[k].data == v->data) duplicate = 1;
            if (duplicate && !cuda_is_fp32_tensor(b, t)) continue;
            if (cuda_is_patch_weight(b, t)) {
                const int64_t cols = cuda_n_elements(v) / v->shape[0];
                st = cuda_upload_padded_rows(&u, v, v->shape[0], cols,
                                             VHC_PATCH_LD(e->model->towers[b->info.tower].patch_size), 1.0f, b->mat[t],
                                             err, err_size);
                continue;
            }
            st = cuda_upload(&u, v, cuda_is_fp32_tensor(b, t),
                             cuda_is_fp32_tensor(b, t) ? (void *)b->vec[t] : (void *)b->mat[t], err, err_size);
        }
        if (b->kind->upload_packed && st == VH_OK && (st = b->kind->upload_packed(e, &u, b, err, err_size))) break;
    }
    cudaFreeHost(u.staging);
    if (st == VH_OK && vh_executor_progress(&e->params, total, total))
        st = vh_backend_fail(err, err_size, VH_ERR_CANCELLED, "cuda: cancelled after its last block");
    return st;
}

/* RoPE's inverse frequencies, computed once on the host (cuda_kernels.h). */
vh_status cuda_upload_rope_table(vh_executor *e, char *err, size_t err_size)
{
    if (!e->llm.x) return VH_OK;
    const vh_llm_desc *l = &e->model->llm;
    float theta = 0.0f; /* every decoder layer held has the same (cuda_executor.c) */
    for (uint32_t i = 0; i < e->params.n_blocks && theta == 0.0f; i++)
        if (e->blocks[i].variant->llm_layer) theta = e->blocks[i].info.rope_theta;
    float *inv_freq = malloc(sizeof(float) * (l->head_dim / 2 + 1));
    if (!inv_freq) return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
    vhc_rope_inv_freq(theta, (int)l->head_dim, inv_freq);
    cudaError_t ce =
        cudaMemcpy(e->llm.rope_inv_freq, inv_freq, sizeof(float) * (l->head_dim / 2), cudaMemcpyHostToDevice);
    free(inv_freq);
    return ce == cudaSuccess ? VH_OK : cuda_fail(err, err_size, ce, "RoPE frequencies");
}
