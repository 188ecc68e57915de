/*
 * How a CPU backend computes its linear layers: the one thing cpu_generic (OpenBLAS / direct bf16
 * GEMM) and cpu_amx (its own AMX GEMM, or oneDNN) do differently; optionally fused with the norm
 * before and the activation or residual after, and the backend's own attention. Everything else of the CPU block executor
 * (cpu_executor.c, cpu_vit.c, cpu_llama.c) is shared.
 *
 *   y[rows, out] = x[rows, in] W^T + bias,   W a [out, in] view in the checkpoint's dtype
 */
#ifndef VH_CPU_LINEAR_H
#define VH_CPU_LINEAR_H

#include "cpu_kernels.h"
#include "thread_pool.h"
#include "vlahybrid/backend.h"

/* How a fused matrix (prepare_fused) joins matrices that read the same input. */
typedef enum cpu_fuse {
    CPU_FUSE_STACK = 0,                /* outputs one after another: [W0; W1; ..] (q | k | v) */
    CPU_FUSE_GATED = 1,                /* two of one shape, combined by CPU_EPILOGUE_SILU_MUL (gate, up) */
} cpu_fuse;

/* What a fused linear call does with each product element. */
typedef enum cpu_epilogue {
    CPU_EPILOGUE_STORE = 0,            /* y = x W^T + bias */
    CPU_EPILOGUE_ADD = 1,              /* y += x W^T + bias: the residual added in place */
    CPU_EPILOGUE_SILU_MUL = 2,         /* GATED: y = silu(x Wg^T) * (x Wu^T), out / 2 columns */
    CPU_EPILOGUE_GELU = 3,             /* y = gelu(x W^T + bias), exact (erf) GELU */
} cpu_epilogue;

/* y = epilogue(norm(x) W^T + bias), norm = RMSNorm(rms_weight, rms_eps) or none. */
typedef struct cpu_linear_call {
    const float *x;
    int64_t x_stride, rows, in;
    const float *rms_weight;           /* [in] or NULL: x as it is */
    float rms_eps;
    const void *prepared;              /* from prepare or prepare_fused */
    const float *bias;                 /* or NULL */
    cpu_epilogue epilogue;
    float *y;
    int64_t y_stride;
} cpu_linear_call;

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

    /* Optional (NULL in both: the executor runs norm, each matrix and the activation apart). One
     * matrix from n [out_i, in] matrices that read one input, joined as `fuse`; then a call with
     * the normalisation of its input and its epilogue fused in. */
    vh_status (*prepare_fused)(void *ctx, const vh_tensor_view *const *w, int n, cpu_fuse fuse, void **prepared,
                               uint64_t *bytes, char *err, size_t err_size);
    vh_status (*linear_fused)(void *ctx, const cpu_linear_call *call, char *err, size_t err_size);

    /* Optional: the backend's own attention (vhk_attention's contract); returns 0 where it does
     * not take the call (the executor then runs vhk_attention). NULL: always vhk_attention. */
    int (*attention)(void *ctx, const vhk_attention_args *args);
} cpu_linear_ops;

#endif
