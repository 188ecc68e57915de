/*
 * Weights to the GPU (cuda_upload.c): which tensors become bf16 matrices and which fp32 vectors,
 * and the copies that convert them on the way through a pinned staging buffer.
 */
#ifndef VH_CUDA_UPLOAD_H
#define VH_CUDA_UPLOAD_H

#include "cuda_executor.h"

typedef struct cuda_uploader {
    void *staging;                     /* pinned, the staging buffer's size */
} cuda_uploader;

/* 1-D tensors, and the roles its kind keeps in fp32, are fp32 vectors; the rest bf16 matrices. */
static inline int cuda_is_fp32_tensor(const cuda_block *b, uint32_t role)
{
    return b->t[role].ndim == 1 || (b->kind->fp32_roles >> role & 1u);
}

/* The patch embedding's [D, 3, P, P] weight, held as [D, VHC_PATCH_LD(P)] rows padded with zeros. */
static inline int cuda_is_patch_weight(const cuda_block *b, uint32_t role)
{
    return b->kind->patch_roles >> role & 1u;
}

/* A tensor the kind lays out itself (cuda_kind.plan_packed, upload_packed). */
static inline int cuda_is_packed_tensor(const cuda_block *b, uint32_t role)
{
    return b->kind->packed_roles >> role & 1u;
}

static inline int64_t cuda_n_elements(const vh_tensor_view *t)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

/* t whole, to bf16 (or fp32 where to_f32) at dst. */
vh_status cuda_upload(cuda_uploader *u, const vh_tensor_view *t, int to_f32, void *dst, char *err, size_t err_size);

/* rows x cols values of t as bf16 rows ld elements apart, zeros past cols; each value times scale
 * first where scale is not 1 (a LoRA B, pre-scaled: one rounding to bf16 either way). */
vh_status cuda_upload_padded_rows(cuda_uploader *u, const vh_tensor_view *t, int64_t rows, int64_t cols, int64_t ld,
                                  float scale, void *dst, char *err, size_t err_size);

/* t's rows as columns [col0, col0 + cols) of `rows` rows of width ld (the rest zero), scaled, in bf16. */
vh_status cuda_upload_block_row(cuda_uploader *u, const vh_tensor_view *t, int64_t rows, int64_t cols, int64_t col0,
                                int64_t ld, float scale, void *dst, char *err, size_t err_size);

/* Every block's tensors into the memory the plan carved (a tied tensor once), reporting progress. */
vh_status cuda_upload_weights(vh_executor *e, char *err, size_t err_size);

/* RoPE's inverse frequencies, computed once on the host (cuda_kernels.h). */
vh_status cuda_upload_rope_table(vh_executor *e, char *err, size_t err_size);

#endif
