/*
 * cpu_generic: the backend that runs anywhere. Its one device is the host CPU; its linear layers
 * are vhk_linear (a direct bf16/f16/f32 GEMM, or converted panels through OpenBLAS sgemm).
 */
#include "backend_error.h"
#include "cpu_executor.h"

/* Its own pthread workers, one per core where hwloc can place them. */
static vh_thread_pool *generic_create_pool(int n_threads)
{
    return vh_thread_pool_create_flags(n_threads, VH_POOL_PIN_CORES);
}

static void *generic_linear_create(vh_thread_pool *pool, const vh_executor_params *params, int64_t max_in, char *err,
                                   size_t err_size)
{
    (void)params;
    vhk_matmul *m = vhk_matmul_create(pool, max_in);
    if (!m) vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cpu_generic: out of memory (matmul scratch)");
    return m;
}

static void generic_linear_destroy(void *ctx)
{
    vhk_matmul_destroy(ctx);
}

/* Weights are used in place, straight from the checkpoint's map. */
static vh_status generic_linear_prepare(void *ctx, const vh_tensor_view *w, void **prepared, uint64_t *bytes,
                                        char *err, size_t err_size)
{
    (void)ctx, (void)w, (void)bytes, (void)err, (void)err_size;
    *prepared = NULL;
    return VH_OK;
}

static void generic_linear_release(void *ctx, void *prepared)
{
    (void)ctx, (void)prepared;
}

static vh_status generic_linear(void *ctx, const float *x, int64_t x_stride, int64_t rows, int64_t in,
                                const vh_tensor_view *w, const void *prepared, const float *bias, float *y,
                                int64_t y_stride, char *err, size_t err_size)
{
    (void)prepared, (void)err, (void)err_size;
    vhk_linear(ctx, x, x_stride, rows, in, w, bias, y, y_stride);
    return VH_OK;
}

static const cpu_linear_ops generic_linear_ops = {
    .backend = "cpu_generic",
    .create_pool = generic_create_pool,
    .create = generic_linear_create,
    .destroy = generic_linear_destroy,
    .prepare = generic_linear_prepare,
    .release = generic_linear_release,
    .linear = generic_linear,
};

static int32_t generic_score(void)
{
    return 10; /* always usable; specialised backends score higher where they apply */
}

static vh_status generic_executor_create(const vh_executor_params *params, vh_executor **out, char *err,
                                         size_t err_size)
{
    return cpu_executor_create(params, &generic_linear_ops, out, err, err_size);
}

static const vh_backend_iface cpu_generic_iface = VH_CPU_BACKEND_IFACE(
    "cpu_generic",
    "portable CPU backend: OpenBLAS GEMMs, C kernels, fp32 compute over bf16/f16/f32 weights",
    generic_score, generic_executor_create, NULL);

VH_PLUGIN_EXPORT const vh_backend_iface *vh_backend_entry(uint32_t core_abi_major, uint32_t core_abi_minor)
{
    (void)core_abi_minor; /* minor versions only append; the core reads what it knows */
    return core_abi_major == VH_BACKEND_ABI_MAJOR ? &cpu_generic_iface : NULL;
}
