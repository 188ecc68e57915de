/*
 * bench_kernels: throughput of the cpu_generic kernels on Llama-2-7B shapes.
 *
 *   bench_kernels [--threads N] [--section linear|crossover|blocks|panel|block|vit|bandwidth|all]
 *
 * linear:    vhk_linear with BF16 weights vs cblas_sgemm with F32 weights (the peer) for
 *            4096->4096, 4096->11008 and 11008->4096 at 1, 8, 64 and 286 rows; GFLOP/s and the
 *            weight stream in GB/s.
 * crossover: direct GEMM (AVX-512 and AVX2 variants) vs converted panels + sgemm at 1..286
 *            rows (chooses the sgemm threshold per variant).
 * blocks:    direct-GEMM cache block sizes at 286 and 1024 rows.
 * panel:     sgemm panel widths at 286 rows.
 * block:     one Llama-2-7B decoder block (random BF16 weights) composed from the kernels: a
 *            286-row prefill at position 0, and a 1-row decode step at position 286 over the
 *            286-token KV cache; with a per-kernel breakdown.
 * vit:       one SigLIP-So400m ViT block (256 tokens), with a per-kernel breakdown.
 * Times are medians of repeated runs after one warm-up.
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_kernels.h"
#include "kernels_internal.h"
#include "bench_clock.h"

#define MIN_REPS 3
#define MAX_REPS 50
#define TARGET_SECONDS 0.5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Median seconds of fn(ctx) over repeated runs (one warm-up first). */
static double time_median(void (*fn)(void *), void *ctx)
{
    double t[MAX_REPS], total = 0;
    int n = 0;
    fn(ctx);
    while (n < MAX_REPS && (n < MIN_REPS || total < TARGET_SECONDS)) {
        double t0 = now_s();
        fn(ctx);
        t[n] = now_s() - t0;
        total += t[n++];
    }
    qsort(t, (size_t)n, sizeof t[0], vh_bench_cmp_double);
    return t[n / 2];
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Uniform in [-scale, scale). */
static float rng_uniform(float scale)
{
    return scale * ((float)(rng_next() >> 40) * (2.0f / 16777216.0f) - 1.0f);
}

static void *xmalloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64) != 0) {
        fprintf(stderr, "bench_kernels: out of memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

static float *random_f32(int64_t n, float scale)
{
    float *p = xmalloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) p[i] = rng_uniform(scale);
    return p;
}

static vh_tensor_view random_bf16_matrix(int64_t out, int64_t in, float scale)
{
    uint16_t *p = xmalloc((size_t)(out * in) * sizeof(uint16_t));
    for (int64_t i = 0; i < out * in; i++) p[i] = vh_f32_to_bf16(rng_uniform(scale));
    vh_tensor_view v = {p, VH_DTYPE_BF16, 2, {out, in, 0, 0}, "bench", 0};
    return v;
}

/* --- linear ------------------------------------------------------------------------------------ */

typedef struct linear_case {
    vhk_matmul *mm;
    const float *x;
    int64_t rows, in, out;
    const vh_tensor_view *w;
    const float *w_f32;
    float *y;
} linear_case;

static void run_vhk_linear(void *ctx)
{
    linear_case *c = ctx;
    vhk_linear(c->mm, c->x, c->in, c->rows, c->in, c->w, NULL, c->y, c->out);
}

static void run_sgemm(void *ctx)
{
    linear_case *c = ctx;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)c->rows, (blasint)c->out,
                (blasint)c->in, 1.0f, c->x, (blasint)c->in, c->w_f32, (blasint)c->in, 0.0f, c->y,
                (blasint)c->out);
}

static const int64_t shapes[3][2] = {{4096, 4096}, {4096, 11008}, {11008, 4096}};

static void bench_linear(vh_thread_pool *pool)
{
    static const int64_t rows_list[] = {1, 8, 64, 286};
    vhk_matmul *mm = vhk_matmul_create(pool, 11008);
    printf("\n== linear: vhk_linear (BF16 weights) vs cblas_sgemm (F32 weights) ==\n");
    printf("%-13s %5s | %9s %8s %7s | %9s %8s %7s | %6s\n", "in->out", "rows", "vhk ms", "GFLOP/s",
           "GB/s", "sgemm ms", "GFLOP/s", "GB/s", "ratio");
    for (int s = 0; s < 3; s++) {
        int64_t in = shapes[s][0], out = shapes[s][1];
        vh_tensor_view w = random_bf16_matrix(out, in, 0.02f);
        float *w_f32 = xmalloc((size_t)(out * in) * sizeof(float));
        vhk_convert_to_f32(w.data, w.dtype, w_f32, out * in);
        float *x = random_f32(286 * in, 1.0f), *y = xmalloc((size_t)(286 * out) * sizeof(float));
        for (size_t r = 0; r < sizeof rows_list / sizeof rows_list[0]; r++) {
            linear_case c = {mm, x, rows_list[r], in, out, &w, w_f32, y};
            double t_vhk = time_median(run_vhk_linear, &c);
            double t_blas = time_median(run_sgemm, &c);
            double flop = 2.0 * (double)c.rows * (double)in * (double)out;
            double wbytes = (double)in * (double)out;
            char name[32];
            snprintf(name, sizeof name, "%lld->%lld", (long long)in, (long long)out);
            printf("%-13s %5lld | %9.3f %8.1f %7.1f | %9.3f %8.1f %7.1f | %6.2f\n", name,
                   (long long)c.rows, t_vhk * 1e3, flop / t_vhk * 1e-9, 2 * wbytes / t_vhk * 1e-9,
                   t_blas * 1e3, flop / t_blas * 1e-9, 4 * wbytes / t_blas * 1e-9, t_blas / t_vhk);
        }
        free((void *)w.data);
        free(w_f32);
        free(x);
        free(y);
    }
    vhk_matmul_destroy(mm);
}

static void set_tuning(vhk_matmul *m, vhk_isa isa, int64_t sgemm_min_rows, int64_t panel_rows,
                       int64_t block_rows, int64_t block_outputs)
{
    vhk_matmul_tuning t;
    vhk_matmul_get_tuning(m, &t);
    t.isa = isa;
    t.sgemm_min_rows = sgemm_min_rows;
    if (panel_rows > 0) t.panel_rows = panel_rows;
    t.direct_block_rows = block_rows;
    t.direct_block_outputs = block_outputs;
    vhk_matmul_set_tuning(m, &t);
}

/* Direct GEMM (each supported vector variant) vs BF16 panels + sgemm, rows 1..286. */
static void bench_crossover(vh_thread_pool *pool)
{
    static const int64_t rows_list[] = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128, 286};
    vhk_matmul *mm = vhk_matmul_create(pool, 11008);
    /* the 128/256-bit column: AVX2 on x86-64, NEON on aarch64 */
    vhk_isa narrow_isa = vhk_isa_supported(VHK_ISA_NEON) ? VHK_ISA_NEON : VHK_ISA_AVX2;
    int avx2 = vhk_isa_supported(narrow_isa), avx512 = vhk_isa_supported(VHK_ISA_AVX512);
    printf("\n== crossover: direct GEMM vs BF16 panels + sgemm (default panels), ms ==\n");
    printf("%-13s %5s | %9s %9s | %9s\n", "in->out", "rows", "avx512", vhk_isa_name(narrow_isa), "panels");
    for (int s = 0; s < 3; s++) {
        int64_t in = shapes[s][0], out = shapes[s][1];
        vh_tensor_view w = random_bf16_matrix(out, in, 0.02f);
        float *x = random_f32(286 * in, 1.0f), *y = xmalloc((size_t)(286 * out) * sizeof(float));
        for (size_t r = 0; r < sizeof rows_list / sizeof rows_list[0]; r++) {
            linear_case c = {mm, x, rows_list[r], in, out, &w, NULL, y};
            double t512 = 0, t2 = 0;
            if (avx512) {
                set_tuning(mm, VHK_ISA_AVX512, INT64_MAX, 0, 0, 0);
                t512 = time_median(run_vhk_linear, &c);
            }
            if (avx2) {
                set_tuning(mm, narrow_isa, INT64_MAX, 0, 0, 0);
                t2 = time_median(run_vhk_linear, &c);
            }
            set_tuning(mm, vhk_isa_detect(), 1, 0, 0, 0);
            double t_panel = time_median(run_vhk_linear, &c);
            char name[32];
            snprintf(name, sizeof name, "%lld->%lld", (long long)in, (long long)out);
            printf("%-13s %5lld | %9.3f %9.3f | %9.3f\n", name, (long long)c.rows, t512 * 1e3,
                   t2 * 1e3, t_panel * 1e3);
        }
        free((void *)w.data);
        free(x);
        free(y);
    }
    vhk_matmul_destroy(mm);
}

/* Direct-GEMM cache blocks (x rows x weight rows) at 286 and 1024 rows, BF16. */
static void bench_direct_blocks(vh_thread_pool *pool)
{
    static const int64_t block_rows[] = {8, 16, 32, 64};
    static const int64_t block_outputs[] = {64, 128, 256, 512};
    static const int64_t rows_list[] = {286, 1024};
    vhk_matmul *mm = vhk_matmul_create(pool, 11008);
    printf("\n== direct GEMM cache blocks (BF16, %s), ms; columns: weight rows per block ==\n",
           vhk_isa_name(vhk_isa_detect()));
    for (int s = 0; s < 3; s++) {
        int64_t in = shapes[s][0], out = shapes[s][1];
        vh_tensor_view w = random_bf16_matrix(out, in, 0.02f);
        float *x = random_f32(1024 * in, 1.0f), *y = xmalloc((size_t)(1024 * out) * sizeof(float));
        for (int r = 0; r < 2; r++) {
            printf("%lld->%lld, %lld rows (defaults: ", (long long)in, (long long)out,
                   (long long)rows_list[r]);
            linear_case c = {mm, x, rows_list[r], in, out, &w, NULL, y};
            set_tuning(mm, vhk_isa_detect(), INT64_MAX, 0, 0, 0);
            printf("%.2f)\n  x rows  |", time_median(run_vhk_linear, &c) * 1e3);
            for (int o = 0; o < 4; o++) printf(" %9lld", (long long)block_outputs[o]);
            printf("\n");
            for (int b = 0; b < 4; b++) {
                printf("  %7lld |", (long long)block_rows[b]);
                for (int o = 0; o < 4; o++) {
                    set_tuning(mm, vhk_isa_detect(), INT64_MAX, 0, block_rows[b], block_outputs[o]);
                    printf(" %9.2f", time_median(run_vhk_linear, &c) * 1e3);
                    fflush(stdout);
                }
                printf("\n");
            }
        }
        free((void *)w.data);
        free(x);
        free(y);
    }
    vhk_matmul_destroy(mm);
}

static void bench_panel(vh_thread_pool *pool)
{
    static const int64_t panels[] = {64, 128, 256, 512, 1024};
    printf("\n== sgemm panel width at 286 rows (BF16), ms ==\n");
    printf("%-13s | %8s %8s %8s %8s %8s\n", "in->out", "64", "128", "256", "512", "1024");
    vhk_matmul *mm = vhk_matmul_create(pool, 11008);
    for (int s = 0; s < 3; s++) {
        int64_t in = shapes[s][0], out = shapes[s][1];
        vh_tensor_view w = random_bf16_matrix(out, in, 0.02f);
        float *x = random_f32(286 * in, 1.0f), *y = xmalloc((size_t)(286 * out) * sizeof(float));
        printf("%lld->%-7lld |", (long long)in, (long long)out);
        for (int p = 0; p < 5; p++) {
            set_tuning(mm, vhk_isa_detect(), 1, panels[p], 0, 0);
            linear_case c = {mm, x, 286, in, out, &w, NULL, y};
            printf(" %8.2f", time_median(run_vhk_linear, &c) * 1e3);
            fflush(stdout);
        }
        printf("\n");
        free((void *)w.data);
        free(x);
        free(y);
    }
    vhk_matmul_destroy(mm);
}

/* --- whole blocks, with a per-kernel breakdown ------------------------------------------------ */

enum { PART_NORM, PART_LINEAR, PART_ROPE, PART_ATTENTION, PART_ACTIVATION, PART_ADD, N_PARTS };
static const char *const part_names[N_PARTS] = {"norm", "linear", "rope", "attention",
                                                "activation", "add"};

typedef struct part_timer {
    double seconds[N_PARTS];
    int enabled;
} part_timer;

/* Run one kernel call and, when enabled, charge its time to a part. */
#define TIMED(timer, part, call)                                        \
    do {                                                                \
        double t0_ = (timer)->enabled ? now_s() : 0;                    \
        call;                                                           \
        if ((timer)->enabled) (timer)->seconds[part] += now_s() - t0_;  \
    } while (0)

static void print_breakdown(const part_timer *t, int runs)
{
    double total = 0;
    for (int i = 0; i < N_PARTS; i++) total += t->seconds[i];
    printf("    breakdown:");
    for (int i = 0; i < N_PARTS; i++)
        if (t->seconds[i] > 0)
            printf(" %s %.2f ms (%.0f%%)", part_names[i], t->seconds[i] / runs * 1e3,
                   100 * t->seconds[i] / total);
    printf("\n");
}

enum { DIM = 4096, FFN = 11008, HEADS = 32, HEAD_DIM = 128, CONTEXT = 512, PREFILL = 286 };

typedef struct llama_block {
    vh_thread_pool *pool;
    vhk_matmul *mm;
    part_timer timer;
    float *attn_norm, *mlp_norm;           /* [DIM] */
    vh_tensor_view wq, wk, wv, wo;         /* [DIM, DIM] */
    vh_tensor_view gate, up, down;         /* [FFN, DIM], [FFN, DIM], [DIM, FFN] */
    float *k_cache, *v_cache;              /* [CONTEXT, DIM] */
    float *x;                              /* [rows, DIM] hidden state (residual stream) */
    float *h, *q, *att;                    /* [rows, DIM] */
    float *g, *u;                          /* [rows, FFN] */
    int32_t *positions;
    int64_t rows, position;
} llama_block;

/* x += o(attn(rope(q(n)), rope(k(n)), v(n))); x += down(silu(gate(n')) * up(n')), n = rmsnorm(x). */
static void llama_block_forward(void *ctx)
{
    llama_block *b = ctx;
    part_timer *t = &b->timer;
    int64_t rows = b->rows, pos = b->position;
    float *k_new = b->k_cache + pos * DIM, *v_new = b->v_cache + pos * DIM;
    for (int64_t r = 0; r < rows; r++) b->positions[r] = (int32_t)(pos + r);
    TIMED(t, PART_NORM, vhk_rmsnorm(b->pool, b->x, b->h, rows, DIM, b->attn_norm, 1e-5f));
    TIMED(t, PART_LINEAR, vhk_linear(b->mm, b->h, DIM, rows, DIM, &b->wq, NULL, b->q, DIM));
    TIMED(t, PART_LINEAR, vhk_linear(b->mm, b->h, DIM, rows, DIM, &b->wk, NULL, k_new, DIM));
    TIMED(t, PART_LINEAR, vhk_linear(b->mm, b->h, DIM, rows, DIM, &b->wv, NULL, v_new, DIM));
    TIMED(t, PART_ROPE, vhk_rope(b->pool, b->q, DIM, rows, HEADS, HEAD_DIM, b->positions, 1e4f));
    TIMED(t, PART_ROPE, vhk_rope(b->pool, k_new, DIM, rows, HEADS, HEAD_DIM, b->positions, 1e4f));
    vhk_attention_args a = {b->q, DIM, b->k_cache, b->v_cache, DIM, b->att, DIM, rows, pos + rows,
                            HEADS, HEADS, HEAD_DIM, pos, 1, 1.0f / sqrtf((float)HEAD_DIM)};
    TIMED(t, PART_ATTENTION, vhk_attention(b->pool, &a));
    TIMED(t, PART_LINEAR, vhk_linear(b->mm, b->att, DIM, rows, DIM, &b->wo, NULL, b->h, DIM));
    TIMED(t, PART_ADD, vhk_add(b->pool, b->x, b->h, rows * DIM));
    TIMED(t, PART_NORM, vhk_rmsnorm(b->pool, b->x, b->h, rows, DIM, b->mlp_norm, 1e-5f));
    TIMED(t, PART_LINEAR, vhk_linear(b->mm, b->h, DIM, rows, DIM, &b->gate, NULL, b->g, FFN));
    TIMED(t, PART_LINEAR, vhk_linear(b->mm, b->h, DIM, rows, DIM, &b->up, NULL, b->u, FFN));
    TIMED(t, PART_ACTIVATION, vhk_silu_mul(b->pool, b->g, b->u, b->g, rows * FFN));
    TIMED(t, PART_LINEAR, vhk_linear(b->mm, b->g, FFN, rows, FFN, &b->down, NULL, b->h, DIM));
    TIMED(t, PART_ADD, vhk_add(b->pool, b->x, b->h, rows * DIM));
}

/* Median time of a block, then one more run with the breakdown timers on. */
static double time_block(void (*forward)(void *), void *block, part_timer *timer)
{
    memset(timer, 0, sizeof *timer);
    double t = time_median(forward, block);
    timer->enabled = 1;
    forward(block);
    timer->enabled = 0;
    return t;
}

static void bench_llama_block(vh_thread_pool *pool)
{
    llama_block b = {0};
    b.pool = pool;
    b.mm = vhk_matmul_create(pool, FFN);
    b.attn_norm = random_f32(DIM, 1.0f);
    b.mlp_norm = random_f32(DIM, 1.0f);
    b.wq = random_bf16_matrix(DIM, DIM, 0.02f);
    b.wk = random_bf16_matrix(DIM, DIM, 0.02f);
    b.wv = random_bf16_matrix(DIM, DIM, 0.02f);
    b.wo = random_bf16_matrix(DIM, DIM, 0.02f);
    b.gate = random_bf16_matrix(FFN, DIM, 0.02f);
    b.up = random_bf16_matrix(FFN, DIM, 0.02f);
    b.down = random_bf16_matrix(DIM, FFN, 0.02f);
    b.k_cache = random_f32(CONTEXT * DIM, 1.0f);
    b.v_cache = random_f32(CONTEXT * DIM, 1.0f);
    b.x = random_f32(PREFILL * DIM, 1.0f);
    b.h = xmalloc(PREFILL * DIM * sizeof(float));
    b.q = xmalloc(PREFILL * DIM * sizeof(float));
    b.att = xmalloc(PREFILL * DIM * sizeof(float));
    b.g = xmalloc((size_t)PREFILL * FFN * sizeof(float));
    b.u = xmalloc((size_t)PREFILL * FFN * sizeof(float));
    b.positions = xmalloc(PREFILL * sizeof(int32_t));
    double weight_bytes = 2.0 * (4.0 * DIM * DIM + 3.0 * DIM * FFN);
    double flop_per_row = 2.0 * (4.0 * DIM * DIM + 3.0 * DIM * FFN);

    printf("\n== one Llama-2-7B block (BF16 weights, %.0f MB) ==\n", weight_bytes / 1e6);
    b.rows = PREFILL;
    b.position = 0;
    double t = time_block(llama_block_forward, &b, &b.timer);
    printf("prefill %d rows @0:        %8.1f ms  (%.1f GFLOP/s over the linears' FLOPs; x32 layers: "
           "%.2f s)\n", PREFILL, t * 1e3, flop_per_row * PREFILL / t * 1e-9, 32 * t);
    print_breakdown(&b.timer, 1);
    b.rows = 1;
    b.position = PREFILL;
    t = time_block(llama_block_forward, &b, &b.timer);
    printf("decode 1 row @%d (KV %d):  %8.2f ms  (%.1f GB/s of weights; x32 layers: %.3f s)\n",
           PREFILL, PREFILL + 1, t * 1e3, weight_bytes / t * 1e-9, 32 * t);
    print_breakdown(&b.timer, 1);

    free(b.attn_norm); free(b.mlp_norm);
    free((void *)b.wq.data); free((void *)b.wk.data); free((void *)b.wv.data);
    free((void *)b.wo.data); free((void *)b.gate.data); free((void *)b.up.data);
    free((void *)b.down.data);
    free(b.k_cache); free(b.v_cache); free(b.x); free(b.h); free(b.q); free(b.att);
    free(b.g); free(b.u); free(b.positions);
    vhk_matmul_destroy(b.mm);
}

/* SigLIP-So400m/14 at 224 px: 256 tokens, D 1152, 16 heads of 72, MLP 4304. */
enum { VIT_T = 256, VIT_D = 1152, VIT_HEADS = 16, VIT_HD = 72, VIT_H = 4304 };

typedef struct vit_block {
    vh_thread_pool *pool;
    vhk_matmul *mm;
    part_timer timer;
    float *n1w, *n1b, *n2w, *n2b, *qkv_b, *proj_b, *fc1_b, *fc2_b;
    vh_tensor_view qkv, proj, fc1, fc2;    /* [3D, D], [D, D], [H, D], [D, H] */
    float *x, *h, *qkv_out, *att, *mlp;    /* [T, D], [T, D], [T, 3D], [T, D], [T, H] */
} vit_block;

/* x += proj(attn(qkv(ln1(x)))); x += fc2(gelu(fc1(ln2(x)))). */
static void vit_block_forward(void *ctx)
{
    vit_block *b = ctx;
    part_timer *t = &b->timer;
    TIMED(t, PART_NORM, vhk_layernorm(b->pool, b->x, b->h, VIT_T, VIT_D, b->n1w, b->n1b, 1e-6f));
    TIMED(t, PART_LINEAR, vhk_linear(b->mm, b->h, VIT_D, VIT_T, VIT_D, &b->qkv, b->qkv_b, b->qkv_out,
                                     3 * VIT_D));
    vhk_attention_args a = {b->qkv_out, 3 * VIT_D, b->qkv_out + VIT_D, b->qkv_out + 2 * VIT_D,
                            3 * VIT_D, b->att, VIT_D, VIT_T, VIT_T, VIT_HEADS, VIT_HEADS, VIT_HD, 0, 0,
                            1.0f / sqrtf((float)VIT_HD)};
    TIMED(t, PART_ATTENTION, vhk_attention(b->pool, &a));
    TIMED(t, PART_LINEAR, vhk_linear(b->mm, b->att, VIT_D, VIT_T, VIT_D, &b->proj, b->proj_b, b->h,
                                     VIT_D));
    TIMED(t, PART_ADD, vhk_add(b->pool, b->x, b->h, VIT_T * VIT_D));
    TIMED(t, PART_NORM, vhk_layernorm(b->pool, b->x, b->h, VIT_T, VIT_D, b->n2w, b->n2b, 1e-6f));
    TIMED(t, PART_LINEAR, vhk_linear(b->mm, b->h, VIT_D, VIT_T, VIT_D, &b->fc1, b->fc1_b, b->mlp,
                                     VIT_H));
    TIMED(t, PART_ACTIVATION, vhk_gelu_exact(b->pool, b->mlp, (int64_t)VIT_T * VIT_H));
    TIMED(t, PART_LINEAR, vhk_linear(b->mm, b->mlp, VIT_H, VIT_T, VIT_H, &b->fc2, b->fc2_b, b->h,
                                     VIT_D));
    TIMED(t, PART_ADD, vhk_add(b->pool, b->x, b->h, VIT_T * VIT_D));
}

static void bench_vit_block(vh_thread_pool *pool)
{
    vit_block b = {0};
    b.pool = pool;
    b.mm = vhk_matmul_create(pool, VIT_H);
    float **vecs[] = {&b.n1w, &b.n1b, &b.n2w, &b.n2b, &b.proj_b, &b.fc2_b};
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) *vecs[i] = random_f32(VIT_D, 1.0f);
    b.qkv_b = random_f32(3 * VIT_D, 0.1f);
    b.fc1_b = random_f32(VIT_H, 0.1f);
    b.qkv = random_bf16_matrix(3 * VIT_D, VIT_D, 0.03f);
    b.proj = random_bf16_matrix(VIT_D, VIT_D, 0.03f);
    b.fc1 = random_bf16_matrix(VIT_H, VIT_D, 0.03f);
    b.fc2 = random_bf16_matrix(VIT_D, VIT_H, 0.03f);
    b.x = random_f32(VIT_T * VIT_D, 1.0f);
    b.h = xmalloc(VIT_T * VIT_D * sizeof(float));
    b.att = xmalloc(VIT_T * VIT_D * sizeof(float));
    b.qkv_out = xmalloc(3 * VIT_T * VIT_D * sizeof(float));
    b.mlp = xmalloc((size_t)VIT_T * VIT_H * sizeof(float));
    double flop = 2.0 * VIT_T * (4.0 * VIT_D * VIT_D + 2.0 * VIT_D * VIT_H);

    printf("\n== one SigLIP-So400m block (BF16 weights, %d tokens) ==\n", VIT_T);
    double t = time_block(vit_block_forward, &b, &b.timer);
    printf("block: %8.2f ms  (%.1f GFLOP/s over the linears' FLOPs; x26 blocks: %.2f s)\n", t * 1e3,
           flop / t * 1e-9, 26 * t);
    print_breakdown(&b.timer, 1);

    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) free(*vecs[i]);
    free(b.qkv_b); free(b.fc1_b);
    free((void *)b.qkv.data); free((void *)b.proj.data); free((void *)b.fc1.data);
    free((void *)b.fc2.data);
    free(b.x); free(b.h); free(b.att); free(b.qkv_out); free(b.mlp);
    vhk_matmul_destroy(b.mm);
}

/* The physical floor for decode: how fast the pool's threads can stream memory they only read. */
typedef struct read_ctx {
    vh_thread_pool *pool;
    const float *data;
    double *partial;                   /* one sum per thread, so the reads cannot be optimised away */
} read_ctx;

static void read_chunk(void *p, int64_t begin, int64_t end, int thread_index)
{
    read_ctx *c = p;
    float acc[16] = {0};
    for (int64_t i = begin * 16; i < end * 16; i += 16)
        for (int k = 0; k < 16; k++) acc[k] += c->data[i + k];
    double s = 0;
    for (int k = 0; k < 16; k++) s += acc[k];
    c->partial[thread_index] += s;
}

static void run_read(void *p)
{
    read_ctx *c = p;
    vh_parallel_for(c->pool, (int64_t)(((size_t)1 << 28) / 16), 4096, read_chunk, c);
}

static void bench_bandwidth(vh_thread_pool *pool)
{
    const size_t n = (size_t)1 << 28; /* 1 GiB of floats, far beyond the caches */
    read_ctx c = {pool, random_f32((int64_t)n, 1.0f), xmalloc(sizeof(double) * (size_t)vh_thread_pool_size(pool))};
    memset(c.partial, 0, sizeof(double) * (size_t)vh_thread_pool_size(pool));
    double t = time_median(run_read, &c);
    printf("\n== memory read bandwidth (1 GiB, %d threads) ==\n%.1f GB/s (the floor for weight-streaming decode)\n",
           vh_thread_pool_size(pool), n * sizeof(float) / t / 1e9);
    free((void *)c.data);
    free(c.partial);
}

int main(int argc, char **argv)
{
    int threads = 0;
    const char *section = "all";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            threads = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--section") && i + 1 < argc) {
            section = argv[++i];
        } else {
            fprintf(stderr, "usage: %s [--threads N] [--section linear|crossover|blocks|panel|block|vit|bandwidth|all]\n",
                    argv[0]);
            return 2;
        }
    }
    vh_thread_pool *pool = vh_thread_pool_create_flags(threads, VH_POOL_PIN_CORES); /* as cpu_generic's */
    if (!pool) {
        fprintf(stderr, "bench_kernels: cannot create the thread pool\n");
        return 1;
    }
    printf("bench_kernels: %d threads, direct GEMM variant %s, OpenBLAS: %s\n",
           vh_thread_pool_size(pool), vhk_isa_name(vhk_isa_detect()), openblas_get_config());
    int all = !strcmp(section, "all");
    if (all || !strcmp(section, "linear")) bench_linear(pool);
    if (all || !strcmp(section, "crossover")) bench_crossover(pool);
    if (all || !strcmp(section, "blocks")) bench_direct_blocks(pool);
    if (all || !strcmp(section, "panel")) bench_panel(pool);
    if (all || !strcmp(section, "block")) bench_llama_block(pool);
    if (all || !strcmp(section, "vit")) bench_vit_block(pool);
    if (all || !strcmp(section, "bandwidth")) bench_bandwidth(pool);
    vh_thread_pool_destroy(pool);
    return 0;
}
