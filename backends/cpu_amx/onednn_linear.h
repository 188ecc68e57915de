/* cpu_amx's cpu_linear_ops (see onednn_linear.c). */
#ifndef VH_CPU_AMX_ONEDNN_LINEAR_H
#define VH_CPU_AMX_ONEDNN_LINEAR_H

#include "cpu_linear.h"

typedef struct amx_linear amx_linear;

/* The executor's pool: OpenMP's team, the one oneDNN runs on (pinned where hwloc can). */
vh_thread_pool *amx_create_pool(int n_threads);

void *amx_linear_create(vh_thread_pool *pool, const vh_executor_params *params, int64_t max_in, char *err,
                        size_t err_size);
void amx_linear_destroy(void *ctx);
vh_status amx_linear_prepare(void *ctx, const vh_tensor_view *w, void **prepared, uint64_t *bytes, char *err,
                             size_t err_size);
void amx_linear_release(void *ctx, void *prepared);
void amx_linear_finish_load(void *ctx);
vh_status amx_linear_run(void *ctx, const float *x, int64_t x_stride, int64_t rows, int64_t in, const vh_tensor_view *w,
                     const void *prepared, const float *bias, float *y, int64_t y_stride, char *err, size_t err_size);

#endif
