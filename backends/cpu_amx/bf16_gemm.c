/*
 * The bf16 GEMM's driver (bf16_gemm.h): which micro-kernel, how the work is split across the
 * pool's threads, how B stays in L2, and the epilogue.
 *
 * The work is cut into units, a range of panels (32 output columns, an N block of <= 8) times a
 * range of row blocks (32 rows), at least two a thread where the shape allows; threads take the
 * next unit in turn, so a core the OS lends elsewhere for a while delays nobody. In a unit:
 *   for each K block (B of the N block 512 KB: it stays in L2 across the row blocks)
 *     for each row block, for each panel: micro-kernel over the K block, C in the scratch
 *   epilogue: C (+ bias) stored, added, through GELU, or gated into y
 * so every weight byte comes from DRAM once per call, and a decode step (one row block) reads its
 * panels front to back.
 */
#include "bf16_gemm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend_knobs.h"
#include "bf16_microkernels.h"
#include "cpu_features.h"

#define C_BLOCKS 128                   /* 32 x 32 fp32 C blocks of a thread's scratch: 512 KB */
#define N_BLOCK_PANELS 8               /* 256 columns */
#define K_BLOCK_BYTES (512 << 10)      /* B of an N block kept in L2 (measured: 1 MB and 2 MB slower) */
#define ARCH_REQ_XCOMP_PERM 0x1023     /* Linux: ask for an extended state component */
#define XFEATURE_XTILEDATA 18

struct bf16_gemm_scratch {
    int n_threads;
    float *c[];                        /* [n_threads] C_BLOCKS * 1024 floats each */
};

static cpu_bf16_features features;
static int amx_allowed;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;

/* The blocking, and knobs to measure it by (benchmarks; read once):
 * VH_BF16_NBLOCK panels an N block (8), VH_BF16_KBLOCK_KB KB of B a K block (512),
 * VH_BF16_PREFETCH=0 no B prefetch, VH_BF16_DECODE_KSTEPS K steps a decode-row call (all). */
static struct {
    int64_t n_block, k_block_bytes, decode_k_steps, amx_min_rows;
    int prefetch;
} tuning;

static int64_t env_int(vh_knob knob, int64_t fallback)
{
    const char *s = vh_knob_value(knob);
    return s && atol(s) > 0 ? atol(s) : fallback;
}

static void detect(void)
{
    tuning.n_block = env_int(VH_KNOB_BF16_NBLOCK, N_BLOCK_PANELS);
    tuning.k_block_bytes = env_int(VH_KNOB_BF16_KBLOCK_KB, K_BLOCK_BYTES >> 10) << 10;
    tuning.decode_k_steps = env_int(VH_KNOB_BF16_DECODE_KSTEPS, INT64_MAX);
    tuning.amx_min_rows = env_int(VH_KNOB_AMX_MIN_ROWS, 8);
    tuning.prefetch = !vh_knob_is(VH_KNOB_BF16_PREFETCH, "0");
    features = cpu_bf16_detect();
    /* Linux hands out the 8 KB tile state only to a process that asked for it. */
    amx_allowed = features.amx_bf16 && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

int bf16_gemm_has_avx512_bf16(void)
{
    pthread_once(&detect_once, detect);
    return features.avx512_bf16;
}

int bf16_gemm_has_amx(void)
{
    pthread_once(&detect_once, detect);
    return amx_allowed && features.avx512_bf16;
}

int64_t bf16_gemm_amx_min_rows(void)
{
    pthread_once(&detect_once, detect);
    return tuning.amx_min_rows;
}

bf16_gemm_scratch *bf16_gemm_scratch_create(int n_threads)
{
    if (n_threads < 1) n_threads = 1;
    bf16_gemm_scratch *s = calloc(1, sizeof *s + sizeof(float *) * (size_t)n_threads);
    if (!s) return NULL;
    s->n_threads = n_threads;
    for (int t = 0; t < n_threads; t++)
        if (!(s->c[t] = aligned_alloc(64, sizeof(float) * C_BLOCKS * 1024))) {
            bf16_gemm_scratch_destroy(s);
            return NULL;
        }
    return s;
}

void bf16_gemm_scratch_destroy(bf16_gemm_scratch *s)
{
    if (!s) return;
    for (int t = 0; t < s->n_threads; t++) free(s->c[t]);
    free(s);
}

typedef struct gemm_job {
    const bf16_gemm_args *args;
    bf16_gemm_scratch *scratch;
    int64_t row_blocks;
    int64_t panels_per_unit, rows_per_unit; /* a unit of work: panels x row blocks */
    int64_t n_units_n, n_units;
    int64_t decode_k_steps;            /* K steps a micro-kernel call takes with one row block */
    int64_t k_block_bytes;
    _Atomic int64_t next_unit;         /* threads take units in turn: a slow core delays none */
    int amx, prefetch;
} gemm_job;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* C block of row block rb, panel p into y. */
static void epilogue(const bf16_gemm_args *g, const float *c, int64_t rb, int64_t p)
{
    const int64_t rows = min64(32, g->a->rows - rb * 32);
    float *y = g->y + rb * 32 * g->y_stride;
    if (g->epilogue == BF16_EPI_SILU_MUL) { /* panel p: gate columns 16p.., then up's */
        const int64_t width = g->w->n / 2, c0 = p * 16, n = min64(16, width - c0);
        for (int64_t r = 0; r < rows; r++) bf16_silu_mul_row(c + r * 32, c + r * 32 + 16, y + r * g->y_stride + c0, n);
        return;
    }
    const int64_t c0 = p * BF16_PANEL, n = min64(BF16_PANEL, g->w->n - c0);
    if (g->epilogue == BF16_EPI_GELU) {
        for (int64_t r = 0; r < rows; r++)
            bf16_bias_gelu_row(c + r * 32, g->bias ? g->bias + c0 : NULL, y + r * g->y_stride + c0, n);
        return;
    }
    for (int64_t r = 0; r < rows; r++) {
        float *yr = y + r * g->y_stride + c0;
        const float *cr = c + r * 32;
        if (g->bias) {
            if (g->epilogue == BF16_EPI_ADD)
                for (int64_t j = 0; j < n; j++) yr[j] += cr[j] + g->bias[c0 + j];
            else
                for (int64_t j = 0; j < n; j++) yr[j] = cr[j] + g->bias[c0 + j];
        } else if (g->epilogue == BF16_EPI_ADD) {
            for (int64_t j = 0; j < n; j++) yr[j] += cr[j];
        } else {
            for (int64_t j = 0; j < n; j++) yr[j] = cr[j];
        }
    }
}

/* A unit: row blocks [rb0, rb1) x panels [p0, p1) of the product, on the calling thread; its C
 * blocks fit the scratch (bf16_gemm sizes units so). */
static void gemm_unit(const gemm_job *job, float *cbuf, int64_t rb0, int64_t rb1, int64_t p0, int64_t p1)
{
    const bf16_gemm_args *g = job->args;
    const int64_t ks = g->w->k_steps, nm = rb1 - rb0, np = p1 - p0;
    const bf16_activations *act = g->a;
    /* one row block (a decode step): no reuse of B to keep, so one pass over K */
    int64_t k_len = nm == 1 ? min64(ks, job->decode_k_steps) : max64(1, job->k_block_bytes / (np * 2048));
    const int64_t k_blocks = (ks + k_len - 1) / k_len;
    k_len = (ks + k_blocks - 1) / k_blocks;
    for (int64_t k0 = 0; k0 < ks; k0 += k_len) {
        const int64_t kl = min64(k_len, ks - k0);
        for (int64_t rb = rb0; rb < rb1; rb++) {
            const uint16_t *a = act->data + rb * act->block_stride + k0 * act->step_stride;
            const int rows = (int)min64(32, act->rows - rb * 32);
            for (int64_t p = p0; p < p1; p++) {
                float *c = cbuf + ((rb - rb0) * np + (p - p0)) * 1024;
                const uint16_t *b = g->w->data + (p * ks + k0) * 1024;
                if (job->amx)
                    bf16_microkernel_amx(a, act->row_stride, act->step_stride, b, kl, c, k0 > 0,
                                         job->prefetch && rb == rb0);
                else
                    bf16_microkernel_avx512(a, act->row_stride, act->step_stride, b, kl, c, k0 > 0, rows);
            }
        }
    }
    for (int64_t rb = rb0; rb < rb1; rb++)
        for (int64_t p = p0; p < p1; p++) epilogue(g, cbuf + ((rb - rb0) * np + (p - p0)) * 1024, rb, p);
}

static void gemm_units(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)begin;
    (void)end;
    gemm_job *job = ctx;
    const int64_t panels = job->args->w->n_panels;
    if (job->amx) bf16_amx_tiles_begin();
    for (int64_t u; (u = atomic_fetch_add(&job->next_unit, 1)) < job->n_units;) {
        const int64_t un = u % job->n_units_n, um = u / job->n_units_n;
        const int64_t p0 = un * job->panels_per_unit, rb0 = um * job->rows_per_unit;
        gemm_unit(job, job->scratch->c[thread_index], rb0, min64(rb0 + job->rows_per_unit, job->row_blocks), p0,
                  min64(p0 + job->panels_per_unit, panels));
    }
    if (job->amx) bf16_amx_tiles_end();
}

void bf16_gemm(vh_thread_pool *pool, bf16_gemm_scratch *scratch, const bf16_gemm_args *args, bf16_kernel kernel)
{
    const int64_t rows = args->a->rows;
    if (rows <= 0) return;
    int amx = bf16_gemm_has_amx() && kernel != BF16_KERNEL_AVX512;
    if (kernel == BF16_KERNEL_AUTO && rows < bf16_gemm_amx_min_rows()) amx = 0;
    int64_t threads = vh_thread_pool_size(pool);
    if (threads > scratch->n_threads) threads = scratch->n_threads;
    gemm_job job = {.args = args, .scratch = scratch, .row_blocks = (rows + 31) / 32, .amx = amx,
                    .decode_k_steps = tuning.decode_k_steps, .k_block_bytes = tuning.k_block_bytes,
                    .prefetch = tuning.prefetch};
    /* Units of an N block (<= 8 panels, B kept in L2 across its row blocks) times a run of row
     * blocks (their C in the scratch); smaller, while there are fewer than two units a thread. */
    const int64_t panels = args->w->n_panels;
    int64_t np = min64(tuning.n_block, C_BLOCKS);
    while (np > 1 && (panels + np - 1) / np < 2 * threads) np /= 2;
    int64_t nm = min64(job.row_blocks, C_BLOCKS / np);
    job.n_units_n = (panels + np - 1) / np;
    while (nm > 1 && job.n_units_n * ((job.row_blocks + nm - 1) / nm) < threads) nm = (nm + 1) / 2;
    job.panels_per_unit = np;
    job.rows_per_unit = nm;
    job.n_units = job.n_units_n * ((job.row_blocks + nm - 1) / nm);
    atomic_init(&job.next_unit, 0);
    vh_parallel_for(pool, min64(threads, job.n_units), 1, gemm_units, &job);
}
