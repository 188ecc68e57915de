/*
 * cpu_amx's linear layers: oneDNN bf16 matmul (AMX or AVX-512 bf16 brgemm), fp32 accumulation and
 * output, with each weight matrix reordered once, at load, into the blocked layout oneDNN prefers,
 * and one primitive per shape created on first use and cached. Activations are rounded to bf16 on
 * the way in (the precision AMX computes in). Few-row products (decode steps) skip oneDNN: AMX
 * tiles are wasted on a row or two, and the portable direct bf16 kernel (AVX-512) streams the
 * mapped weights at memory speed; the crossover is VH_AMX_MIN_ROWS (default 16), to be measured.
 *
 * Threads: the executor's pool is the calling thread's OpenMP team (thread_pool_openmp.h), and
 * oneDNN (OpenMP runtime) runs on that same team: before oneDNN creates or runs a primitive,
 * omp_set_num_threads sets the calling thread's team size to the pool's (that thread's ICV only,
 * nothing process-wide), so the kernels and the GEMMs reuse the same threads and no second team
 * spins beside them.
 */
#include "onednn_linear.h"

#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_error.h"
#include "backend_knobs.h"
#include "cpu_kernels.h"
#include "thread_pool_openmp.h"

#define MAX_PRIMITIVES 256
#define REFERENCE_ROWS 256 /* the row count whose preferred weight layout is chosen at load */

typedef struct amx_weight {
    dnnl_memory_desc_t md;             /* the packed layout */
    void *data;                        /* bf16, 64-byte aligned */
} amx_weight;

typedef struct amx_primitive {
    int64_t rows, in, out, y_stride;
    int has_bias;
    dnnl_memory_desc_t weight_md;
    dnnl_primitive_t primitive;
    dnnl_memory_t src, weights, bias, dst; /* handles re-pointed at each call */
} amx_primitive;

struct amx_linear {
    vh_thread_pool *pool;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int n_threads;                     /* the pool's size: oneDNN's team is the pool's team */
    int64_t min_rows;
    vhk_matmul *direct;                /* few rows: the portable direct bf16 kernel */
    uint16_t *src_bf16;                /* [max rows, max in] activations rounded to bf16 */
    size_t src_capacity;               /* elements */
    amx_primitive primitives[MAX_PRIMITIVES];
    int n_primitives;
};

static const char *dnnl_error(dnnl_status_t s)
{
    switch (s) {
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "no implementation";
    case dnnl_runtime_error: return "runtime error";
    default: return "error";
    }
}

vh_thread_pool *amx_create_pool(int n_threads)
{
    return vh_thread_pool_create_openmp(n_threads, VH_POOL_PIN_CORES);
}

void *amx_linear_create(vh_thread_pool *pool, const vh_executor_params *params, int64_t max_in, char *err,
                        size_t err_size)
{
    amx_linear *a = calloc(1, sizeof *a);
    if (!a) {
        vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cpu_amx: out of memory");
        return NULL;
    }
    a->pool = pool;
    a->n_threads = vh_thread_pool_size(pool);
    const char *min_rows = vh_knob_value(VH_KNOB_AMX_MIN_ROWS);
    a->min_rows = min_rows && atoi(min_rows) > 0 ? atoi(min_rows) : 16;
    dnnl_status_t s = dnnl_engine_create(&a->engine, dnnl_cpu, 0);
    if (s == dnnl_success) s = dnnl_stream_create(&a->stream, a->engine, dnnl_stream_default_flags);
    if (s != dnnl_success) {
        vh_backend_fail(err, err_size, VH_ERR_BACKEND_FAILED, "cpu_amx: oneDNN engine: %s", dnnl_error(s));
        amx_linear_destroy(a);
        return NULL;
    }
    a->direct = vhk_matmul_create(pool, max_in);
    a->src_capacity = (size_t)(params->max_rows > REFERENCE_ROWS ? params->max_rows : REFERENCE_ROWS) * (size_t)max_in;
    a->src_bf16 = aligned_alloc(64, ((a->src_capacity * 2 + 63) / 64) * 64);
    if (!a->direct || !a->src_bf16) {
        vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cpu_amx: out of memory (scratch)");
        amx_linear_destroy(a);
        return NULL;
    }
    return a;
}

void amx_linear_destroy(void *ctx)
{
    amx_linear *a = ctx;
    if (!a) return;
    for (int i = 0; i < a->n_primitives; i++) {
        amx_primitive *p = &a->primitives[i];
        dnnl_primitive_destroy(p->primitive);
        dnnl_memory_destroy(p->src);
        dnnl_memory_destroy(p->weights);
        dnnl_memory_destroy(p->bias);
        dnnl_memory_destroy(p->dst);
    }
    if (a->stream) dnnl_stream_destroy(a->stream);
    if (a->engine) dnnl_engine_destroy(a->engine);
    vhk_matmul_destroy(a->direct);
    free(a->src_bf16);
    free(a);
}

/* The memory descriptors of y[rows, out] = x[rows, in] . W^T (+ bias): oneDNN's matmul is
 * src [M, K] x weights [K, N]; our W [N, K] row-major is that K x N matrix in layout `ba`. */
static void describe(int64_t rows, int64_t in, int64_t out, int64_t y_stride, dnnl_memory_desc_t *src,
                     dnnl_memory_desc_t *bias, dnnl_memory_desc_t *dst)
{
    dnnl_dims_t src_dims = {rows, in}, bias_dims = {1, out}, dst_dims = {rows, out}, dst_strides = {y_stride, 1};
    dnnl_memory_desc_init_by_tag(src, 2, src_dims, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(bias, 2, bias_dims, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_strides(dst, 2, dst_dims, dnnl_f32, dst_strides);
}

static dnnl_status_t make_primitive_desc(amx_linear *a, int64_t rows, int64_t in, int64_t out, int64_t y_stride,
                                         int has_bias, const dnnl_memory_desc_t *weight_md, dnnl_primitive_desc_t *pd)
{
    dnnl_memory_desc_t src, bias, dst;
    describe(rows, in, out, y_stride, &src, &bias, &dst);
    dnnl_matmul_desc_t desc;
    dnnl_status_t s = dnnl_matmul_desc_init(&desc, &src, weight_md, has_bias ? &bias : NULL, &dst);
    return s == dnnl_success ? dnnl_primitive_desc_create(pd, &desc, NULL, a->engine, NULL) : s;
}

/* The weight in bf16, `ba` layout, as the reorder's source: the mapped data itself when it is
 * bf16 already, else a converted copy (*owned). */
static const void *bf16_source(const vh_tensor_view *w, void **owned)
{
    *owned = NULL;
    if (w->dtype == VH_DTYPE_BF16) return w->data;
    const int64_t n = w->shape[0] * w->shape[1];
    uint16_t *copy = malloc((size_t)n * 2);
    if (!copy) return NULL;
    for (int64_t i = 0; i < n; i++) {
        float f = w->dtype == VH_DTYPE_F32 ? ((const float *)w->data)[i] : vh_f16_to_f32(((const uint16_t *)w->data)[i]);
        copy[i] = vh_f32_to_bf16(f);
    }
    *owned = copy;
    return copy;
}

vh_status amx_linear_prepare(void *ctx, const vh_tensor_view *w, void **prepared, uint64_t *bytes, char *err,
                             size_t err_size)
{
    amx_linear *a = ctx;
    *prepared = NULL;
    omp_set_num_threads(a->n_threads); /* oneDNN sizes primitives by it: this thread's ICV only */
    const int64_t out = w->shape[0], in = w->shape[1];
    dnnl_memory_desc_t any, user;
    dnnl_dims_t dims = {in, out};
    dnnl_memory_desc_init_by_tag(&any, 2, dims, dnnl_bf16, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&user, 2, dims, dnnl_bf16, dnnl_ba);
    dnnl_primitive_desc_t pd = NULL;
    if (make_primitive_desc(a, REFERENCE_ROWS, in, out, out, 0, &any, &pd) != dnnl_success)
        return VH_OK; /* oneDNN has no bf16 matmul here: this weight takes the direct kernel */
    amx_weight *pw = calloc(1, sizeof *pw);
    if (!pw) {
        dnnl_primitive_desc_destroy(pd);
        return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cpu_amx: out of memory");
    }
    pw->md = *dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_primitive_desc_destroy(pd);
    const size_t size = dnnl_memory_desc_get_size(&pw->md);
    pw->data = aligned_alloc(64, ((size + 63) / 64) * 64);
    void *owned = NULL;
    const void *src = pw->data ? bf16_source(w, &owned) : NULL;
    if (!pw->data || !src) {
        free(pw->data);
        free(pw);
        return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cpu_amx: out of memory packing %s", w->name);
    }
    dnnl_memory_t from = NULL, to = NULL;
    dnnl_primitive_desc_t rpd = NULL;
    dnnl_primitive_t reorder = NULL;
    dnnl_status_t s = dnnl_memory_create(&from, &user, a->engine, (void *)src);
    if (s == dnnl_success) s = dnnl_memory_create(&to, &pw->md, a->engine, pw->data);
    if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(&rpd, &user, a->engine, &pw->md, a->engine, NULL);
    if (s == dnnl_success) s = dnnl_primitive_create(&reorder, rpd);
    if (s == dnnl_success) {
        dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        s = dnnl_primitive_execute(reorder, a->stream, 2, args);
        if (s == dnnl_success) s = dnnl_stream_wait(a->stream);
    }
    dnnl_primitive_destroy(reorder);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(from);
    dnnl_memory_destroy(to);
    free(owned);
    if (s != dnnl_success) {
        free(pw->data);
        free(pw);
        return vh_backend_fail(err, err_size, VH_ERR_BACKEND_FAILED, "cpu_amx: packing %s: %s", w->name, dnnl_error(s));
    }
    *bytes += size;
    *prepared = pw;
    return VH_OK;
}

/* The reorders ran on the creating thread's OpenMP team, which runs (on the session's thread) do
 * not use: let it go (thread_pool_openmp.h says why it matters). */
void amx_linear_finish_load(void *ctx)
{
    (void)ctx;
    vh_openmp_release_team();
}

void amx_linear_release(void *ctx, void *prepared)
{
    (void)ctx;
    amx_weight *pw = prepared;
    if (!pw) return;
    free(pw->data);
    free(pw);
}

static amx_primitive *find_primitive(amx_linear *a, int64_t rows, int64_t in, int64_t out, int64_t y_stride,
                                     int has_bias, const amx_weight *w, char *err, size_t err_size)
{
    for (int i = 0; i < a->n_primitives; i++) {
        amx_primitive *p = &a->primitives[i];
        if (p->rows == rows && p->in == in && p->out == out && p->y_stride == y_stride && p->has_bias == has_bias &&
            dnnl_memory_desc_equal(&p->weight_md, &w->md))
            return p;
    }
    if (a->n_primitives == MAX_PRIMITIVES) { /* many shapes: recycle the oldest slot */
        amx_primitive *p = &a->primitives[0];
        dnnl_primitive_destroy(p->primitive);
        dnnl_memory_destroy(p->src);
        dnnl_memory_destroy(p->weights);
        dnnl_memory_destroy(p->bias);
        dnnl_memory_destroy(p->dst);
        memmove(&a->primitives[0], &a->primitives[1], sizeof a->primitives[0] * (MAX_PRIMITIVES - 1));
        a->n_primitives--;
    }
    amx_primitive *p = &a->primitives[a->n_primitives];
    memset(p, 0, sizeof *p);
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = make_primitive_desc(a, rows, in, out, y_stride, has_bias, &w->md, &pd);
    dnnl_memory_desc_t src, bias, dst;
    describe(rows, in, out, y_stride, &src, &bias, &dst);
    if (s == dnnl_success) s = dnnl_primitive_create(&p->primitive, pd);
    if (s == dnnl_success) s = dnnl_memory_create(&p->src, &src, a->engine, DNNL_MEMORY_NONE);
    if (s == dnnl_success) s = dnnl_memory_create(&p->weights, &w->md, a->engine, DNNL_MEMORY_NONE);
    if (s == dnnl_success) s = dnnl_memory_create(&p->bias, &bias, a->engine, DNNL_MEMORY_NONE);
    if (s == dnnl_success) s = dnnl_memory_create(&p->dst, &dst, a->engine, DNNL_MEMORY_NONE);
    if (pd) dnnl_primitive_desc_destroy(pd);
    if (s != dnnl_success) {
        dnnl_primitive_destroy(p->primitive);
        dnnl_memory_destroy(p->src);
        dnnl_memory_destroy(p->weights);
        dnnl_memory_destroy(p->bias);
        dnnl_memory_destroy(p->dst);
        vh_backend_fail(err, err_size, VH_ERR_BACKEND_FAILED, "cpu_amx: matmul %lldx%lldx%lld: %s", (long long)rows,
                        (long long)in, (long long)out, dnnl_error(s));
        return NULL;
    }
    p->rows = rows;
    p->in = in;
    p->out = out;
    p->y_stride = y_stride;
    p->has_bias = has_bias;
    p->weight_md = w->md;
    a->n_primitives++;
    return p;
}

typedef struct to_bf16_job {
    const float *x;
    int64_t x_stride, in;
    uint16_t *out;
} to_bf16_job;

static void rows_to_bf16(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const to_bf16_job *j = ctx;
    for (int64_t r = begin; r < end; r++) {
        const float *xr = j->x + r * j->x_stride;
        uint16_t *dr = j->out + r * j->in;
        for (int64_t i = 0; i < j->in; i++) dr[i] = vh_f32_to_bf16(xr[i]);
    }
}

vh_status amx_linear_run(void *ctx, const float *x, int64_t x_stride, int64_t rows, int64_t in, const vh_tensor_view *w,
                     const void *prepared, const float *bias, float *y, int64_t y_stride, char *err, size_t err_size)
{
    amx_linear *a = ctx;
    const amx_weight *pw = prepared;
    if (!pw || rows < a->min_rows || (size_t)(rows * in) > a->src_capacity) {
        vhk_linear(a->direct, x, x_stride, rows, in, w, bias, y, y_stride);
        return VH_OK;
    }
    omp_set_num_threads(a->n_threads); /* oneDNN sizes primitives by it: this thread's ICV only */
    amx_primitive *p = find_primitive(a, rows, in, w->shape[0], y_stride, bias != NULL, pw, err, err_size);
    if (!p) return VH_ERR_BACKEND_FAILED;
    to_bf16_job job = {x, x_stride, in, a->src_bf16}; /* activations in the precision the tiles use */
    vh_parallel_for(a->pool, rows, 8, rows_to_bf16, &job);
    dnnl_memory_set_data_handle(p->src, a->src_bf16);
    dnnl_memory_set_data_handle(p->weights, pw->data);
    dnnl_memory_set_data_handle(p->dst, y);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->src}, {DNNL_ARG_WEIGHTS, p->weights}, {DNNL_ARG_DST, p->dst}};
    int n_args = 3;
    if (bias) {
        dnnl_memory_set_data_handle(p->bias, (void *)bias);
        args[n_args++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, p->bias};
    }
    dnnl_status_t s = dnnl_primitive_execute(p->primitive, a->stream, n_args, args);
    if (s == dnnl_success) s = dnnl_stream_wait(a->stream);
    if (s != dnnl_success)
        return vh_backend_fail(err, err_size, VH_ERR_BACKEND_FAILED, "cpu_amx: matmul %lldx%lldx%lld: %s",
                               (long long)rows, (long long)in, (long long)w->shape[0], dnnl_error(s));
    return VH_OK;
}
