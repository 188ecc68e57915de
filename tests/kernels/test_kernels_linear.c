/*
 * vhk_linear (y = x W^T + b) against a float64 reference, for F32, F16 and BF16 weights, both
 * paths (the direct GEMM, with default and with tiny cache blocks; sgemm, through converted
 * panels for F16/BF16) forced by tuning, and the default choice; with and without bias, with row
 * strides on x and y (y a column slice of a wider buffer).
 *
 * Weights are decoded by the test's own bf16/f16 decoders, so the only error is fp32 summation:
 *  - direct GEMM (canonical order: 16 lanes of ceil(in/16) FMAs, a 4-level tree, + bias):
 *    |y - ref| <= (in/16 + 7) u M, with M = sum_k |x_k w_k| + |b|;
 *  - sgemm (order unknown): |y - ref| <= (in + 2) u M.
 * One dropped or doubled term moves y by |x_k w_k| ~ M / in, above both bounds for the sizes
 * used (in <= 515 for the sgemm bound; in = 4099 for the direct-GEMM bound).
 * Bits: the direct GEMM is identical for every pool size, cache blocking and ISA variant; each
 * path is identical for every pool size.
 */
#include <math.h>
#include <stdio.h>

#include "cpu_kernels.h"
#include "kernel_test_util.h"
#include "kernels_internal.h"
#include "test_support.h"

#define X_PAD 3
#define Y_PAD 5
#define Y_COL 2               /* y starts this many columns into each buffer row */
#define SENTINEL -4242.0f

typedef struct weights {
    vh_tensor_view view;
    double *value;            /* [out, in] decoded by the test */
} weights;

static weights make_weights(test_rng *rng, vh_dtype dtype, int64_t out, int64_t in)
{
    weights w;
    int64_t n = out * in;
    w.value = test_alloc_doubles(n);
    void *data = test_alloc((size_t)n * (dtype == VH_DTYPE_F32 ? 4 : 2));
    for (int64_t i = 0; i < n; i++) {
        if (dtype == VH_DTYPE_F32) {
            float f = test_rng_float(rng, 1.0f);
            ((float *)data)[i] = f;
            w.value[i] = f;
        } else if (dtype == VH_DTYPE_BF16) {
            uint16_t h = test_bf16_encode(test_rng_float(rng, 1.0f));
            ((uint16_t *)data)[i] = h;
            w.value[i] = test_bf16_value(h);
        } else {
            uint16_t h = test_f16_random(rng, 5, 15); /* |w| in [2^-10, 2) */
            ((uint16_t *)data)[i] = h;
            w.value[i] = test_f16_value(h);
        }
    }
    vh_tensor_view v = {data, dtype, 2, {out, in, 0, 0}, "test.weight", 0};
    w.view = v;
    return w;
}

static void free_weights(weights *w)
{
    free((void *)w->view.data);
    free(w->value);
}

typedef struct problem {
    int64_t rows, in, out;
    float *x;                 /* [rows, in + X_PAD] */
    float *bias;              /* [out] */
    double *dot, *mag;        /* [rows, out]: sum x w, sum |x w| */
} problem;

static problem make_problem(test_rng *rng, const weights *w, int64_t rows)
{
    problem p = {rows, w->view.shape[1], w->view.shape[0], NULL, NULL, NULL, NULL};
    int64_t xs = p.in + X_PAD;
    p.x = test_alloc_floats(rows * xs);
    test_fill(rng, p.x, rows * xs, 2.0f);
    p.bias = test_alloc_floats(p.out);
    test_fill(rng, p.bias, p.out, 1.0f);
    p.dot = test_alloc_doubles(rows * p.out);
    p.mag = test_alloc_doubles(rows * p.out);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t o = 0; o < p.out; o++) {
            double d = 0, m = 0;
            for (int64_t k = 0; k < p.in; k++) {
                double t = (double)p.x[r * xs + k] * w->value[o * p.in + k];
                d += t;
                m += fabs(t);
            }
            p.dot[r * p.out + o] = d;
            p.mag[r * p.out + o] = m;
        }
    }
    return p;
}

static void free_problem(problem *p)
{
    free(p->x); free(p->bias); free(p->dot); free(p->mag);
}

/* Run vhk_linear into a fresh sentinel-filled buffer; returns the buffer ([rows, y_stride]). */
static float *run_linear(vhk_matmul *m, const problem *p, const weights *w, int with_bias)
{
    int64_t ys = Y_COL + p->out + Y_PAD;
    float *buf = test_alloc_floats(p->rows * ys);
    for (int64_t i = 0; i < p->rows * ys; i++) buf[i] = SENTINEL;
    vhk_linear(m, p->x, p->in + X_PAD, p->rows, p->in, &w->view, with_bias ? p->bias : NULL,
               buf + Y_COL, ys);
    return buf;
}

/* Check a result buffer against the reference with the direct-GEMM bound (direct_bound) or the
 * sgemm bound; the padding columns must still hold the sentinel. */
static void check_result(const float *buf, const problem *p, int with_bias, int direct_bound,
                         const char *what)
{
    int64_t ys = Y_COL + p->out + Y_PAD, touched = 0, worst_at = -1;
    double worst = 0, factor = direct_bound ? (double)(p->in / 16 + 7) : (double)(p->in + 2);
    for (int64_t r = 0; r < p->rows; r++) {
        for (int64_t c = 0; c < ys; c++) {
            float got = buf[r * ys + c];
            int64_t o = c - Y_COL;
            if (o < 0 || o >= p->out) {
                touched += got != SENTINEL;
                continue;
            }
            double b = with_bias ? p->bias[o] : 0.0;
            double ref = p->dot[r * p->out + o] + b;
            double allowed = factor * FP32_U * (p->mag[r * p->out + o] + fabs(b)) + 1e-30;
            double e = fabs(got - ref) / allowed;
            if (!(e <= worst)) { worst = e; worst_at = r * p->out + o; }
        }
    }
    ck_assert_msg(worst <= 1.0, "%s (rows %lld, in %lld, out %lld): error %.3g x the tolerance at %lld",
                  what, (long long)p->rows, (long long)p->in, (long long)p->out, worst, (long long)worst_at);
    ck_assert_msg(touched == 0, "%s: wrote outside y's column slice", what);
}

/* Force a path: sgemm from `sgemm_min_rows` rows (huge: never), panels of `panel_rows`, and the
 * direct GEMM's cache blocks (0: its defaults). */
static void set_tuning(vhk_matmul *m, int64_t sgemm_min_rows, int64_t panel_rows, int64_t block_rows,
                       int64_t block_outputs)
{
    vhk_matmul_tuning t;
    vhk_matmul_get_tuning(m, &t);
    t.sgemm_min_rows = sgemm_min_rows;
    t.panel_rows = panel_rows;
    t.direct_block_rows = block_rows;
    t.direct_block_outputs = block_outputs;
    vhk_matmul_set_tuning(m, &t);
}

#define NEVER INT64_MAX

static const vh_dtype all_dtypes[] = {VH_DTYPE_F32, VH_DTYPE_F16, VH_DTYPE_BF16};
static const char *dtype_names[] = {"F32", "F16", "BF16"};
static const int64_t shapes[][2] = {{1, 3}, {17, 5}, {100, 130}, {515, 33}, {64, 257}}; /* in, out */
static const int64_t row_counts[] = {1, 2, 3, 7, 64, 300};

#define N_SHAPES (sizeof shapes / sizeof shapes[0])
#define N_ROWS (sizeof row_counts / sizeof row_counts[0])

/* Every dtype x shape x row count x path x bias, pool sizes NULL/1/2/3 bit-identical. */
START_TEST(test_linear_paths)
{
    vh_dtype dtype = all_dtypes[_i];
    test_rng rng = test_rng_seed(200 + (uint64_t)_i);
    vh_thread_pool *pools[4] = {NULL, vh_thread_pool_create(1), vh_thread_pool_create(2),
                                vh_thread_pool_create(3)};
    vhk_matmul *mm[4];
    for (int q = 0; q < 4; q++) {
        mm[q] = vhk_matmul_create(pools[q], 1024);
        ck_assert_ptr_nonnull(mm[q]);
    }
    for (size_t s = 0; s < N_SHAPES; s++) {
        weights w = make_weights(&rng, dtype, shapes[s][1], shapes[s][0]);
        for (size_t r = 0; r < N_ROWS; r++) {
            problem p = make_problem(&rng, &w, row_counts[r]);
            /* 0: direct, default blocks; 1: direct, 4-row x 8-output blocks; 2: sgemm, 16-row panels */
            for (int path = 0; path < 3; path++) {
                static const char *path_names[] = {"direct", "direct small blocks", "sgemm"};
                for (int q = 0; q < 4; q++) {
                    if (path == 0) set_tuning(mm[q], NEVER, 128, 0, 0);
                    if (path == 1) set_tuning(mm[q], NEVER, 128, 4, 8);
                    if (path == 2) set_tuning(mm[q], 1, 16, 0, 0);
                }
                for (int with_bias = 0; with_bias < 2; with_bias++) {
                    char what[96];
                    snprintf(what, sizeof what, "%s %s%s", dtype_names[_i], path_names[path],
                             with_bias ? " +bias" : "");
                    float *first = run_linear(mm[0], &p, &w, with_bias);
                    check_result(first, &p, with_bias, path < 2, what);
                    for (int q = 1; q < 4; q++) {
                        float *again = run_linear(mm[q], &p, &w, with_bias);
                        ck_assert_msg(memcmp(first, again, (size_t)(p.rows * (Y_COL + p.out + Y_PAD)) *
                                                               sizeof(float)) == 0,
                                      "%s: pool %d gives different bits", what, q);
                        free(again);
                    }
                    free(first);
                }
            }
            free_problem(&p);
        }
        free_weights(&w);
    }
    for (int q = 0; q < 4; q++) {
        vhk_matmul_destroy(mm[q]);
        vh_thread_pool_destroy(pools[q]);
    }
}
END_TEST

/* The default configuration (whatever threshold and panel width it uses) is correct too. */
START_TEST(test_linear_defaults)
{
    test_rng rng = test_rng_seed(300);
    vh_thread_pool *pool = vh_thread_pool_create(2);
    vhk_matmul *mm = vhk_matmul_create(pool, 515);
    for (int d = 0; d < 3; d++) {
        weights w = make_weights(&rng, all_dtypes[d], 300, 515);
        for (size_t r = 0; r < N_ROWS; r++) {
            problem p = make_problem(&rng, &w, row_counts[r]);
            float *y = run_linear(mm, &p, &w, 1);
            check_result(y, &p, 1, 0, dtype_names[d]);
            free(y);
            free_problem(&p);
        }
        free_weights(&w);
    }
    vhk_matmul_destroy(mm);
    vh_thread_pool_destroy(pool);
}
END_TEST

/* All instruction-set variants of the direct GEMM give identical bits. */
START_TEST(test_direct_gemm_isa_variants)
{
    static const int64_t rows_list[] = {1, 3, 7};
    static const int64_t isa_shapes[][2] = {{17, 5}, {100, 13}, {515, 9}, {16, 4}, {33, 2}};
    test_rng rng = test_rng_seed(400);
    for (int d = 0; d < 3; d++) {
        for (size_t s = 0; s < sizeof isa_shapes / sizeof isa_shapes[0]; s++) {
            weights w = make_weights(&rng, all_dtypes[d], isa_shapes[s][1], isa_shapes[s][0]);
            for (size_t r = 0; r < 3; r++) {
                problem p = make_problem(&rng, &w, rows_list[r]);
                int64_t ys = p.out + 1;
                float *ref_bits = NULL;
                for (int isa = VHK_ISA_GENERIC; isa < VHK_ISA_COUNT; isa++) {
                    if (!vhk_isa_supported((vhk_isa)isa)) continue;
                    float *y = test_alloc_floats(p.rows * ys);
                    vhk_gemm_direct g = {p.x, p.in + X_PAD, p.rows, p.in, w.view.data, w.view.dtype,
                                        p.bias, y, ys};
                    vhk_gemm_direct_run((vhk_isa)isa, &g, 0, p.out);
                    for (int64_t i = 0; i < p.rows; i++) y[i * ys + p.out] = SENTINEL;
                    if (!ref_bits) {
                        ref_bits = y;
                        continue;
                    }
                    ck_assert_msg(memcmp(ref_bits, y, (size_t)(p.rows * ys) * sizeof(float)) == 0,
                                  "%s: %s differs from generic (in %lld, out %lld, rows %lld)",
                                  dtype_names[d], vhk_isa_name((vhk_isa)isa), (long long)p.in,
                                  (long long)p.out, (long long)p.rows);
                    free(y);
                }
                free(ref_bits);
                free_problem(&p);
            }
            free_weights(&w);
        }
    }
}
END_TEST

/* The variant each architecture must run: NEON on aarch64 (baseline there, so always), never an
 * x86 one off x86 (and NEON never on x86), so that the variants test above really compares NEON
 * with portable C when it runs on aarch64 (natively or under qemu-user). */
START_TEST(test_isa_compiled_in)
{
#if defined(__aarch64__)
    ck_assert(vhk_isa_supported(VHK_ISA_NEON));
    ck_assert_int_eq(vhk_isa_detect(), VHK_ISA_NEON);
    ck_assert_str_eq(vhk_isa_name(vhk_isa_detect()), "neon");
    ck_assert(!vhk_isa_supported(VHK_ISA_AVX2) && !vhk_isa_supported(VHK_ISA_AVX512));
#elif defined(__x86_64__)
    ck_assert(!vhk_isa_supported(VHK_ISA_NEON));
    ck_assert(vhk_isa_detect() != VHK_ISA_NEON);
#endif
    ck_assert(vhk_isa_supported(VHK_ISA_GENERIC));
    ck_assert(!vhk_isa_supported(VHK_ISA_COUNT));
}
END_TEST

/* A long dot product through the direct GEMM: its tighter bound still holds at in = 4099. */
START_TEST(test_direct_gemm_long_rows)
{
    test_rng rng = test_rng_seed(500);
    vh_thread_pool *pool = vh_thread_pool_create(3);
    vhk_matmul *mm = vhk_matmul_create(pool, 4099);
    set_tuning(mm, NEVER, 128, 0, 0);
    for (int d = 0; d < 3; d++) {
        weights w = make_weights(&rng, all_dtypes[d], 20, 4099);
        problem p = make_problem(&rng, &w, 2);
        float *y = run_linear(mm, &p, &w, 1);
        check_result(y, &p, 1, 1, dtype_names[d]);
        free(y);
        free_problem(&p);
        free_weights(&w);
    }
    vhk_matmul_destroy(mm);
    vh_thread_pool_destroy(pool);
}
END_TEST

/* Inputs wider than max_in: narrower panels (in = 100 -> 81-row panels) or, when panels would be
 * too narrow (in = 1000), the direct GEMM. Results stay correct either way. */
START_TEST(test_linear_wider_than_scratch)
{
    test_rng rng = test_rng_seed(600);
    vh_thread_pool *pool = vh_thread_pool_create(2);
    vhk_matmul *mm = vhk_matmul_create(pool, 64);
    set_tuning(mm, 1, 128, 0, 0);
    static const int64_t ins[] = {100, 1000};
    for (int i = 0; i < 2; i++) {
        weights w = make_weights(&rng, VH_DTYPE_BF16, 200, ins[i]);
        problem p = make_problem(&rng, &w, 70);
        float *y = run_linear(mm, &p, &w, 1);
        check_result(y, &p, 1, 0, "BF16 wider than scratch");
        free(y);
        free_problem(&p);
        free_weights(&w);
    }
    vhk_matmul_destroy(mm);
    vh_thread_pool_destroy(pool);
}
END_TEST

static Suite *linear_suite(void)
{
    Suite *s = suite_create("kernels_linear");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_linear_paths, 0, 3);
    tcase_add_test(tc, test_linear_defaults);
    tcase_add_test(tc, test_isa_compiled_in);
    tcase_add_test(tc, test_direct_gemm_isa_variants);
    tcase_add_test(tc, test_direct_gemm_long_rows);
    tcase_add_test(tc, test_linear_wider_than_scratch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return vh_test_run_suite(linear_suite());
}
