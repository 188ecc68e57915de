/*
 * bench_amx: cpu_amx's linear layers against their peers on the Llama-2-7B shapes, in one run:
 *   - cpu_amx as the executor uses it (oneDNN bf16 matmul on weights packed once; the direct
 *     kernel below VH_AMX_MIN_ROWS rows),
 *   - oneDNN's plain matmul (bf16 weights left in their [out, in] layout, no packing),
 *   - oneDNN with the weights in the layout it picks for this row count ("own layout": what packing
 *     per row count would give; "same" where that is the layout cpu_amx packs for 256 rows),
 *   - cpu_generic's vhk_linear (direct bf16 kernel / OpenBLAS),
 * at 1, 8, 64 and 286 rows, with every online core (or --threads N). Prints ms, GFLOP/s, GB/s.
 * Every path runs on the executor's thread team (OpenMP's, pinned), activations converted to bf16
 * on it as cpu_amx does.
 *
 *   bench_amx [--threads N]
 */
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_features.h"
#include "cpu_kernels.h"
#include "onednn_linear.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*bench_fn)(void *ctx);

static double median_ms(bench_fn fn, void *ctx)
{
    double t[15];
    for (int i = 0; i < 3; i++) fn(ctx);
    for (int i = 0; i < 15; i++) {
        double t0 = now_s();
        fn(ctx);
        t[i] = (now_s() - t0) * 1e3;
    }
    qsort(t, 15, sizeof t[0], cmp);
    return t[7];
}

static uint64_t rng = 88172645463325252ull;
static float uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / (1 << 24))) - 0.5f;
}

typedef struct job {
    void *amx;
    vhk_matmul *direct;
    const vh_tensor_view *w;
    void *prepared;
    const float *x;
    float *y;
    int64_t rows, in, out;
    /* plain oneDNN */
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_primitive_t plain, own;
    dnnl_memory_t src, wei, dst, own_wei;
    void *own_data;                    /* the weights in the row count's own layout */
    uint16_t *x_bf16;
    int threads;
    vh_thread_pool *pool;
} job;

static void run_amx(void *p)
{
    job *j = p;
    char err[256];
    amx_linear_run(j->amx, j->x, j->in, j->rows, j->in, j->w, j->prepared, NULL, j->y, j->out, err, sizeof err);
}

static void run_direct(void *p)
{
    job *j = p;
    vhk_linear(j->direct, j->x, j->in, j->rows, j->in, j->w, NULL, j->y, j->out);
}

static void to_bf16(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    job *j = ctx;
    for (int64_t i = begin * j->in; i < end * j->in; i++) j->x_bf16[i] = vh_f32_to_bf16(j->x[i]);
}

static void run_onednn(job *j, dnnl_primitive_t primitive, dnnl_memory_t weights)
{
    vh_parallel_for(j->pool, j->rows, 8, to_bf16, j);
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, j->src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, j->dst}};
    omp_set_num_threads(j->threads);
    dnnl_primitive_execute(primitive, j->stream, 3, args);
    dnnl_stream_wait(j->stream);
}

static void run_plain(void *p)
{
    job *j = p;
    run_onednn(j, j->plain, j->wei);
}

static void run_own(void *p)
{
    job *j = p;
    run_onednn(j, j->own, j->own_wei);
}

/* The matmul descriptor of this job with weights `wei`. */
static int matmul_pd(job *j, int64_t rows, const dnnl_memory_desc_t *wei, dnnl_primitive_desc_t *pd)
{
    dnnl_memory_desc_t src, dst;
    dnnl_dims_t sd = {rows, j->in}, dd = {rows, j->out};
    dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &src, wei, NULL, &dst)) return -1;
    return dnnl_primitive_desc_create(pd, &md, NULL, j->engine, NULL) == dnnl_success ? 0 : -1;
}

/* The weights reordered into the layout oneDNN picks for j->rows rows. Returns 1 when that is the
 * layout it picks for 256 rows (cpu_amx's), 0 when another (then j->own is set), -1 on failure. */
static int make_own(job *j, const uint16_t *w_bf16)
{
    dnnl_memory_desc_t any, ba;
    dnnl_dims_t wd = {j->in, j->out};
    dnnl_memory_desc_init_by_tag(&any, 2, wd, dnnl_bf16, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&ba, 2, wd, dnnl_bf16, dnnl_ba);
    dnnl_primitive_desc_t pd = NULL, ref = NULL, rpd = NULL;
    if (matmul_pd(j, j->rows, &any, &pd) || matmul_pd(j, 256, &any, &ref)) return -1;
    const dnnl_memory_desc_t *own = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    int same = dnnl_memory_desc_equal(own, dnnl_primitive_desc_query_md(ref, dnnl_query_weights_md, 0));
    dnnl_primitive_desc_destroy(ref);
    int bad = 0;
    if (!same) {
        size_t size = dnnl_memory_desc_get_size(own);
        j->own_data = aligned_alloc(64, (size + 63) / 64 * 64);
        dnnl_memory_t from = NULL;
        dnnl_primitive_t reorder = NULL;
        bad |= !j->own_data;
        bad |= !bad && dnnl_memory_create(&from, &ba, j->engine, (void *)w_bf16) != dnnl_success;
        bad |= !bad && dnnl_memory_create(&j->own_wei, own, j->engine, j->own_data) != dnnl_success;
        bad |= !bad && dnnl_reorder_primitive_desc_create(&rpd, &ba, j->engine, own, j->engine, NULL) != dnnl_success;
        bad |= !bad && dnnl_primitive_create(&reorder, rpd) != dnnl_success;
        if (!bad) {
            dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, j->own_wei}};
            bad |= dnnl_primitive_execute(reorder, j->stream, 2, args) != dnnl_success;
            dnnl_stream_wait(j->stream);
        }
        bad |= !bad && dnnl_primitive_create(&j->own, pd) != dnnl_success;
        dnnl_primitive_destroy(reorder);
        dnnl_primitive_desc_destroy(rpd);
        dnnl_memory_destroy(from);
    }
    dnnl_primitive_desc_destroy(pd);
    return bad ? -1 : same;
}

/* oneDNN matmul with the weights as they are in the checkpoint: [out, in] row-major = `ba`. */
static int make_plain(job *j, const uint16_t *w_bf16)
{
    dnnl_memory_desc_t src, wei, dst;
    dnnl_dims_t sd = {j->rows, j->in}, wd = {j->in, j->out}, dd = {j->rows, j->out};
    dnnl_memory_desc_init_by_tag(&src, 2, sd, dnnl_bf16, dnnl_ab);
    dnnl_memory_desc_init_by_tag(&wei, 2, wd, dnnl_bf16, dnnl_ba);
    dnnl_memory_desc_init_by_tag(&dst, 2, dd, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t md;
    dnnl_primitive_desc_t pd;
    if (dnnl_matmul_desc_init(&md, &src, &wei, NULL, &dst) || dnnl_primitive_desc_create(&pd, &md, NULL, j->engine, NULL))
        return -1;
    int bad = dnnl_primitive_create(&j->plain, pd) != dnnl_success;
    dnnl_primitive_desc_destroy(pd);
    bad |= dnnl_memory_create(&j->src, &src, j->engine, j->x_bf16) != dnnl_success;
    bad |= dnnl_memory_create(&j->wei, &wei, j->engine, (void *)w_bf16) != dnnl_success;
    bad |= dnnl_memory_create(&j->dst, &dst, j->engine, j->y) != dnnl_success;
    return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
    cpu_bf16_features f = cpu_bf16_detect();
    const dnnl_version_t *v = dnnl_version();
    printf("bench_amx: %d threads; AMX-bf16 %s, AVX512-bf16 %s; oneDNN %d.%d.%d (%s runtime)\n", threads,
           f.amx_bf16 ? "yes" : "no", f.avx512_bf16 ? "yes" : "no", v->major, v->minor, v->patch,
           v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other");
    vh_thread_pool *pool = amx_create_pool(threads); /* as the executor: OpenMP's team, pinned */
    vh_executor_params params = {.max_rows = 512, .n_threads = threads};
    char err[256];
    void *amx = amx_linear_create(pool, &params, 11008, err, sizeof err);
    if (!amx) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    static const int64_t shapes[3][2] = {{4096, 4096}, {4096, 11008}, {11008, 4096}};
    static const int64_t row_counts[4] = {1, 8, 64, 286};
    printf("%-13s %5s | %10s %9s | %10s %9s | %10s %9s | %10s %9s\n", "in->out", "rows", "cpu_amx ms", "GFLOP/s",
           "plain ms", "GFLOP/s", "own lay ms", "GFLOP/s", "direct ms", "GFLOP/s");
    for (int s = 0; s < 3; s++) {
        const int64_t in = shapes[s][0], out = shapes[s][1];
        uint16_t *wdata = malloc(sizeof(uint16_t) * in * out);
        for (int64_t i = 0; i < in * out; i++) wdata[i] = vh_f32_to_bf16(uniform() * 0.05f);
        vh_tensor_view w = {.data = wdata, .dtype = VH_DTYPE_BF16, .ndim = 2, .shape = {out, in}, .name = "w"};
        uint64_t bytes = 0;
        void *prepared = NULL;
        if (amx_linear_prepare(amx, &w, &prepared, &bytes, err, sizeof err) != VH_OK) {
            fprintf(stderr, "%s\n", err);
            return 1;
        }
        for (int r = 0; r < 4; r++) {
            const int64_t rows = row_counts[r];
            job j = {.amx = amx, .w = &w, .prepared = prepared, .rows = rows, .in = in, .out = out, .threads = threads,
                     .pool = pool};
            float *x = malloc(sizeof(float) * rows * in);
            for (int64_t i = 0; i < rows * in; i++) x[i] = uniform();
            j.x = x;
            j.y = malloc(sizeof(float) * rows * out);
            j.x_bf16 = malloc(sizeof(uint16_t) * rows * in);
            j.direct = vhk_matmul_create(pool, in);
            dnnl_engine_create(&j.engine, dnnl_cpu, 0);
            dnnl_stream_create(&j.stream, j.engine, dnnl_stream_default_flags);
            int have_plain = make_plain(&j, wdata) == 0;
            double flop = 2.0 * rows * in * out;
            double t_amx = median_ms(run_amx, &j);
            double t_plain = have_plain ? median_ms(run_plain, &j) : 0;
            int own = make_own(&j, wdata);
            double t_own = own == 0 ? median_ms(run_own, &j) : 0;
            double t_direct = median_ms(run_direct, &j);
            char own_ms[16] = "      same", own_gflops[16] = "";
            if (own != 1) {
                snprintf(own_ms, sizeof own_ms, "%10.3f", t_own);
                snprintf(own_gflops, sizeof own_gflops, "%9.1f", own == 0 ? flop / t_own / 1e6 : 0);
            }
            printf("%5lld->%-6lld %5lld | %10.3f %9.1f | %10.3f %9.1f | %10s %9s | %10.3f %9.1f\n", (long long)in,
                   (long long)out, (long long)rows, t_amx, flop / t_amx / 1e6, t_plain,
                   have_plain ? flop / t_plain / 1e6 : 0, own_ms, own_gflops, t_direct, flop / t_direct / 1e6);
            dnnl_primitive_destroy(j.own);
            dnnl_memory_destroy(j.own_wei);
            free(j.own_data);
            dnnl_primitive_destroy(j.plain);
            dnnl_memory_destroy(j.src);
            dnnl_memory_destroy(j.wei);
            dnnl_memory_destroy(j.dst);
            dnnl_stream_destroy(j.stream);
            dnnl_engine_destroy(j.engine);
            vhk_matmul_destroy(j.direct);
            free(x);
            free(j.y);
            free(j.x_bf16);
        }
        amx_linear_release(amx, prepared);
        free(wdata);
    }
    printf("(weight GB/s at 1 row: %.1f GB per 4096x11008 product)\n", 4096.0 * 11008 * 2 / 1e9);
    amx_linear_destroy(amx);
    vh_thread_pool_destroy(pool);
    return 0;
}
