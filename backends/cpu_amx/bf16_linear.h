/* cpu_amx's linear layers on its own bf16 GEMM (the cpu_linear_ops of bf16_linear.c). */
#ifndef VH_CPU_AMX_BF16_LINEAR_H
#define VH_CPU_AMX_BF16_LINEAR_H

#include "cpu_linear.h"

typedef struct bf16_linear bf16_linear;

void *bf16_linear_create(vh_thread_pool *pool, const vh_executor_params *params, int64_t max_in, char *err,
                         size_t err_size);
void bf16_linear_destroy(void *ctx);
vh_status bf16_linear_prepare(void *ctx, const vh_tensor_view *w, void **prepared, uint64_t *bytes, char *err,
                              size_t err_size);
vh_status bf16_linear_prepare_fused(void *ctx, const vh_tensor_view *const *w, int n, cpu_fuse fuse, void **prepared,
                                    uint64_t *bytes, char *err, size_t err_size);
void bf16_linear_release(void *ctx, void *prepared);
void bf16_linear_finish_load(void *ctx);
vh_status bf16_linear_run(void *ctx, const float *x, int64_t x_stride, int64_t rows, int64_t in,
                          const vh_tensor_view *w, const void *prepared, const float *bias, float *y, int64_t y_stride,
                          char *err, size_t err_size);
vh_status bf16_linear_fused(void *ctx, const cpu_linear_call *call, char *err, size_t err_size);
/* The AVX-512 attention where it fits (prefill rows); 0: not taken. */
int bf16_linear_attention(void *ctx, const vhk_attention_args *args);

#endif
