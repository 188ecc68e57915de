/*
 * cpu_generic kernels other than attention and linear: norms, activations, adds, RoPE, patches,
 * dtype conversion, embedding gathers, argmax. Each against a float64 reference written here;
 * each pool-aware kernel also gives identical bits with no pool and pools of 1, 2 and 3 threads.
 *
 * Tolerances are in units of FP32_U = 2^-24 (fp32 unit roundoff) and count the fp32 roundings
 * the kernel performs after exact inputs; the references themselves are float64 (error ~1e-16).
 */
#include <math.h>
#include <stdio.h>

#include "cpu_kernels.h"
#include "kernel_test_util.h"
#include "kernels_internal.h"
#include "test_support.h"

#define N_POOLS 4 /* NULL, 1, 2, 3 threads */

typedef struct pools {
    vh_thread_pool *p[N_POOLS];
} pools;

static pools pools_create(void)
{
    pools ps = {{NULL, vh_thread_pool_create(1), vh_thread_pool_create(2), vh_thread_pool_create(3)}};
    for (int i = 1; i < N_POOLS; i++) ck_assert_ptr_nonnull(ps.p[i]);
    return ps;
}

static void pools_destroy(pools *ps)
{
    for (int i = 0; i < N_POOLS; i++) vh_thread_pool_destroy(ps->p[i]);
}

static int same_bits(const float *a, const float *b, int64_t n)
{
    return n == 0 || memcmp(a, b, (size_t)n * sizeof(float)) == 0;
}

/* Worst |got - ref| / allowed over n values; <= 1 passes. NaN counts as a failure. */
typedef struct error_check {
    double worst;
    int64_t at;
} error_check;

static void error_update(error_check *e, int64_t i, double got, double ref, double allowed)
{
    double ratio = fabs(got - ref) / allowed;
    if (!(ratio <= e->worst)) {
        e->worst = ratio;
        e->at = i;
    }
}

#define ASSERT_WITHIN(e, what)                                                                 \
    ck_assert_msg((e).worst <= 1.0, "%s: error %.3g x the tolerance at index %lld", what,        \
                  (e).worst, (long long)(e).at)

/* Row/dim shapes used by the row-wise kernels: odd sizes, dims not multiples of 8. */
static const int64_t row_shapes[][2] = {{1, 1}, {1, 7}, {2, 1024}, {3, 37}, {7, 1000}, {64, 129},
                                        {300, 64}};
#define N_ROW_SHAPES (sizeof row_shapes / sizeof row_shapes[0])

/* ------------------------------------------------------------------------------------------------
 * LayerNorm: computed in double and rounded once, so within one ulp of the reference.
 */
START_TEST(test_layernorm)
{
    pools ps = pools_create();
    test_rng rng = test_rng_seed(1);
    for (size_t s = 0; s < N_ROW_SHAPES; s++) {
        int64_t rows = row_shapes[s][0], dim = row_shapes[s][1], n = rows * dim;
        float *x = test_alloc_floats(n), *gamma = test_alloc_floats(dim), *beta = test_alloc_floats(dim);
        float *y[N_POOLS];
        for (int64_t i = 0; i < n; i++) x[i] = 3.0f + test_rng_float(&rng, 2.0f); /* offset mean */
        test_fill(&rng, gamma, dim, 1.5f);
        test_fill(&rng, beta, dim, 0.5f);
        for (int p = 0; p < N_POOLS; p++) {
            y[p] = test_alloc_floats(n);
            vhk_layernorm(ps.p[p], x, y[p], rows, dim, gamma, beta, 1e-6f);
        }
        error_check e = {0, -1};
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * dim;
            double mean = 0, var = 0;
            for (int64_t c = 0; c < dim; c++) mean += xr[c];
            mean /= (double)dim;
            for (int64_t c = 0; c < dim; c++) var += (xr[c] - mean) * (xr[c] - mean);
            var /= (double)dim;
            for (int64_t c = 0; c < dim; c++) {
                double normed = (xr[c] - mean) / sqrt(var + 1e-6);
                double ref = normed * gamma[c] + beta[c];
                double allowed = FP32_EPS * fabs(ref) + 1e-12 * (fabs(normed * gamma[c]) + fabs(beta[c])) + 1e-30;
                error_update(&e, r * dim + c, y[0][r * dim + c], ref, allowed);
            }
        }
        ASSERT_WITHIN(e, "layernorm");
        for (int p = 1; p < N_POOLS; p++) ck_assert(same_bits(y[0], y[p], n));
        /* in place gives the same bits */
        vhk_layernorm(ps.p[2], x, x, rows, dim, gamma, beta, 1e-6f);
        ck_assert(same_bits(x, y[0], n));
        for (int p = 0; p < N_POOLS; p++) free(y[p]);
        free(x); free(gamma); free(beta);
    }
    pools_destroy(&ps);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * RMSNorm: the kernel rounds rsqrt, x * r and w * (x * r): three fp32 roundings -> 4 u.
 */
START_TEST(test_rmsnorm)
{
    pools ps = pools_create();
    test_rng rng = test_rng_seed(2);
    for (size_t s = 0; s < N_ROW_SHAPES; s++) {
        int64_t rows = row_shapes[s][0], dim = row_shapes[s][1], n = rows * dim;
        float *x = test_alloc_floats(n), *w = test_alloc_floats(dim), *y[N_POOLS];
        test_fill(&rng, x, n, 4.0f);
        for (int64_t c = 0; c < dim; c++) x[c] *= 1e-3f; /* row 0 small: eps matters there */
        test_fill(&rng, w, dim, 2.0f);
        for (int p = 0; p < N_POOLS; p++) {
            y[p] = test_alloc_floats(n);
            vhk_rmsnorm(ps.p[p], x, y[p], rows, dim, w, 1e-5f);
        }
        error_check e = {0, -1};
        for (int64_t r = 0; r < rows; r++) {
            const float *xr = x + r * dim;
            double ms = 0;
            for (int64_t c = 0; c < dim; c++) ms += (double)xr[c] * xr[c];
            ms /= (double)dim;
            for (int64_t c = 0; c < dim; c++) {
                double ref = w[c] * (xr[c] / sqrt(ms + 1e-5));
                error_update(&e, r * dim + c, y[0][r * dim + c], ref, 4 * FP32_U * fabs(ref) + 1e-30);
            }
        }
        ASSERT_WITHIN(e, "rmsnorm");
        for (int p = 1; p < N_POOLS; p++) ck_assert(same_bits(y[0], y[p], n));
        for (int p = 0; p < N_POOLS; p++) free(y[p]);
        free(x); free(w);
    }
    pools_destroy(&ps);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Activations and adds over flat arrays of awkward lengths.
 */
static const int64_t flat_lengths[] = {1, 5, 4095, 4096, 4097, 100003};
#define N_FLAT (sizeof flat_lengths / sizeof flat_lengths[0])

/* GELU: erff (<= 2 ulp) and three roundings, relative 4u; when erf(x/sqrt2) is near -1 the sum
 * 1 + erf cancels, leaving erf's absolute error (<= 2u) times 0.5|x|: so also 2u |x| absolute.
 * (PyTorch evaluates the same formula in fp32 and shares that cancellation.) */
START_TEST(test_gelu_exact)
{
    pools ps = pools_create();
    test_rng rng = test_rng_seed(3);
    for (size_t s = 0; s < N_FLAT; s++) {
        int64_t n = flat_lengths[s];
        float *x = test_alloc_floats(n), *y[N_POOLS];
        test_fill(&rng, x, n, 8.0f);
        x[0] = n > 1 ? -0.0f : 0.0f;
        if (n > 3) { x[1] = 30.0f; x[2] = -30.0f; x[3] = 1e-30f; }
        for (int p = 0; p < N_POOLS; p++) {
            y[p] = test_alloc_floats(n);
            memcpy(y[p], x, (size_t)n * sizeof(float));
            vhk_gelu_exact(ps.p[p], y[p], n);
        }
        error_check e = {0, -1};
        for (int64_t i = 0; i < n; i++) {
            double ref = 0.5 * x[i] * (1.0 + erf(x[i] / sqrt(2.0)));
            error_update(&e, i, y[0][i], ref, 4 * FP32_U * fabs(ref) + 2 * FP32_U * fabs(x[i]) + 1e-40);
        }
        ASSERT_WITHIN(e, "gelu");
        for (int p = 1; p < N_POOLS; p++) ck_assert(same_bits(y[0], y[p], n));
        for (int p = 0; p < N_POOLS; p++) free(y[p]);
        free(x);
    }
    pools_destroy(&ps);
}
END_TEST

/* SiLU * up: expf (1 ulp), 1 + e, divide, multiply: 6 u relative. */
START_TEST(test_silu_mul)
{
    pools ps = pools_create();
    test_rng rng = test_rng_seed(4);
    for (size_t s = 0; s < N_FLAT; s++) {
        int64_t n = flat_lengths[s];
        float *g = test_alloc_floats(n), *u = test_alloc_floats(n), *y[N_POOLS];
        test_fill(&rng, g, n, 20.0f);
        test_fill(&rng, u, n, 3.0f);
        for (int p = 0; p < N_POOLS; p++) {
            y[p] = test_alloc_floats(n);
            vhk_silu_mul(ps.p[p], g, u, y[p], n);
        }
        error_check e = {0, -1};
        for (int64_t i = 0; i < n; i++) {
            double ref = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
            error_update(&e, i, y[0][i], ref, 6 * FP32_U * fabs(ref) + 1e-40);
        }
        ASSERT_WITHIN(e, "silu_mul");
        for (int p = 1; p < N_POOLS; p++) ck_assert(same_bits(y[0], y[p], n));
        /* out may alias gate */
        float *alias = test_alloc_floats(n);
        memcpy(alias, g, (size_t)n * sizeof(float));
        vhk_silu_mul(ps.p[3], alias, u, alias, n);
        ck_assert(same_bits(alias, y[0], n));
        for (int p = 0; p < N_POOLS; p++) free(y[p]);
        free(alias); free(g); free(u);
    }
    pools_destroy(&ps);
}
END_TEST

/* y += x and y += bias: one rounding (u); y += s * x: two (2u of |y| + |s x|). */
START_TEST(test_adds)
{
    pools ps = pools_create();
    test_rng rng = test_rng_seed(5);
    for (size_t s = 0; s < N_ROW_SHAPES; s++) {
        int64_t rows = row_shapes[s][0], dim = row_shapes[s][1], n = rows * dim;
        float *y0 = test_alloc_floats(n), *x = test_alloc_floats(n), *vec = test_alloc_floats(dim);
        float *y[N_POOLS];
        test_fill(&rng, y0, n, 10.0f);
        test_fill(&rng, x, n, 10.0f);
        test_fill(&rng, vec, dim, 2.0f);
        for (int op = 0; op < 4; op++) { /* add, add_scaled, add_scaled(NULL), add_bias */
            for (int p = 0; p < N_POOLS; p++) {
                y[p] = test_alloc_floats(n);
                memcpy(y[p], y0, (size_t)n * sizeof(float));
                if (op == 0) vhk_add(ps.p[p], y[p], x, n);
                if (op == 1) vhk_add_scaled(ps.p[p], y[p], x, vec, rows, dim);
                if (op == 2) vhk_add_scaled(ps.p[p], y[p], x, NULL, rows, dim);
                if (op == 3) vhk_add_bias(ps.p[p], y[p], vec, rows, dim);
            }
            error_check e = {0, -1};
            for (int64_t i = 0; i < n; i++) {
                double add = op == 1 ? (double)vec[i % dim] * x[i] : op == 3 ? vec[i % dim] : x[i];
                double ref = y0[i] + add;
                error_update(&e, i, y[0][i], ref, 2 * FP32_U * (fabs(y0[i]) + fabs(add)) + 1e-40);
            }
            static const char *names[] = {"add", "add_scaled", "add_scaled(NULL)", "add_bias"};
            ASSERT_WITHIN(e, names[op]);
            for (int p = 1; p < N_POOLS; p++) ck_assert(same_bits(y[0], y[p], n));
            for (int p = 0; p < N_POOLS; p++) free(y[p]);
        }
        free(y0); free(x); free(vec);
    }
    pools_destroy(&ps);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * RoPE. The reference takes the rotation angle as the transformers recipe defines it: inv_freq =
 * 1 / theta^(2i/d) and pos * inv_freq, both in float32; everything after that (cos, sin, the
 * rotation) in double. The kernel then differs only by cosf/sinf (1 ulp each) and the rotation's
 * roundings: 4u of |a| + |b|. A kernel that took the angle in double would be off by up to half
 * an ulp of the angle (0.004 rad at position 100000) and fail.
 */
static void rope_reference(const float *x, double *ref, int64_t row_stride, int64_t rows,
                           int64_t n_heads, int64_t hd, const int32_t *pos, float theta)
{
    int64_t half = hd / 2;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < half; i++) {
            volatile float exponent = (float)(2 * i) / (float)hd;
            volatile float inv_freq = 1.0f / powf(theta, exponent);
            volatile float angle = (float)pos[r] * inv_freq;
            double c = cos((double)angle), s = sin((double)angle);
            for (int64_t h = 0; h < n_heads; h++) {
                int64_t o = r * row_stride + h * hd;
                double a = x[o + i], b = x[o + i + half];
                ref[o + i] = a * c - b * s;
                ref[o + i + half] = b * c + a * s;
            }
        }
    }
}

START_TEST(test_rope)
{
    static const int64_t cases[][4] = { /* rows, n_heads, head_dim, stride_extra */
        {1, 1, 2, 0}, {3, 4, 8, 5}, {7, 32, 128, 0}, {64, 2, 64, 128}, {2, 3, 6, 1}};
    static const float thetas[] = {10000.0f, 500000.0f};
    pools ps = pools_create();
    test_rng rng = test_rng_seed(6);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int t = 0; t < 2; t++) {
            int64_t rows = cases[c][0], heads = cases[c][1], hd = cases[c][2];
            int64_t stride = heads * hd + cases[c][3], n = rows * stride;
            float *x = test_alloc_floats(n), *y[N_POOLS];
            double *ref = test_alloc_doubles(n);
            int32_t *pos = test_alloc((size_t)rows * sizeof(int32_t));
            test_fill(&rng, x, n, 2.0f);
            for (int64_t r = 0; r < rows; r++) pos[r] = (int32_t)(test_rng_u64(&rng) % 5000);
            pos[0] = 0;
            if (rows > 1) pos[1] = 100000;
            for (int64_t i = 0; i < n; i++) ref[i] = x[i]; /* the gaps between rows stay as they are */
            rope_reference(x, ref, stride, rows, heads, hd, pos, thetas[t]);
            for (int p = 0; p < N_POOLS; p++) {
                y[p] = test_alloc_floats(n);
                memcpy(y[p], x, (size_t)n * sizeof(float));
                vhk_rope(ps.p[p], y[p], stride, rows, heads, hd, pos, thetas[t]);
            }
            error_check e = {0, -1};
            for (int64_t r = 0; r < rows; r++) {
                for (int64_t col = 0; col < stride; col++) {
                    int64_t i = r * stride + col;
                    double allowed = 1e-40;
                    if (col < heads * hd) { /* |a| + |b| of the pair this value came from */
                        int64_t in_head = col % hd, base = i - in_head, k = in_head % (hd / 2);
                        allowed += 4 * FP32_U * (fabs(x[base + k]) + fabs(x[base + k + hd / 2]));
                    }
                    error_update(&e, i, y[0][i], ref[i], allowed);
                }
            }
            ASSERT_WITHIN(e, "rope");
            for (int p = 1; p < N_POOLS; p++) ck_assert(same_bits(y[0], y[p], n));
            for (int p = 0; p < N_POOLS; p++) free(y[p]);
            free(x); free(ref); free(pos);
        }
    }
    pools_destroy(&ps);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Patches: im2col rows times a Conv2d weight [D, 3, P, P] flattened must equal the direct
 * stride-P convolution at every patch (all products of exact small integers: exact in double).
 */
START_TEST(test_im2col_matches_conv)
{
    static const int64_t cases[][2] = {{12, 4}, {28, 14}, {8, 1}, {5, 5}};
    test_rng rng = test_rng_seed(7);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t S = cases[c][0], P = cases[c][1], grid = S / P, D = 3, K = 3 * P * P;
        float *pix = test_alloc_floats(3 * S * S), *w = test_alloc_floats(D * K);
        float *cols = test_alloc_floats(grid * grid * K);
        for (int64_t i = 0; i < 3 * S * S; i++) pix[i] = (float)(int)(test_rng_u64(&rng) % 17) - 8;
        for (int64_t i = 0; i < D * K; i++) w[i] = (float)(int)(test_rng_u64(&rng) % 9) - 4;
        vhk_im2col_patches(pix, S, P, cols);
        int64_t bad = 0;
        for (int64_t d = 0; d < D; d++) {
            for (int64_t gy = 0; gy < grid; gy++) {
                for (int64_t gx = 0; gx < grid; gx++) {
                    double conv = 0, via_cols = 0;
                    for (int64_t ch = 0; ch < 3; ch++)
                        for (int64_t ky = 0; ky < P; ky++)
                            for (int64_t kx = 0; kx < P; kx++)
                                conv += (double)w[((d * 3 + ch) * P + ky) * P + kx] *
                                        pix[(ch * S + gy * P + ky) * S + gx * P + kx];
                    const float *row = cols + (gy * grid + gx) * K;
                    for (int64_t k = 0; k < K; k++) via_cols += (double)row[k] * w[d * K + k];
                    bad += conv != via_cols;
                }
            }
        }
        ck_assert_msg(bad == 0, "im2col S=%lld P=%lld: %lld outputs differ from the convolution",
                      (long long)S, (long long)P, (long long)bad);
        free(pix); free(w); free(cols);
    }
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Conversion: every one of the 65536 bf16 and f16 bit patterns (subnormals, +-0, inf, NaN) with
 * each instruction-set variant and the public function, at offsets and lengths that exercise
 * vector bodies and scalar tails; F32 is a copy. Exact: NaN must stay NaN, others bit-equal.
 */
static int64_t count_convert_mismatches(const uint16_t *src, int64_t n, vh_dtype dtype, const float *got)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double ref = dtype == VH_DTYPE_BF16 ? test_bf16_value(src[i]) : test_f16_value(src[i]);
        if (isnan(ref)) bad += !isnan(got[i]);
        else bad += (double)got[i] != ref || !signbit(got[i]) != !signbit(ref);
    }
    return bad;
}

START_TEST(test_convert_all_patterns)
{
    uint16_t *all = test_alloc(65536 * sizeof(uint16_t));
    float *out = test_alloc_floats(65536);
    for (int64_t i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    static const vh_dtype dtypes[] = {VH_DTYPE_BF16, VH_DTYPE_F16};
    static const int64_t lengths[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 1000};
    for (int d = 0; d < 2; d++) {
        for (int isa = VHK_ISA_GENERIC; isa <= VHK_ISA_COUNT; isa++) {
            int public_api = isa == VHK_ISA_COUNT;
            if (!public_api && !vhk_isa_supported((vhk_isa)isa)) continue;
            if (public_api) vhk_convert_to_f32(all, dtypes[d], out, 65536);
            else vhk_convert_to_f32_isa((vhk_isa)isa, all, dtypes[d], out, 65536);
            ck_assert_int_eq(count_convert_mismatches(all, 65536, dtypes[d], out), 0);
            for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
                int64_t n = lengths[l], offset = 3 + (int64_t)l * 4001;
                for (int64_t i = 0; i <= n; i++) out[i] = 12345.0f;
                if (public_api) vhk_convert_to_f32(all + offset, dtypes[d], out, n);
                else vhk_convert_to_f32_isa((vhk_isa)isa, all + offset, dtypes[d], out, n);
                ck_assert_int_eq(count_convert_mismatches(all + offset, n, dtypes[d], out), 0);
                ck_assert(out[n] == 12345.0f); /* nothing written past n */
            }
        }
    }
    float src[37], dst[37];
    test_rng rng = test_rng_seed(8);
    test_fill(&rng, src, 37, 100.0f);
    vhk_convert_to_f32(src, VH_DTYPE_F32, dst, 37);
    ck_assert(same_bits(src, dst, 37));
    free(all); free(out);
}
END_TEST

/* Embedding rows of each dtype; ids outside [0, V) give zero rows. */
START_TEST(test_embed_rows)
{
    enum { V = 50, D = 37, N = 9 };
    static const int32_t ids[N] = {0, 49, 7, -1, 50, 1000, 7, 3, -2147483647 - 1};
    test_rng rng = test_rng_seed(9);
    uint16_t bf[V * D], hf[V * D];
    float f32[V * D], out[N * D];
    for (int i = 0; i < V * D; i++) {
        f32[i] = test_rng_float(&rng, 4.0f);
        bf[i] = test_bf16_encode(f32[i]);
        hf[i] = test_f16_random(&rng, 1, 30);
    }
    for (int d = 0; d < 3; d++) {
        vh_dtype dtype = d == 0 ? VH_DTYPE_F32 : d == 1 ? VH_DTYPE_BF16 : VH_DTYPE_F16;
        const void *data = d == 0 ? (const void *)f32 : d == 1 ? (const void *)bf : (const void *)hf;
        vh_tensor_view table = {data, dtype, 2, {V, D, 0, 0}, "embed", 0};
        vhk_embed_rows(&table, ids, N, out);
        int64_t bad = 0;
        for (int i = 0; i < N; i++) {
            for (int c = 0; c < D; c++) {
                double ref = 0;
                if (ids[i] >= 0 && ids[i] < V) {
                    int k = ids[i] * D + c;
                    ref = d == 0 ? f32[k] : d == 1 ? test_bf16_value(bf[k]) : test_f16_value(hf[k]);
                }
                bad += (double)out[i * D + c] != ref;
            }
        }
        ck_assert_int_eq(bad, 0);
    }
}
END_TEST

START_TEST(test_argmax)
{
    float a[] = {1, 3, 2, 3, -INFINITY};
    ck_assert_int_eq(vhk_argmax(a, 5), 1);                      /* first of a tie */
    float b[] = {-INFINITY, -INFINITY};
    ck_assert_int_eq(vhk_argmax(b, 2), 0);
    float c[] = {1, NAN, 5, NAN};
    ck_assert_int_eq(vhk_argmax(c, 4), 1);                      /* first NaN, as torch */
    float d[] = {-5};
    ck_assert_int_eq(vhk_argmax(d, 1), 0);
    ck_assert_int_eq(vhk_argmax(d, 0), -1);
    float e[] = {0.0f, -0.0f, 1e-45f};
    ck_assert_int_eq(vhk_argmax(e, 3), 2);
    enum { N = 32064 };
    float *big = test_alloc_floats(N);
    test_rng rng = test_rng_seed(10);
    test_fill(&rng, big, N, 10.0f);
    int64_t best = 0;
    for (int64_t i = 1; i < N; i++) if (big[i] > big[best]) best = i;
    ck_assert_int_eq(vhk_argmax(big, N), best);
    big[N - 1] = 11.0f;
    ck_assert_int_eq(vhk_argmax(big, N), N - 1);
    free(big);
}
END_TEST

static Suite *pointwise_suite(void)
{
    Suite *s = suite_create("kernels_pointwise");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_layernorm);
    tcase_add_test(tc, test_rmsnorm);
    tcase_add_test(tc, test_gelu_exact);
    tcase_add_test(tc, test_silu_mul);
    tcase_add_test(tc, test_adds);
    tcase_add_test(tc, test_rope);
    tcase_add_test(tc, test_im2col_matches_conv);
    tcase_add_test(tc, test_convert_all_patterns);
    tcase_add_test(tc, test_embed_rows);
    tcase_add_test(tc, test_argmax);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return vh_test_run_suite(pointwise_suite());
}
