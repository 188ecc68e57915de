/*
 * How a CPU backend computes its linear layers: the one thing cpu_generic (OpenBLAS / direct bf16
 * GEMM) and cpu_amx (oneDNN, AMX) do differently. Everything else of the CPU block executor
 * (cpu_executor.c, cpu_vit.c, cpu_llama.c) is shared.
 *
 *   y[rows, out] = x[rows, in] W^T + bias,   W a [out, in] view in the checkpoint's dtype
 */
#ifndef VH_CPU_LINEAR_H
#define VH_CPU_LINEAR_H

#include "thread_pool.h"
#include "vlahybrid/backend.h"

typedef struct cpu_linear_ops {
    const char *backend;               /* the plugin's name, for messages */

    /* The thread pool every kernel of the executor runs on (made first, at executor creation,
     * with the params' n_threads); NULL when it cannot be made. */
    vh_thread_pool *(*create_pool)(int n_threads);

    /* One context per executor (scratch, primitive caches). max_in: the widest `in` of its
     * matrices. NULL with a message on failure. */
    void *(*create)(vh_thread_pool *pool, const vh_executor_params *params, int64_t max_in, char *err,
                    size_t err_size);
    void (*destroy)(void *ctx);

    /* Make a weight matrix ready once, at executor creation (a backend may reorder it into its own
     * layout); *prepared may stay NULL, meaning "use the view". Bytes allocated go to *bytes. */
    vh_status (*prepare)(void *ctx, const vh_tensor_view *w, void **prepared, uint64_t *bytes, char *err,
                         size_t err_size);
    void (*release)(void *ctx, void *prepared);
    /* After the last prepare, on the same (creating) thread; NULL: nothing to do. */
    void (*finish_load)(void *ctx);

    /* y = x W^T + bias (bias may be NULL); y rows are y_stride floats apart. */
    vh_status (*linear)(void *ctx, const float *x, int64_t x_stride, int64_t rows, int64_t in,
                        const vh_tensor_view *w, const void *prepared, const float *bias, float *y, int64_t y_stride,
                        char *err, size_t err_size);
} cpu_linear_ops;

#endif
