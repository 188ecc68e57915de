/*
 * cpu_amx's AVX-512 prefill attention (backends/cpu_amx/avx512_attention.h), vhk_attention's
 * contract, against a float64 naive attention written here (full max-subtracted softmax per row
 * and head): Llama-2-7B's shape (32 heads x 128, 276 rows causal), a prefill continuing a cache
 * (first_position 40), grouped-query with a row count that is not a multiple of the 8-row tile,
 * non-causal, 1124 rows, a causal window clamped to n_kv, a maximum that rises in every key block,
 * and three memory layouts: packed/padded rows (misaligned by the padding), the executor's (q inside
 * a fused q|k|v row, k and v in a packed KV cache) and a fused q|k|v row for q, k and v alike. q and
 * k reach magnitude 8 in most cases (scores with a standard deviation of ~20: a peaked softmax), v
 * magnitude 8. Every case runs on OpenMP pools of 1, 2 and 16 threads, which must give the same
 * bits (each row's arithmetic is fixed-order whatever thread takes its tile); the output rows'
 * padding must stay untouched and the inputs unchanged. avx512_attention_fits must take every case
 * (any head size: the ViTs' 64 and SigLIP's 72, masked lanes) and refuse too few rows, an empty
 * head, more keys or a wider KV row
 * than the scratch holds, a head count that is not a multiple of the KV heads, no scratch.
 *
 * Tolerance, per output value (first-order error analysis of fp32 with FMA, u = 2^-24; doubled for
 * the second-order terms and as slack):
 *  - the score s_j = scale * q.k_j is one FMA chain over d (avx512_attention.c); each step rounds
 *    by at most u |S_d|, S_d the partial sum, then the scale rounds once: E_j = u (|scale|
 *    sum_d |S_d| + |s_j|), the running-error bound of that chain, computed here from the exact
 *    partial sums (a tight bound: a uniform (hd + 1) u sum_d |q_d k_jd| is ~10x looser);
 *  - the weight e^(s_j - m) gets a relative error of E_j, plus u |s_j - m| from the fp32
 *    subtraction, plus EXP_U for the exp (range reduction is exact or nearly, degree-7 Taylor
 *    truncation < 0.15 u, Horner's FMAs ~2 u: EXP_U = 6 u budgets 3 ulp). A common shift of every
 *    score cancels in the normalisation, so with relative weight errors e_j the output moves by at
 *    most sum_j w_j e_j |v_jd - out_d| (w_j the normalised weights);
 *  - rescaling by e^(m_old - m_new) multiplies the running numerator and denominator by the same
 *    fp32 value, so its own error cancels; the numerator's n_keys FMAs and B = n_keys/16 + 1
 *    rescales round by at most u sum_j w_j |v_jd| each (relative to the final scale), the
 *    denominator's 16-lane sums (4 levels) and 2 B roundings and the final 1/l and product add
 *    (2 B + 8) u |out_d|.
 * allowed = 2 [sum_j w_j e_j |v_jd - out_d| + u ((n_keys + B + 1) sum_j w_j |v_jd| + (2B + 8)
 * |out_d|)] + 1e-30. Weights the kernel flushes (s_j - m < -87.3: e^(s_j - m) < 2^-126) change
 * the output by < 1e-35 here. An off-by-one key, a wrong KV head, a wrong scale or a missed
 * rescale moves outputs by far more. The worst error is also printed against the simpler
 * 1e-5 (1 + max|v|), for reference.
 *
 * Without AVX-512 F the whole test is skipped (exit 77).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "avx512_attention.h"
#include "kernel_test_util.h"
#include "test_support.h"
#include "thread_pool_openmp.h"

#define EXP_U (6 * FP32_U)
#define SENTINEL (-777.0f)
#define N_POOLS 3

static const int pool_threads[N_POOLS] = {1, 2, 16};

enum layout {
    PACKED,   /* q, k, v, out rows of their heads' width plus `pad` floats */
    EXECUTOR, /* q in a [q | k | v] row (q_dim + 2 kv_dim), k and v in packed caches, out + pad */
    FUSED,    /* q, k, v all in one [q | k | v | pad] row (n_rows == n_kv), out + pad */
};

typedef struct attn_case {
    const char *name;
    int64_t n_rows, n_kv, n_heads, n_kv_heads, head_dim, first_position;
    int causal;
    enum layout layout;
    int64_t pad;
    float qk_scale, v_scale; /* magnitudes of q and k values, of v values */
    int rising_scores;       /* k_j ~ (4 j / n_kv) q_row0: the maximum rises in every key block */
    int64_t extra_keys;      /* the scratch holds this many keys more than n_kv */
} attn_case;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The float64 attention and each output's bound (the header says how). */
static void reference(const vhk_attention_args *a, double *ref, double *allowed)
{
    const int64_t hd = a->head_dim, group = a->n_heads / a->n_kv_heads;
    double *w = test_alloc_doubles(a->n_kv), *e = test_alloc_doubles(a->n_kv);
    double *acc = test_alloc_doubles(hd), *absacc = test_alloc_doubles(hd), *dev = test_alloc_doubles(hd);
    const double scale = a->scale;
    for (int64_t i = 0; i < a->n_rows; i++) {
        for (int64_t h = 0; h < a->n_heads; h++) {
            int64_t n_keys = a->n_kv;
            if (a->causal && a->first_position + i + 1 < n_keys) n_keys = a->first_position + i + 1;
            const float *q = a->q + i * a->q_stride + h * hd;
            const int64_t kvo = (h / group) * hd;
            double m = -INFINITY;
            for (int64_t j = 0; j < n_keys; j++) {
                const float *k = a->k + j * a->kv_stride + kvo;
                double partial = 0, running = 0;
                for (int64_t d = 0; d < hd; d++) {
                    partial += (double)q[d] * k[d];
                    running += fabs(partial);
                }
                w[j] = partial * scale;
                e[j] = FP32_U * (fabs(scale) * running + fabs(w[j]));
                if (w[j] > m) m = w[j];
            }
            double sum = 0;
            for (int64_t j = 0; j < n_keys; j++) {
                const double x = w[j] - m;
                e[j] += FP32_U * fabs(x) + EXP_U;
                w[j] = exp(x);
                sum += w[j];
            }
            for (int64_t d = 0; d < hd; d++) acc[d] = absacc[d] = dev[d] = 0;
            for (int64_t j = 0; j < n_keys; j++) {
                w[j] /= sum;
                const float *v = a->v + j * a->kv_stride + kvo;
                for (int64_t d = 0; d < hd; d++) {
                    acc[d] += w[j] * v[d];
                    absacc[d] += w[j] * fabs((double)v[d]);
                }
            }
            for (int64_t j = 0; j < n_keys; j++) {
                const float *v = a->v + j * a->kv_stride + kvo;
                for (int64_t d = 0; d < hd; d++) dev[d] += w[j] * e[j] * fabs(v[d] - acc[d]);
            }
            const double blocks = (double)(n_keys / 16 + 1);
            for (int64_t d = 0; d < hd; d++) {
                const int64_t o = i * a->out_stride + h * hd + d;
                ref[o] = acc[d];
                allowed[o] = 2 * (dev[d] + FP32_U * (((double)n_keys + blocks + 1) * absacc[d] +
                                                      (2 * blocks + 8) * fabs(acc[d]))) + 1e-30;
            }
        }
    }
    free(w); free(e); free(acc); free(absacc); free(dev);
}

static void run_case(const attn_case *c, uint64_t seed)
{
    test_rng rng = test_rng_seed(seed);
    const int64_t hd = c->head_dim, dq = c->n_heads * hd, dkv = c->n_kv_heads * hd;
    int64_t q_stride, kv_stride, out_stride = dq + c->pad, n_q, n_k, n_v;
    float *qb, *kb = NULL, *vb = NULL;
    const float *q, *k, *v;
    switch (c->layout) {
    case EXECUTOR:
        q_stride = dq + 2 * dkv;
        kv_stride = dkv;
        n_q = c->n_rows * q_stride;
        n_k = n_v = c->n_kv * kv_stride;
        qb = test_alloc_floats(n_q);
        kb = test_alloc_floats(n_k);
        vb = test_alloc_floats(n_v);
        test_fill(&rng, qb, n_q, c->qk_scale); /* the row's k and v parts: not read */
        test_fill(&rng, kb, n_k, c->qk_scale);
        test_fill(&rng, vb, n_v, c->v_scale);
        q = qb;
        k = kb;
        v = vb;
        break;
    case FUSED:
        ck_assert(c->n_rows == c->n_kv);
        q_stride = kv_stride = dq + 2 * dkv + c->pad;
        n_q = c->n_rows * q_stride;
        n_k = n_v = 0;
        qb = test_alloc_floats(n_q);
        for (int64_t t = 0; t < c->n_rows; t++)
            for (int64_t x = 0; x < q_stride; x++)
                qb[t * q_stride + x] = test_rng_float(&rng, x < dq + dkv ? c->qk_scale : c->v_scale);
        q = qb;
        k = qb + dq;
        v = qb + dq + dkv;
        break;
    default:
        q_stride = dq + c->pad;
        kv_stride = dkv + c->pad;
        n_q = c->n_rows * q_stride;
        n_k = n_v = c->n_kv * kv_stride;
        qb = test_alloc_floats(n_q);
        kb = test_alloc_floats(n_k);
        vb = test_alloc_floats(n_v);
        test_fill(&rng, qb, n_q, c->qk_scale);
        test_fill(&rng, kb, n_k, c->qk_scale);
        test_fill(&rng, vb, n_v, c->v_scale);
        if (c->rising_scores)
            for (int64_t j = 0; j < c->n_kv; j++)
                for (int64_t x = 0; x < dkv; x++)
                    kb[j * kv_stride + x] = (float)(4.0 * j / c->n_kv) * qb[x % dq] + test_rng_float(&rng, 0.1f);
        q = qb;
        k = kb;
        v = vb;
        break;
    }
    float *q_copy = test_alloc_floats(n_q), *k_copy = test_alloc_floats(n_k), *v_copy = test_alloc_floats(n_v);
    memcpy(q_copy, qb, sizeof(float) * (size_t)n_q);
    if (kb) memcpy(k_copy, kb, sizeof(float) * (size_t)n_k);
    if (vb) memcpy(v_copy, vb, sizeof(float) * (size_t)n_v);

    const int64_t n_out = c->n_rows * out_stride;
    double *ref = test_alloc_doubles(n_out), *allowed = test_alloc_doubles(n_out);
    float *outs[N_POOLS];
    vhk_attention_args a = {q, q_stride, k, v, kv_stride, NULL, out_stride, c->n_rows, c->n_kv,
                            c->n_heads, c->n_kv_heads, hd, c->first_position, c->causal,
                            1.0f / sqrtf((float)hd)};
    avx512_attention *scratch = avx512_attention_create(c->n_kv + c->extra_keys, dkv);
    ck_assert_ptr_nonnull(scratch);
    ck_assert_msg(avx512_attention_fits(scratch, &a), "%s: avx512_attention_fits refuses it", c->name);
    const double t_setup = now_s();
    for (int p = 0; p < N_POOLS; p++) {
        vh_thread_pool *pool = vh_thread_pool_create_openmp(pool_threads[p], 0);
        ck_assert_ptr_nonnull(pool);
        ck_assert_int_eq(vh_thread_pool_size(pool), pool_threads[p]);
        outs[p] = test_alloc_floats(n_out);
        for (int64_t i = 0; i < n_out; i++) outs[p][i] = SENTINEL;
        a.out = outs[p];
        avx512_attention_run(scratch, pool, &a);
        vh_thread_pool_destroy(pool);
    }
    const double t_kernel = now_s();
    reference(&a, ref, allowed);

    double worst = 0, worst_simple = 0, vmax = 0;
    for (int64_t j = 0; j < c->n_kv; j++)
        for (int64_t x = 0; x < dkv; x++) vmax = fmax(vmax, fabs((double)v[j * kv_stride + x]));
    int64_t worst_at = -1, pad_touched = 0, not_finite = 0;
    for (int64_t r = 0; r < c->n_rows; r++) {
        for (int64_t x = 0; x < out_stride; x++) {
            const int64_t o = r * out_stride + x;
            if (x >= dq) {
                pad_touched += memcmp(&outs[0][o], &(float){SENTINEL}, sizeof(float)) != 0;
                continue;
            }
            not_finite += !isfinite(outs[0][o]);
            const double err = fabs(outs[0][o] - ref[o]), ratio = err / allowed[o];
            if (!(ratio <= worst)) {
                worst = ratio;
                worst_at = o;
            }
            worst_simple = fmax(worst_simple, err / (1e-5 * (1 + vmax)));
        }
    }
    printf("%-58s worst %.3f of the bound (%.4f of 1e-5 (1 + max|v|)); kernel x3 %.2f s, reference %.2f s\n",
           c->name, worst, worst_simple, t_kernel - t_setup, now_s() - t_kernel);
    fflush(stdout);
    ck_assert_msg(not_finite == 0, "%s: %lld outputs not finite", c->name, (long long)not_finite);
    ck_assert_msg(worst <= 1.0,
                  "%s: error %.3g x the bound at row %lld head %lld d %lld (got %.9g want %.9g, bound %.3g)",
                  c->name, worst, (long long)(worst_at / out_stride), (long long)(worst_at % out_stride / hd),
                  (long long)(worst_at % out_stride % hd), worst_at >= 0 ? outs[0][worst_at] : 0.0,
                  worst_at >= 0 ? ref[worst_at] : 0.0, worst_at >= 0 ? allowed[worst_at] : 0.0);
    ck_assert_msg(pad_touched == 0, "%s: wrote %lld floats of the out rows' padding", c->name, (long long)pad_touched);
    for (int p = 1; p < N_POOLS; p++)
        ck_assert_msg(memcmp(outs[0], outs[p], (size_t)n_out * sizeof(float)) == 0,
                      "%s: %d threads give different bits from 1", c->name, pool_threads[p]);
    ck_assert_msg(memcmp(q_copy, qb, sizeof(float) * (size_t)n_q) == 0, "%s: q's buffer changed", c->name);
    ck_assert_msg(!kb || memcmp(k_copy, kb, sizeof(float) * (size_t)n_k) == 0, "%s: k changed", c->name);
    ck_assert_msg(!vb || memcmp(v_copy, vb, sizeof(float) * (size_t)n_v) == 0, "%s: v changed", c->name);

    avx512_attention_destroy(scratch);
    for (int p = 0; p < N_POOLS; p++) free(outs[p]);
    free(ref); free(allowed); free(qb); free(kb); free(vb); free(q_copy); free(k_copy); free(v_copy);
}

/* name, rows, n_kv, heads, kv_heads, hd, first, causal, layout, pad, qk, v, rising, extra_keys */
static const attn_case cases[] = {
    {"Llama-2-7B: 276 rows causal, 32 heads x 128", 276, 276, 32, 32, 128, 0, 1, PACKED, 0, 2.0f, 8.0f, 0, 0},
    {"continuing a cache: first_position 40, 64 rows, n_kv 104", 64, 104, 32, 32, 128, 40, 1, EXECUTOR, 0,
     4.0f, 8.0f, 0, 4096 - 104},
    {"GQA 8/2, hd 64, 33 rows (not a multiple of 8), padded", 33, 33, 8, 2, 64, 0, 1, PACKED, 3, 8.0f, 8.0f, 0, 50},
    {"non-causal, 16 rows, n_kv 50, hd 16, padded", 16, 50, 4, 4, 16, 0, 0, PACKED, 1, 8.0f, 8.0f, 0, 0},
    {"1124 rows causal, 4 heads x 64 (flat softmax)", 1124, 1124, 4, 4, 64, 0, 1, PACKED, 0, 1.0f, 8.0f, 0, 0},
    {"executor layout: q in q|k|v rows, KV cache, GQA 32/8", 40, 57, 32, 8, 128, 17, 1, EXECUTOR, 5, 8.0f,
     8.0f, 0, 7},
    {"fused q|k|v rows for q, k and v, GQA 4/2, non-causal", 48, 48, 4, 2, 32, 0, 0, FUSED, 7, 8.0f, 8.0f, 0, 0},
    {"fused q|k|v rows, causal, 21 rows", 21, 21, 6, 6, 48, 0, 1, FUSED, 1, 3.0f, 8.0f, 0, 11},
    {"causal window clamped to n_kv (first 8, 20 rows, n_kv 24)", 20, 24, 2, 2, 16, 8, 1, PACKED, 0, 8.0f, 8.0f,
     0, 0},
    {"rising max in every key block, n_kv 300, MQA 2/1", 16, 300, 2, 1, 32, 0, 0, PACKED, 2, 1.0f, 8.0f, 1, 0},
    {"SigLIP: 256 tokens, 16 heads x 72 (masked lanes), non-causal", 256, 256, 16, 16, 72, 0, 0, FUSED, 0, 2.0f,
     8.0f, 0, 0},
    {"DINOv2-L: 257 tokens, 16 heads x 64, non-causal", 257, 257, 16, 16, 64, 0, 0, FUSED, 0, 2.0f, 8.0f, 0, 0},
    {"odd head size 40, 33 rows, causal", 33, 33, 3, 3, 40, 0, 1, PACKED, 1, 4.0f, 8.0f, 0, 0},
};

START_TEST(test_avx512_attention_cases)
{
    run_case(&cases[_i], 300 + (uint64_t)_i);
}
END_TEST

START_TEST(test_avx512_attention_fits)
{
    avx512_attention *a = avx512_attention_create(100, 4 * 64); /* 112 keys (16s) of 256 floats */
    ck_assert_ptr_nonnull(a);
    float dummy[16] = {0};
    const vhk_attention_args base = {dummy, 256, dummy, dummy, 256, dummy, 256, AVX512_ATTENTION_MIN_ROWS,
                                     100, 4, 4, 64, 0, 1, 0.125f};
    vhk_attention_args g = base;
    ck_assert(avx512_attention_fits(a, &g));
    g.n_rows = AVX512_ATTENTION_MIN_ROWS - 1;
    ck_assert_msg(!avx512_attention_fits(a, &g), "takes %d rows", AVX512_ATTENTION_MIN_ROWS - 1);
    g.n_rows = 1;
    ck_assert_msg(!avx512_attention_fits(a, &g), "takes a decode step");
    g = base;
    g.n_rows = 1000;
    ck_assert(avx512_attention_fits(a, &g));
    g = base;
    g.n_heads = g.n_kv_heads = 2;
    g.head_dim = 72; /* SigLIP's heads: any size is taken (the last lanes masked) */
    ck_assert_msg(avx512_attention_fits(a, &g), "refuses head_dim 72");
    g.head_dim = 8;
    ck_assert_msg(avx512_attention_fits(a, &g), "refuses head_dim 8");
    g.head_dim = 0;
    ck_assert_msg(!avx512_attention_fits(a, &g), "takes head_dim 0");
    g.n_heads = g.n_kv_heads = 4;
    g.head_dim = 16;
    ck_assert(avx512_attention_fits(a, &g));
    g = base;
    g.n_kv = 112; /* the capacity, rounded up to 16 keys */
    ck_assert(avx512_attention_fits(a, &g));
    g.n_kv = 113;
    ck_assert_msg(!avx512_attention_fits(a, &g), "takes 113 keys into a scratch of 112");
    g.n_kv = 4096;
    ck_assert_msg(!avx512_attention_fits(a, &g), "takes 4096 keys into a scratch of 112");
    g = base;
    g.n_heads = g.n_kv_heads = 8; /* 512 floats a KV row, the scratch was made for 256 */
    ck_assert_msg(!avx512_attention_fits(a, &g), "takes KV rows wider than the scratch's");
    g = base;
    g.n_heads = 6; /* over 4 KV heads */
    ck_assert_msg(!avx512_attention_fits(a, &g), "takes 6 heads over 4 KV heads");
    g = base;
    ck_assert_msg(!avx512_attention_fits(NULL, &g), "takes a NULL scratch");
    avx512_attention_destroy(a);
    avx512_attention_destroy(NULL);
}
END_TEST

static Suite *avx512_attention_suite(void)
{
    Suite *s = suite_create("avx512_attention");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_avx512_attention_cases, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, test_avx512_attention_fits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f")) {
        printf("skipped: this CPU has no AVX-512 F, which cpu_amx's attention needs\n");
        return 77;
    }
    return vh_test_run_suite(avx512_attention_suite());
}
