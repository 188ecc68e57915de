/*
 * bench_bf16_gemm: cpu_amx's own bf16 GEMM (bf16_gemm.h) on the Llama-2-7B shapes, with every
 * online core (or --threads N), on the executor's thread team (OpenMP's, pinned: amx_create_pool):
 *
 *  (a) DRAM read bandwidth, honestly: a buffer of max(4 x the L3, 1.5 GiB) (the L3: all distinct
 *      level-3 caches in sysfs; 1 GiB where unknown), first touched by the threads that read it,
 *      read by all of them (AVX-512 loads, or 64-bit sums without AVX-512), median of 5 passes;
 *  (b) the GEMM at 1, 2, 4, 8, 16, 32, 64, 276, 286 and 1124 rows (or --rows a,b,...) for
 *      q|k|v 4096->12288 (STACK, RMSNorm prologue, STORE), gate|up 4096->2x11008 (GATED, RMSNorm,
 *      SILU_MUL), o 4096->4096 (ADD) and down 11008->4096 (ADD), with the AVX-512 kernel and AMX
 *      where the CPU has it: ms (median of >= 5 runs after a warm-up), TFLOP/s, and for rows <= 8
 *      the packed weight's GB/s and its share of (a). Runs of rows <= 8 start with cold caches
 *      (a read of 2 x the L3 before each), as in a decode step that streams the whole model;
 *      "act ms" is bf16_activations_load (the fp32 -> bf16 conversion, with RMSNorm for the two
 *      normalised inputs), not included in the GEMM's ms;
 *  (c) one LLM block's four GEMMs at 276 rows (q|k|v + gate|up + o + down) against oneDNN on the
 *      same shapes and FLOPs (amx_linear_run: oneDNN's bf16 matmul on weights reordered once;
 *      its time includes its own fp32 -> bf16 conversion of x, so ours includes the activations'
 *      load too; oneDNN's has no RMSNorm, SiLU gate or residual add, which the executor would add);
 * then a short summary.
 *
 *   bench_bf16_gemm [--threads N] [--rows 1,8,276]
 *
 * Weights are random (seeded), bf16, packed with bf16_pack.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bf16_gemm.h"
#include "cpu_features.h"
#include "onednn_linear.h"
#include "bench_clock.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MAX_ROWS_LIST 32

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof t[0], vh_bench_cmp_double);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rng_u64(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return rng_state;
}

/* uniform in [-scale, scale) */
static float rng_float(float scale)
{
    return (float)((double)(rng_u64() >> 40) / 16777216.0 * 2.0 - 1.0) * scale;
}

/* ---- the L3 -------------------------------------------------------------------------------- */

static uint64_t parse_size(const char *s)
{
    char *end;
    uint64_t v = strtoull(s, &end, 10);
    if (*end == 'K') v <<= 10;
    else if (*end == 'M') v <<= 20;
    else if (*end == 'G') v <<= 30;
    return v;
}

static int read_line(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int ok = fgets(buf, (int)size, f) != NULL;
    fclose(f);
    if (ok) buf[strcspn(buf, "\n")] = 0;
    return ok;
}

/* Total bytes of the distinct level-3 caches (cpu0's alone is one CCD on AMD, one socket on
 * Intel); 0 when sysfs says nothing. *one gets cpu0's. */
static uint64_t l3_total_bytes(uint64_t *one)
{
    char seen[256][128];
    int n_seen = 0;
    uint64_t total = 0;
    *one = 0;
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    for (long cpu = 0; cpu < cpus; cpu++) {
        for (int idx = 0; idx < 8; idx++) {
            char path[160], level[16], size[32], shared[128];
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/cache/index%d/level", cpu, idx);
            if (!read_line(path, level, sizeof level)) break;
            if (strcmp(level, "3")) continue;
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/cache/index%d/size", cpu, idx);
            if (!read_line(path, size, sizeof size)) continue;
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%ld/cache/index%d/shared_cpu_list", cpu, idx);
            if (!read_line(path, shared, sizeof shared)) snprintf(shared, sizeof shared, "cpu%ld", cpu);
            int dup = 0;
            for (int i = 0; i < n_seen; i++) dup |= !strcmp(seen[i], shared);
            if (dup) continue;
            if (n_seen < 256) snprintf(seen[n_seen++], sizeof seen[0], "%s", shared);
            uint64_t bytes = parse_size(size);
            if (cpu == 0) *one = bytes;
            total += bytes;
        }
    }
    return total;
}

/* ---- reading memory ---------------------------------------------------------------------------- */

#define READ_CHUNK (1 << 21) /* 2 MB: the unit the threads split */

typedef struct read_job {
    uint8_t *buf;
    size_t bytes;
    int avx512;
    uint64_t sink[256 * 8];  /* per thread, 64 bytes apart */
} read_job;

__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint8_t *p, size_t bytes)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i + 512 <= bytes; i += 512) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512((const void *)(p + i + 64)));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512((const void *)(p + i + 128)));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512((const void *)(p + i + 192)));
        a4 = _mm512_add_epi64(a4, _mm512_load_si512((const void *)(p + i + 256)));
        a5 = _mm512_add_epi64(a5, _mm512_load_si512((const void *)(p + i + 320)));
        a6 = _mm512_add_epi64(a6, _mm512_load_si512((const void *)(p + i + 384)));
        a7 = _mm512_add_epi64(a7, _mm512_load_si512((const void *)(p + i + 448)));
    }
    a0 = _mm512_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)),
                          _mm512_add_epi64(_mm512_add_epi64(a4, a5), _mm512_add_epi64(a6, a7)));
    return (uint64_t)_mm512_reduce_add_epi64(a0);
}

static uint64_t read_scalar(const uint8_t *p, size_t bytes)
{
    const uint64_t *q = (const uint64_t *)p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= bytes / 8; i += 4) s0 += q[i], s1 += q[i + 1], s2 += q[i + 2], s3 += q[i + 3];
    return s0 + s1 + s2 + s3;
}

static void read_chunks(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    read_job *j = ctx;
    size_t from = (size_t)begin * READ_CHUNK, to = (size_t)end * READ_CHUNK;
    if (to > j->bytes) to = j->bytes;
    uint64_t s = j->avx512 ? read_avx512(j->buf + from, to - from) : read_scalar(j->buf + from, to - from);
    j->sink[(thread_index % 256) * 8] += s;
}

static void touch_chunks(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    read_job *j = ctx;
    size_t from = (size_t)begin * READ_CHUNK, to = (size_t)end * READ_CHUNK;
    if (to > j->bytes) to = j->bytes;
    for (size_t i = from; i < to; i += 8) {
        uint64_t v = i * 0x9E3779B97F4A7C15ull;
        memcpy(j->buf + i, &v, 8);
    }
}

static read_job *read_buffer_create(vh_thread_pool *pool, size_t bytes, int avx512)
{
    read_job *j = calloc(1, sizeof *j);
    bytes = (bytes + READ_CHUNK - 1) / READ_CHUNK * READ_CHUNK;
    j->buf = aligned_alloc(READ_CHUNK, bytes);
    if (!j->buf) {
        fprintf(stderr, "bench_bf16_gemm: cannot allocate %.2f GiB\n", bytes / GIB);
        exit(1);
    }
    j->bytes = bytes;
    j->avx512 = avx512;
    /* first touch by the threads that read it (the same split), so its pages are theirs */
    vh_parallel_for(pool, (int64_t)(bytes / READ_CHUNK), 1, touch_chunks, j);
    return j;
}

static void read_buffer_pass(vh_thread_pool *pool, read_job *j)
{
    vh_parallel_for(pool, (int64_t)(j->bytes / READ_CHUNK), 1, read_chunks, j);
}

static void read_buffer_free(read_job *j)
{
    if (!j) return;
    free(j->buf);
    free(j);
}

/* Median GB/s of 5 passes over a fresh buffer of `bytes` (after one warm-up pass). */
static double dram_read_gbs(vh_thread_pool *pool, size_t bytes, int avx512, const char *what)
{
    read_job *j = read_buffer_create(pool, bytes, avx512);
    double t[5];
    read_buffer_pass(pool, j);
    for (int i = 0; i < 5; i++) {
        double t0 = now_s();
        read_buffer_pass(pool, j);
        t[i] = now_s() - t0;
    }
    double gbs = (double)j->bytes / median(t, 5) / 1e9;
    printf("\n%s: %.2f GiB buffer, %s loads, %d threads: %.1f GB/s (median of 5; fastest %.1f)\n", what,
           j->bytes / GIB, avx512 ? "AVX-512" : "64-bit", vh_thread_pool_size(pool), gbs,
           (double)j->bytes / t[0] / 1e9);
    read_buffer_free(j);
    return gbs;
}

/* ---- the GEMMs ---------------------------------------------------------------------------------- */

enum { QKV, GATE_UP, O, DOWN, N_SHAPES };
static const char *shape_names[N_SHAPES] = {"qkv 4096->12288", "gate|up 4096->2x11008", "o 4096->4096",
                                            "down 11008->4096"};
static const int64_t shape_k[N_SHAPES] = {4096, 4096, 4096, 11008};
static const int64_t shape_n[N_SHAPES] = {12288, 22016, 4096, 4096};  /* packed (and oneDNN's) outputs */

typedef struct layer {
    uint16_t *w;                       /* [n, k] bf16 */
    vh_tensor_view whole;              /* for oneDNN */
    vh_tensor_view parts[3];
    int n_parts;
    bf16_pack_layout layout;
    bf16_epilogue epilogue;
    int rms;
    bf16_packed packed;
    double pack_s;
    void *onednn;                      /* prepared */
} layer;

typedef struct run_ctx {
    vh_thread_pool *pool;
    bf16_gemm_scratch *scratch;
    bf16_activations *act;
    const float *x, *rms_weight;
    int64_t rows, k;
    bf16_gemm_args args;
    bf16_kernel kernel;
    void *amx;                         /* oneDNN */
    const layer *l;
    float *y;
    int64_t y_cols;
    read_job *flush;                   /* read before each run (cold caches), or NULL */
} run_ctx;

static void run_gemm(run_ctx *c)
{
    bf16_gemm(c->pool, c->scratch, &c->args, c->kernel);
}

static void run_load(run_ctx *c)
{
    bf16_activations_load(c->pool, c->act, c->x, c->k, c->rows, c->k, c->rms_weight, 1e-5f);
}

static void run_load_gemm(run_ctx *c)
{
    run_load(c);
    run_gemm(c);
}

static void run_onednn(run_ctx *c)
{
    char err[256];
    if (amx_linear_run(c->amx, c->x, c->k, c->rows, c->k, &c->l->whole, c->l->onednn, NULL, c->y, c->y_cols, err,
                       sizeof err) != VH_OK) {
        fprintf(stderr, "oneDNN: %s\n", err);
        exit(1);
    }
}

/* Median ms of >= 5 runs after a warm-up (up to 15 runs while they are quick). */
static double time_ms(void (*fn)(run_ctx *), run_ctx *c)
{
    double t[15];
    int n = 0;
    double spent = 0;
    if (c->flush) read_buffer_pass(c->pool, c->flush);
    fn(c);
    while (n < 15 && (n < 5 || spent < 0.3)) {
        if (c->flush) read_buffer_pass(c->pool, c->flush);
        double t0 = now_s();
        fn(c);
        t[n] = now_s() - t0;
        spent += t[n++];
    }
    return median(t, n) * 1e3;
}

static const char *kernel_name(bf16_kernel k)
{
    return k == BF16_KERNEL_AMX ? "amx" : k == BF16_KERNEL_AVX512 ? "avx512" : "auto";
}

int main(int argc, char **argv)
{
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int64_t rows_list[MAX_ROWS_LIST] = {1, 2, 4, 8, 16, 32, 64, 276, 286, 1124};
    int n_rows = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--rows") && i + 1 < argc) {
            n_rows = 0;
            for (char *s = argv[++i]; *s && n_rows < MAX_ROWS_LIST;) {
                rows_list[n_rows++] = strtoll(s, &s, 10);
                if (*s == ',') s++;
                else if (*s) break;
            }
        } else {
            fprintf(stderr, "usage: %s [--threads N] [--rows 1,8,276]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1) threads = 1;
    for (int i = 0; i < n_rows; i++)
        if (rows_list[i] < 1 || rows_list[i] > 4096) {
            fprintf(stderr, "rows must be 1..4096\n");
            return 2;
        }
    if (!bf16_gemm_has_avx512_bf16()) {
        printf("bench_bf16_gemm: this CPU has no AVX-512 bf16: nothing to measure\n");
        return 0;
    }
    cpu_bf16_features f = cpu_bf16_detect();
    int has_amx = bf16_gemm_has_amx();
    vh_thread_pool *pool = amx_create_pool(threads);
    if (!pool) {
        fprintf(stderr, "no pool\n");
        return 1;
    }
    threads = vh_thread_pool_size(pool);
    uint64_t l3_one = 0, l3 = l3_total_bytes(&l3_one);
    int l3_known = l3 > 0;
    if (!l3_known) l3 = 1ull << 30;
    printf("bench_bf16_gemm: %d threads; AVX-512 bf16 yes, AMX %s; L3 %s%.1f MB (%.1f MB at cpu0); AMX from %lld rows"
           " (VH_AMX_MIN_ROWS)\n",
           threads, has_amx ? "yes" : "no", l3_known ? "" : "unknown, assumed ", l3 / 1e6, l3_one / 1e6,
           (long long)bf16_gemm_amx_min_rows());

    /* (a) DRAM read bandwidth */
    size_t bw_bytes = (size_t)(4 * l3);
    if (bw_bytes < (size_t)(1.5 * GIB)) bw_bytes = (size_t)(1.5 * GIB);
    double bw = dram_read_gbs(pool, bw_bytes, f.avx512, "(a) DRAM read");
    /* the cold-cache flush: 2 x the L3 (at least 64 MB) */
    size_t flush_bytes = (size_t)(2 * l3);
    if (flush_bytes < (64u << 20)) flush_bytes = 64u << 20;
    read_job *flush = read_buffer_create(pool, flush_bytes, f.avx512);

    /* weights */
    layer layers[N_SHAPES];
    memset(layers, 0, sizeof layers);
    printf("\npacking (bf16 sources, %d threads):\n", threads);
    for (int s = 0; s < N_SHAPES; s++) {
        layer *l = &layers[s];
        const int64_t n = shape_n[s], k = shape_k[s];
        l->w = malloc(sizeof(uint16_t) * (size_t)(n * k));
        if (!l->w) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        for (int64_t i = 0; i < n * k; i++) l->w[i] = vh_f32_to_bf16(rng_float(0.05f));
        vh_tensor_view whole = {l->w, VH_DTYPE_BF16, 2, {n, k, 0, 0}, shape_names[s], 0};
        l->whole = whole;
        l->layout = BF16_PACK_STACK;
        l->epilogue = s == QKV ? BF16_EPI_STORE : s == GATE_UP ? BF16_EPI_SILU_MUL : BF16_EPI_ADD;
        l->rms = s == QKV || s == GATE_UP;
        if (s == QKV || s == GATE_UP) {
            int parts = s == QKV ? 3 : 2;
            for (int p = 0; p < parts; p++) {
                vh_tensor_view v = {l->w + (size_t)(p * (n / parts) * k), VH_DTYPE_BF16, 2, {n / parts, k, 0, 0},
                                    shape_names[s], 0};
                l->parts[p] = v;
            }
            l->n_parts = parts;
            if (s == GATE_UP) l->layout = BF16_PACK_GATED;
        } else {
            l->parts[0] = whole;
            l->n_parts = 1;
        }
        const vh_tensor_view *views[3] = {&l->parts[0], &l->parts[1], &l->parts[2]};
        char err[256];
        double t0 = now_s();
        if (bf16_pack(pool, views, l->n_parts, l->layout, &l->packed, err, sizeof err) != VH_OK) {
            fprintf(stderr, "bf16_pack: %s\n", err);
            return 1;
        }
        l->pack_s = now_s() - t0;
        printf("  %-22s %7.1f MB packed in %6.3f s (%.2f GB/s written)\n", shape_names[s],
               bf16_packed_bytes(&l->packed) / 1e6, l->pack_s, bf16_packed_bytes(&l->packed) / l->pack_s / 1e9);
    }

    bf16_gemm_scratch *scratch = bf16_gemm_scratch_create(threads);
    bf16_activations act;
    memset(&act, 0, sizeof act);
    int64_t max_rows = 1;
    for (int i = 0; i < n_rows; i++)
        if (rows_list[i] > max_rows) max_rows = rows_list[i];
    if (max_rows < 276) max_rows = 276;
    float *x = malloc(sizeof(float) * (size_t)(max_rows * 11008));
    float *y = malloc(sizeof(float) * (size_t)(max_rows * 22016));
    float *rms_weight = malloc(sizeof(float) * 4096);
    if (!scratch || !x || !y || !rms_weight) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int64_t i = 0; i < max_rows * 11008; i++) x[i] = rng_float(1.0f);
    for (int64_t i = 0; i < max_rows * 22016; i++) y[i] = 0;
    for (int i = 0; i < 4096; i++) rms_weight[i] = 0.5f + 0.5f * rng_float(1.0f);

    bf16_kernel kernels[2] = {BF16_KERNEL_AVX512, BF16_KERNEL_AMX};
    int n_kernels = has_amx ? 2 : 1;
    /* best ms per shape and row count (summary) */
    double best_ms[N_SHAPES][MAX_ROWS_LIST];

    printf("\n(b) GEMM, %d threads (ms: median; rows <= 8 with cold caches; act: bf16_activations_load)\n", threads);
    printf("%-22s %5s %-7s %10s %8s %9s %7s %8s\n", "shape", "rows", "kernel", "ms", "TFLOP/s", "wt GB/s", "% DRAM",
           "act ms");
    for (int s = 0; s < N_SHAPES; s++) {
        layer *l = &layers[s];
        for (int ri = 0; ri < n_rows; ri++) {
            const int64_t rows = rows_list[ri], k = shape_k[s];
            run_ctx c = {.pool = pool, .scratch = scratch, .act = &act, .x = x, .rms_weight = l->rms ? rms_weight : NULL,
                         .rows = rows, .k = k, .l = l, .y = y};
            c.y_cols = l->epilogue == BF16_EPI_SILU_MUL ? shape_n[s] / 2 : shape_n[s];
            bf16_gemm_args args = {&act, &l->packed, NULL, l->epilogue, y, c.y_cols};
            c.args = args;
            double act_ms = time_ms(run_load, &c);
            run_load(&c);
            c.flush = rows <= 8 ? flush : NULL;
            best_ms[s][ri] = 1e30;
            for (int ki = 0; ki < n_kernels; ki++) {
                c.kernel = kernels[ki];
                double ms = time_ms(run_gemm, &c);
                if (ms < best_ms[s][ri]) best_ms[s][ri] = ms;
                double flop = 2.0 * rows * shape_n[s] * k, gbs = bf16_packed_bytes(&l->packed) / (ms * 1e-3) / 1e9;
                char wt[16] = "", pct[16] = "";
                if (rows <= 8) {
                    snprintf(wt, sizeof wt, "%9.1f", gbs);
                    snprintf(pct, sizeof pct, "%6.0f%%", 100 * gbs / bw);
                }
                printf("%-22s %5lld %-7s %10.3f %8.2f %9s %7s %8.3f\n", shape_names[s], (long long)rows,
                       kernel_name(kernels[ki]), ms, flop / (ms * 1e-3) / 1e12, wt, pct, act_ms);
                fflush(stdout);
            }
        }
    }
    read_buffer_free(flush);
    /* again, to see whether the machine's memory speed drifted while (b) ran (shared hosts) */
    double bw_after = dram_read_gbs(pool, bw_bytes, f.avx512, "DRAM read again, after (b)");

    /* (c) one block's four GEMMs at 276 rows, against oneDNN */
    const int64_t block_rows = 276;
    double block_flop = 0;
    for (int s = 0; s < N_SHAPES; s++) block_flop += 2.0 * block_rows * shape_n[s] * shape_k[s];
    double ours[2] = {0, 0}, ours_gemm[2] = {0, 0}, theirs = 0;
    vh_executor_params params = {.max_rows = 512, .n_threads = threads};
    char err[256];
    void *amx = amx_linear_create(pool, &params, 11008, err, sizeof err);
    if (!amx) {
        fprintf(stderr, "oneDNN: %s\n", err);
        return 1;
    }
    printf("\n(c) one LLM block's four GEMMs at %lld rows, %d threads (ms; ours with the activations' load)\n",
           (long long)block_rows, threads);
    printf("%-22s %10s %10s %10s %10s\n", "shape", "ours avx", has_amx ? "ours auto" : "", "oneDNN", "TFLOP/s 1");
    for (int s = 0; s < N_SHAPES; s++) {
        layer *l = &layers[s];
        uint64_t bytes = 0;
        if (amx_linear_prepare(amx, &l->whole, &l->onednn, &bytes, err, sizeof err) != VH_OK) {
            fprintf(stderr, "oneDNN prepare: %s\n", err);
            return 1;
        }
        run_ctx c = {.pool = pool, .scratch = scratch, .act = &act, .x = x, .rms_weight = l->rms ? rms_weight : NULL,
                     .rows = block_rows, .k = shape_k[s], .amx = amx, .l = l, .y = y};
        c.y_cols = l->epilogue == BF16_EPI_SILU_MUL ? shape_n[s] / 2 : shape_n[s];
        bf16_gemm_args args = {&act, &l->packed, NULL, l->epilogue, y, c.y_cols};
        c.args = args;
        double t_ours[2] = {0, 0};
        for (int ki = 0; ki < (has_amx ? 2 : 1); ki++) {
            c.kernel = ki == 0 ? BF16_KERNEL_AVX512 : BF16_KERNEL_AUTO;
            t_ours[ki] = time_ms(run_load_gemm, &c);
            run_load(&c);
            ours[ki] += t_ours[ki];
            ours_gemm[ki] += time_ms(run_gemm, &c);
        }
        c.y_cols = shape_n[s]; /* oneDNN writes all n outputs (no gate) */
        double t_dnn = time_ms(run_onednn, &c);
        theirs += t_dnn;
        double best = has_amx && t_ours[1] < t_ours[0] ? t_ours[1] : t_ours[0];
        char auto_ms[16] = "";
        if (has_amx) snprintf(auto_ms, sizeof auto_ms, "%10.3f", t_ours[1]);
        printf("%-22s %10.3f %10s %10.3f %10.2f\n", shape_names[s], t_ours[0], auto_ms, t_dnn,
               2.0 * block_rows * shape_n[s] * shape_k[s] / (best * 1e-3) / 1e12);
        amx_linear_release(amx, l->onednn);
        l->onednn = NULL;
    }
    int bk = has_amx && ours[1] < ours[0] ? 1 : 0;
    printf("%-22s %10.3f %10s %10.3f   (%.1f GFLOP; oneDNN %.2f TFLOP/s)\n", "block", ours[0], "", theirs,
           block_flop / 1e9, block_flop / (theirs * 1e-3) / 1e12);
    if (has_amx) printf("%-22s %10s %10.3f\n", "block (auto)", "", ours[1]);
    amx_linear_destroy(amx);

    /* summary */
    printf("\nsummary, %d threads (%s):\n", threads, has_amx ? "AMX + AVX-512 bf16" : "AVX-512 bf16, no AMX");
    printf("  DRAM read                     %8.1f GB/s (%.1f after (b); %% of DRAM below: of the first)\n", bw,
           bw_after);
    for (int ri = 0; ri < n_rows; ri++) {
        if (rows_list[ri] > 8 && rows_list[ri] != 276 && rows_list[ri] != 1124) continue;
        double ms = 0, bytes = 0, flop = 0;
        for (int s = 0; s < N_SHAPES; s++) {
            ms += best_ms[s][ri];
            bytes += (double)bf16_packed_bytes(&layers[s].packed);
            flop += 2.0 * rows_list[ri] * shape_n[s] * shape_k[s];
        }
        if (rows_list[ri] <= 8)
            printf("  block's 4 GEMMs, %4lld rows   %8.3f ms  %6.1f GB/s of weights = %3.0f%% of DRAM\n",
                   (long long)rows_list[ri], ms, bytes / (ms * 1e-3) / 1e9, 100 * bytes / (ms * 1e-3) / 1e9 / bw);
        else
            printf("  block's 4 GEMMs, %4lld rows   %8.3f ms  %6.2f TFLOP/s\n", (long long)rows_list[ri], ms,
                   flop / (ms * 1e-3) / 1e12);
    }
    printf("  block at %lld rows vs oneDNN   %8.3f ms (%s, incl. activations) vs %.3f ms: %.2fx\n",
           (long long)block_rows, ours[bk], bk ? "auto" : "avx512", theirs, theirs / ours[bk]);
    printf("  GEMMs alone at %lld rows       %8.3f ms = %.2f TFLOP/s\n", (long long)block_rows, ours_gemm[bk],
           block_flop / (ours_gemm[bk] * 1e-3) / 1e12);

    for (int s = 0; s < N_SHAPES; s++) {
        bf16_packed_free(&layers[s].packed);
        free(layers[s].w);
    }
    bf16_activations_free(&act);
    bf16_gemm_scratch_destroy(scratch);
    free(x);
    free(y);
    free(rms_weight);
    vh_thread_pool_destroy(pool);
    return 0;
}
