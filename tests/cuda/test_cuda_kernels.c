/*
 * The cuda backend's kernels (backends/cuda/cuda_kernels.h) against float64 references written
 * here. Exits 77 (skipped) without a CUDA device.
 *
 * Method, for every launcher: seeded random inputs (never zeros), every output buffer poisoned
 * (NaN bit patterns: 0x7FBB for bf16, 0x7FBADBAD for fp32 / int32) with GUARD poisoned elements
 * before and after it; after the launch (cudaGetLastError + cudaDeviceSynchronize checked) every
 * output element must have been written and be within tolerance, and every element the launch must
 * not write (guards, gaps between strided rows, other cache slots) must still hold its old bits.
 *
 * Tolerances. u = 2^-24 (fp32 unit roundoff). A bf16 result is compared with the reference rounded
 * to bf16 and may differ by one bf16 ulp (of |ref| + err32) plus the fp32 error bound err32 of the
 * kernel's computation (the fp32 value the kernel rounds may lie on the other side of a bf16
 * rounding boundary). fp32 results are compared with the reference directly, within err32. Each
 * test states its err32 and why; "exact" tests (conversions, copies, argmax) allow no difference.
 * The kernels may use 2-ulp library functions (CUDA's expf, erff, cosf, sinf: 2 ulp).
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_kernels.h"

#define U32 5.9604644775390625e-08 /* 2^-24 */
#define GUARD 256                  /* poisoned elements before and after every buffer */
#define POISON16 0x7FBBu
#define POISON32 0x7FBADBADu
#define MAX_REPORTS 8              /* failure lines printed per check */

/* ------------------------------------------------------------------------------------------------
 * Bookkeeping
 */

enum {
    K_RMS, K_LN, K_GELU, K_BIAS, K_RES, K_SILU, K_CVT, K_QKV, K_ROPE, K_ATT, K_EMB, K_ARGMAX, K_IM2COL, K_ASM,
    K_GATHER, K_GEMV, K_COUNT
};

typedef struct kstat {
    const char *name;
    long checks;      /* test cases */
    long values;      /* values compared */
    double max_abs;   /* largest |result - bf16/fp32(reference)| */
    double max_ratio; /* largest difference / allowed */
} kstat;

static kstat g_stats[K_COUNT] = {
    {"vhc_rmsnorm_bf16", 0, 0, 0, 0},   {"vhc_layernorm_bf16", 0, 0, 0, 0}, {"vhc_bias_gelu_bf16", 0, 0, 0, 0},
    {"vhc_bias_add_f32", 0, 0, 0, 0},   {"vhc_residual_add", 0, 0, 0, 0},   {"vhc_silu_mul_bf16", 0, 0, 0, 0},
    {"vhc_f32_to_bf16", 0, 0, 0, 0},    {"vhc_vit_qkv_split", 0, 0, 0, 0},  {"vhc_llm_rope_qkv", 0, 0, 0, 0},
    {"vhc_attention", 0, 0, 0, 0},      {"vhc_embed_rows", 0, 0, 0, 0},     {"vhc_argmax_rows", 0, 0, 0, 0},
    {"vhc_im2col_bf16", 0, 0, 0, 0},    {"vhc_vit_assemble", 0, 0, 0, 0},   {"vhc_gather_patches_bf16", 0, 0, 0, 0},
    {"vhc_gemv", 0, 0, 0, 0},
};

static long g_failures;

static void fail_line(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail_line(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s: ", what);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
}

#define CUDA_OK(call)                                                                                        \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess) {                                                                             \
            printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));               \
            exit(1);                                                                                         \
        }                                                                                                    \
    } while (0)

/* After every launch: the launch error, then the execution error. A failure here is fatal (the
 * context may be unusable). */
static void launch_check(const char *what)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        printf("FAIL %s: launch: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
    e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("FAIL %s: execution: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        printf("FAIL out of host memory (%zu bytes)\n", n);
        exit(1);
    }
    return p;
}

/* ------------------------------------------------------------------------------------------------
 * Random numbers (splitmix64) and the test's own bf16 encoding
 */

static uint64_t g_rng;

static void rng_seed(uint64_t seed)
{
    g_rng = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
}

static uint64_t rng_u64(void)
{
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi), never exactly 0 for a symmetric range (24 random bits + 1/2) */
static float rng_uniform(float lo, float hi)
{
    double u = ((double)(rng_u64() >> 40) + 0.5) / 16777216.0;
    return (float)(lo + (hi - lo) * u);
}

static void fill_uniform(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++) x[i] = rng_uniform(lo, hi);
}

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_from_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* fp32 -> bf16, round to nearest even; NaN stays NaN (quietened). */
static uint16_t h_f2bf(float f)
{
    uint32_t u = bits_from_f32(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

static float h_bf2f(uint16_t b)
{
    return f32_from_bits((uint32_t)b << 16);
}

static int bf16_is_nan(uint16_t b)
{
    return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0;
}

/* One bf16 ulp at |x| (8 significant bits): 2^(e-8) for |x| in [2^(e-1), 2^e). */
static double ulp_bf16(double x)
{
    x = fabs(x);
    if (!(x >= 1.1754943508222875e-38)) return ldexp(1.0, -133); /* subnormal range (or NaN) */
    int e;
    frexp(x, &e);
    return ldexp(1.0, e - 8);
}

static uint16_t *random_bf16(size_t n, float lo, float hi)
{
    uint16_t *h = xmalloc(n * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = h_f2bf(rng_uniform(lo, hi));
    return h;
}

/* ------------------------------------------------------------------------------------------------
 * Guarded device buffers
 */

typedef struct gbuf {
    unsigned char *base; /* GUARD elements | n elements | GUARD elements */
    size_t esz, n;
} gbuf;

static void gb_poison(const gbuf *b)
{
    size_t total = b->n + 2 * GUARD;
    void *h = xmalloc(total * b->esz);
    for (size_t i = 0; i < total; i++) {
        if (b->esz == 2) ((uint16_t *)h)[i] = POISON16;
        else ((uint32_t *)h)[i] = POISON32;
    }
    CUDA_OK(cudaMemcpy(b->base, h, total * b->esz, cudaMemcpyHostToDevice));
    free(h);
}

static gbuf gb_new(size_t esz, size_t n)
{
    gbuf b = {NULL, esz, n};
    CUDA_OK(cudaMalloc((void **)&b.base, (n + 2 * GUARD) * esz));
    gb_poison(&b);
    return b;
}

static void *gb_at(const gbuf *b, size_t i)
{
    return b->base + (GUARD + i) * b->esz;
}

static void gb_upload(const gbuf *b, size_t at, const void *src, size_t count)
{
    if (count) CUDA_OK(cudaMemcpy(gb_at(b, at), src, count * b->esz, cudaMemcpyHostToDevice));
}

/* The whole allocation (guards included); the buffer's element i is at GUARD + i. */
static void *gb_download(const gbuf *b)
{
    size_t total = b->n + 2 * GUARD;
    void *h = xmalloc(total * b->esz);
    CUDA_OK(cudaMemcpy(h, b->base, total * b->esz, cudaMemcpyDeviceToHost));
    return h;
}

static void gb_free(gbuf *b)
{
    CUDA_OK(cudaFree(b->base));
    b->base = NULL;
}

static int is_poison(const void *p, size_t esz, size_t i)
{
    return esz == 2 ? ((const uint16_t *)p)[i] == POISON16 : ((const uint32_t *)p)[i] == POISON32;
}

/* Elements [from, to) of a downloaded allocation (indices into the whole allocation) must be
 * poison. */
static long check_poison_range(const char *what, const void *all, size_t esz, size_t from, size_t to,
                               const char *where)
{
    long bad = 0;
    for (size_t i = from; i < to; i++) {
        if (!is_poison(all, esz, i)) {
            if (bad < MAX_REPORTS)
                fail_line(what, "%s: element %ld of the allocation was overwritten", where, (long)i - GUARD);
            bad++;
        }
    }
    return bad;
}

/* Both guards of a downloaded buffer still poison. */
static long check_guards(const char *what, const void *all, const gbuf *b)
{
    long bad = check_poison_range(what, all, b->esz, 0, GUARD, "guard before");
    bad += check_poison_range(what, all, b->esz, GUARD + b->n, 2 * GUARD + b->n, "guard after");
    g_failures += bad;
    return bad;
}

/* ------------------------------------------------------------------------------------------------
 * Comparisons. got: the n results (inner pointer); mask (NULL: all) selects the elements the
 * launch writes; elements outside the mask must be poison (poison_outside) or are not checked.
 */

static void stat_add(int k, double diff, double allowed)
{
    kstat *s = &g_stats[k];
    s->values++;
    if (diff > s->max_abs) s->max_abs = diff;
    double ratio = allowed > 0 ? diff / allowed : (diff > 0 ? INFINITY : 0);
    if (ratio > s->max_ratio) s->max_ratio = ratio;
}

/* bf16 results: |got - bf16(ref)| <= ulp_bf16(|ref| + err32[i]) + err32[i] (exact: got == bf16(ref),
 * NaN for NaN). */
static long cmp_bf16(int k, const char *what, const uint16_t *got, const double *ref, const double *err32, size_t n,
                     const unsigned char *mask, int poison_outside, int exact)
{
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (mask && !mask[i]) {
            if (poison_outside && got[i] != POISON16) {
                if (bad < MAX_REPORTS) fail_line(what, "element %zu written but should not be", i);
                bad++;
            }
            continue;
        }
        if (got[i] == POISON16) {
            if (bad < MAX_REPORTS) fail_line(what, "element %zu not written", i);
            bad++;
            continue;
        }
        double r = ref[i];
        uint16_t rb = h_f2bf((float)r);
        if (r != r) {
            if (!bf16_is_nan(got[i])) {
                if (bad < MAX_REPORTS) fail_line(what, "element %zu: got %g, expected NaN", i, h_bf2f(got[i]));
                bad++;
            }
            continue;
        }
        double g = h_bf2f(got[i]), rv = h_bf2f(rb);
        double diff = fabs(g - rv);
        double e32 = err32 ? err32[i] : 0.0;
        /* the ulp at |ref| + err32: the kernel's fp32 value may lie in the binade above */
        double allowed = exact ? 0.0 : ulp_bf16(fabs(r) + e32) + e32;
        if (exact && isinf(rv) && g == rv) diff = 0;
        stat_add(k, diff, allowed);
        if (!(diff <= allowed)) {
            if (bad < MAX_REPORTS)
                fail_line(what,
                          "element %zu: got %.9g (0x%04x), reference %.9g (bf16 %.9g), |diff| %.3g > allowed %.3g",
                          i, g, got[i], r, rv, diff, allowed);
            bad++;
        }
    }
    g_stats[k].checks++;
    g_failures += bad;
    return bad;
}

/* fp32 results: |got - ref| <= err32[i] (err32 NULL: exact). */
static long cmp_f32(int k, const char *what, const float *got, const double *ref, const double *err32, size_t n)
{
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (bits_from_f32(got[i]) == POISON32) {
            if (bad < MAX_REPORTS) fail_line(what, "element %zu not written", i);
            bad++;
            continue;
        }
        double diff = fabs((double)got[i] - ref[i]);
        double allowed = err32 ? err32[i] : 0.0;
        stat_add(k, diff, allowed);
        if (!(diff <= allowed)) {
            if (bad < MAX_REPORTS)
                fail_line(what, "element %zu: got %.9g, reference %.9g, |diff| %.3g > allowed %.3g", i, got[i], ref[i],
                          diff, allowed);
            bad++;
        }
    }
    g_stats[k].checks++;
    g_failures += bad;
    return bad;
}

/* ------------------------------------------------------------------------------------------------
 * Norms
 */

/* fp32 rounding depth of the kernels' sums over a row of dim values (a per-thread chain of at
 * most 4 ceil(dim / 4 / threads) terms, a 5-level warp tree, at most 32 warp sums), bounded
 * generously. Relative error of a sum of |terms| <= depth u. */
static double sum_depth(int dim)
{
    return dim / 32.0 + 48.0;
}

static void test_rmsnorm(int rows, int dim, float eps, int with_index, int misalign, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "rmsnorm rows=%d dim=%d%s%s", rows, dim, with_index ? " row_index" : "",
             misalign ? " misaligned" : "");
    rng_seed(seed);
    const int rin = with_index ? rows + 5 : rows;
    const size_t off = misalign ? 1 : 0, nout = (size_t)rows * dim;
    float *x = xmalloc((size_t)rin * dim * sizeof *x), *w = xmalloc((size_t)dim * sizeof *w);
    int32_t *idx = xmalloc((size_t)rows * sizeof *idx);
    for (int r = 0; r < rin; r++) {
        float sc = (float)ldexp(1.0, r % 7 - 3);
        for (int c = 0; c < dim; c++) x[(size_t)r * dim + c] = rng_uniform(-2, 2) * sc;
    }
    fill_uniform(w, (size_t)dim, -1.5f, 1.5f);
    for (int r = 0; r < rows; r++) idx[r] = (int32_t)(((int64_t)r * 7 + 3) % rin);
    gbuf dx = gb_new(4, (size_t)rin * dim + off), dw = gb_new(4, (size_t)dim + off), dout = gb_new(2, nout + off),
         didx = gb_new(4, (size_t)rows);
    gb_upload(&dx, off, x, (size_t)rin * dim);
    gb_upload(&dw, off, w, (size_t)dim);
    gb_upload(&didx, 0, idx, (size_t)rows);
    vhc_rmsnorm_bf16(0, gb_at(&dx, off), gb_at(&dw, off), gb_at(&dout, off), rows, dim, eps,
                     with_index ? gb_at(&didx, 0) : NULL);
    launch_check(what);
    uint16_t *all = gb_download(&dout);

    /* err32: mean(x^2) relative error <= (depth + 1) u, rsqrt via sqrtf and a division <= (depth/2 + 3) u,
     * the two products 2 u: (depth + 8) u |y| covers it. */
    double *ref = xmalloc(nout * sizeof *ref), *err = xmalloc(nout * sizeof *err);
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)(with_index ? idx[r] : r) * dim;
        double ss = 0;
        for (int c = 0; c < dim; c++) ss += (double)xr[c] * xr[c];
        double rs = 1.0 / sqrt(ss / dim + (double)eps);
        for (int c = 0; c < dim; c++) {
            double y = (double)w[c] * xr[c] * rs;
            ref[(size_t)r * dim + c] = y;
            err[(size_t)r * dim + c] = (sum_depth(dim) + 8) * U32 * fabs(y);
        }
    }
    cmp_bf16(K_RMS, what, all + GUARD + off, ref, err, nout, NULL, 0, 0);
    g_failures += check_poison_range(what, all, 2, GUARD, GUARD + off, "before the output");
    check_guards(what, all, &dout);
    free(all), free(ref), free(err), free(x), free(w), free(idx);
    gb_free(&dx), gb_free(&dw), gb_free(&dout), gb_free(&didx);
}

static void test_layernorm(int rows, int dim, float eps, float offset, int misalign, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "layernorm rows=%d dim=%d offset=%g%s", rows, dim, offset,
             misalign ? " misaligned" : "");
    rng_seed(seed);
    const size_t off = misalign ? 1 : 0, n = (size_t)rows * dim;
    float *x = xmalloc(n * sizeof *x), *g = xmalloc((size_t)dim * sizeof *g), *b = xmalloc((size_t)dim * sizeof *b);
    for (int r = 0; r < rows; r++) {
        float sc = (float)ldexp(1.0, r % 5 - 2);
        for (int c = 0; c < dim; c++) x[(size_t)r * dim + c] = offset + rng_uniform(-1, 1) * sc;
    }
    fill_uniform(g, (size_t)dim, -2, 2);
    fill_uniform(b, (size_t)dim, -0.5f, 0.5f);
    gbuf dx = gb_new(4, n + off), dg = gb_new(4, (size_t)dim + off), db = gb_new(4, (size_t)dim + off),
         dout = gb_new(2, n + off);
    gb_upload(&dx, off, x, n);
    gb_upload(&dg, off, g, (size_t)dim);
    gb_upload(&db, off, b, (size_t)dim);
    vhc_layernorm_bf16(0, gb_at(&dx, off), gb_at(&dg, off), gb_at(&db, off), gb_at(&dout, off), rows, dim, eps);
    launch_check(what);
    uint16_t *all = gb_download(&dout);

    /* err32: the fp32 mean is off by <= (depth + 2) u mean|x|; the two-pass variance has relative
     * error <= (depth + 4) u (the mean's error enters squared), so rstd <= (depth/2 + 4) u; the
     * normalised value, the two products and the sum add a few u of |g (x - mean) rstd| and |b|. */
    double *ref = xmalloc(n * sizeof *ref), *err = xmalloc(n * sizeof *err);
    const double depth = sum_depth(dim);
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * dim;
        double sum = 0, sabs = 0, sq = 0;
        for (int c = 0; c < dim; c++) sum += xr[c], sabs += fabs(xr[c]);
        double mean = sum / dim, mean_abs = sabs / dim;
        for (int c = 0; c < dim; c++) sq += (xr[c] - mean) * (xr[c] - mean);
        double rstd = 1.0 / sqrt(sq / dim + (double)eps);
        for (int c = 0; c < dim; c++) {
            double dev = xr[c] - mean, y = dev * rstd * g[c] + b[c];
            ref[(size_t)r * dim + c] = y;
            err[(size_t)r * dim + c] =
                fabs(g[c]) * rstd * ((depth + 2) * U32 * mean_abs + fabs(dev) * (depth + 8) * U32) +
                3 * U32 * (fabs(g[c] * dev * rstd) + fabs(b[c]));
        }
    }
    cmp_bf16(K_LN, what, all + GUARD + off, ref, err, n, NULL, 0, 0);
    g_failures += check_poison_range(what, all, 2, GUARD, GUARD + off, "before the output");
    check_guards(what, all, &dout);
    free(all), free(ref), free(err), free(x), free(g), free(b);
    gb_free(&dx), gb_free(&dg), gb_free(&db), gb_free(&dout);
}

/* ------------------------------------------------------------------------------------------------
 * Element-wise
 */

static void test_bias_gelu(int rows, int cols, int with_bias, int misalign, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "bias_gelu rows=%d cols=%d%s%s", rows, cols, with_bias ? "" : " no-bias",
             misalign ? " misaligned" : "");
    rng_seed(seed);
    const size_t off = misalign ? 1 : 0, n = (size_t)rows * cols;
    float *x = xmalloc(n * sizeof *x), *b = xmalloc((size_t)cols * sizeof *b);
    fill_uniform(x, n, -5, 5);
    fill_uniform(b, (size_t)cols, -1, 1);
    gbuf dx = gb_new(4, n + off), db = gb_new(4, (size_t)cols + off), dout = gb_new(2, n + off);
    gb_upload(&dx, off, x, n);
    gb_upload(&db, off, b, (size_t)cols);
    vhc_bias_gelu_bf16(0, gb_at(&dx, off), with_bias ? gb_at(&db, off) : NULL, gb_at(&dout, off), rows, cols);
    launch_check(what);
    uint16_t *all = gb_download(&dout);
    /* err32 for s = x + b: the sum's rounding (u|s|, through gelu' <= 1.13), erf's argument
     * (2u relative, erf' <= 1.13) and value (2 ulp <= 2u), 1 + erf (2u), times 0.5|s|, and the
     * final product (u|y|): <= u (3.2|s| + 0.8 s^2 + |y|); doubled for margin. */
    double *ref = xmalloc(n * sizeof *ref), *err = xmalloc(n * sizeof *err);
    for (size_t i = 0; i < n; i++) {
        double s = (double)x[i] + (with_bias ? b[i % (size_t)cols] : 0.0);
        double y = 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
        ref[i] = y;
        err[i] = 2 * U32 * (3.2 * fabs(s) + 0.8 * s * s + fabs(y));
    }
    cmp_bf16(K_GELU, what, all + GUARD + off, ref, err, n, NULL, 0, 0);
    g_failures += check_poison_range(what, all, 2, GUARD, GUARD + off, "before the output");
    check_guards(what, all, &dout);
    free(all), free(ref), free(err), free(x), free(b);
    gb_free(&dx), gb_free(&db), gb_free(&dout);
}

static void test_bias_add(int rows, int cols, int in_place, int misalign, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "bias_add rows=%d cols=%d%s%s", rows, cols, in_place ? " in-place" : "",
             misalign ? " misaligned" : "");
    rng_seed(seed);
    const size_t off = misalign ? 1 : 0, n = (size_t)rows * cols;
    float *x = xmalloc(n * sizeof *x), *b = xmalloc((size_t)cols * sizeof *b);
    fill_uniform(x, n, -3, 3);
    fill_uniform(b, (size_t)cols, -1, 1);
    gbuf dx = gb_new(4, n + off), db = gb_new(4, (size_t)cols + off), dout = gb_new(4, n + off);
    gb_upload(&dx, off, x, n);
    gb_upload(&db, off, b, (size_t)cols);
    gbuf *dst = in_place ? &dx : &dout;
    vhc_bias_add_f32(0, gb_at(&dx, off), gb_at(&db, off), gb_at(dst, off), rows, cols);
    launch_check(what);
    float *all = gb_download(dst);
    /* one fp32 rounding of an exact sum: |err| <= u |ref| */
    double *ref = xmalloc(n * sizeof *ref), *err = xmalloc(n * sizeof *err);
    for (size_t i = 0; i < n; i++) {
        ref[i] = (double)x[i] + b[i % (size_t)cols];
        err[i] = U32 * fabs(ref[i]);
    }
    cmp_f32(K_BIAS, what, all + GUARD + off, ref, err, n);
    if (!in_place) g_failures += check_poison_range(what, all, 4, GUARD, GUARD + off, "before the output");
    check_guards(what, all, dst);
    free(all), free(ref), free(err), free(x), free(b);
    gb_free(&dx), gb_free(&db), gb_free(&dout);
}

static void test_residual(int rows, int dim, int with_bias, int with_scale, int misalign, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "residual_add rows=%d dim=%d bias=%d scale=%d%s", rows, dim, with_bias, with_scale,
             misalign ? " misaligned" : "");
    rng_seed(seed);
    const size_t off = misalign ? 1 : 0, n = (size_t)rows * dim;
    float *x = xmalloc(n * sizeof *x), *t = xmalloc(n * sizeof *t), *b = xmalloc((size_t)dim * sizeof *b),
          *s = xmalloc((size_t)dim * sizeof *s);
    fill_uniform(x, n, -4, 4);
    fill_uniform(t, n, -2, 2);
    fill_uniform(b, (size_t)dim, -1, 1);
    fill_uniform(s, (size_t)dim, -0.5f, 0.5f);
    gbuf dx = gb_new(4, n + off), dt = gb_new(4, n + off), db = gb_new(4, (size_t)dim + off),
         ds = gb_new(4, (size_t)dim + off);
    gb_upload(&dx, off, x, n);
    gb_upload(&dt, off, t, n);
    gb_upload(&db, off, b, (size_t)dim);
    gb_upload(&ds, off, s, (size_t)dim);
    vhc_residual_add(0, gb_at(&dx, off), gb_at(&dt, off), with_bias ? gb_at(&db, off) : NULL,
                     with_scale ? gb_at(&ds, off) : NULL, rows, dim);
    launch_check(what);
    float *all = gb_download(&dx);
    /* three fp32 roundings (t + b, the product, the sum), each <= u times a partial result:
     * |err| <= 4 u (|x| + |s| (|t| + |b|)) */
    double *ref = xmalloc(n * sizeof *ref), *err = xmalloc(n * sizeof *err);
    for (size_t i = 0; i < n; i++) {
        size_t c = i % (size_t)dim;
        double bb = with_bias ? b[c] : 0.0, ss = with_scale ? s[c] : 1.0;
        ref[i] = x[i] + ss * (t[i] + bb);
        err[i] = 4 * U32 * (fabs(x[i]) + fabs(ss) * (fabs(t[i]) + fabs(bb)));
    }
    cmp_f32(K_RES, what, all + GUARD + off, ref, err, n);
    check_guards(what, all, &dx);
    free(all), free(ref), free(err), free(x), free(t), free(b), free(s);
    gb_free(&dx), gb_free(&dt), gb_free(&db), gb_free(&ds);
}

static void test_silu_mul(int rows, int F, int misalign, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "silu_mul rows=%d F=%d%s", rows, F, misalign ? " misaligned" : "");
    rng_seed(seed);
    const size_t off = misalign ? 1 : 0, nin = (size_t)rows * 2 * F, n = (size_t)rows * F;
    float *gu = xmalloc(nin * sizeof *gu);
    for (int r = 0; r < rows; r++) {
        fill_uniform(gu + (size_t)r * 2 * F, (size_t)F, -8, 8);
        fill_uniform(gu + (size_t)r * 2 * F + F, (size_t)F, -3, 3);
    }
    gbuf dgu = gb_new(4, nin + off), dout = gb_new(2, n + off);
    gb_upload(&dgu, off, gu, nin);
    vhc_silu_mul_bf16(0, gb_at(&dgu, off), gb_at(&dout, off), rows, F);
    launch_check(what);
    uint16_t *all = gb_download(&dout);
    /* expf 2 ulp (4u relative), 1 + e, the division and the product: <= 7u |y|; 10u stated */
    double *ref = xmalloc(n * sizeof *ref), *err = xmalloc(n * sizeof *err);
    for (int r = 0; r < rows; r++) {
        for (int c = 0; c < F; c++) {
            double g = gu[(size_t)r * 2 * F + c], u = gu[(size_t)r * 2 * F + F + c];
            double y = g / (1.0 + exp(-g)) * u;
            ref[(size_t)r * F + c] = y;
            err[(size_t)r * F + c] = 10 * U32 * fabs(y);
        }
    }
    cmp_bf16(K_SILU, what, all + GUARD + off, ref, err, n, NULL, 0, 0);
    g_failures += check_poison_range(what, all, 2, GUARD, GUARD + off, "before the output");
    check_guards(what, all, &dout);
    free(all), free(ref), free(err), free(gu);
    gb_free(&dgu), gb_free(&dout);
}

/* Exact: round to nearest even of every fp32 pattern class (random bits give NaN, inf, subnormals). */
static void test_f32_to_bf16(int64_t n, int misalign, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "f32_to_bf16 n=%lld%s", (long long)n, misalign ? " misaligned" : "");
    rng_seed(seed);
    const size_t off = misalign ? 1 : 0;
    float *x = xmalloc((size_t)n * sizeof *x);
    static const uint32_t special[] = {
        0x3F808000u, /* tie, even below: rounds down */ 0x3F818000u, /* tie, odd below: rounds up */
        0x3F80FFFFu, 0x3F807FFFu, 0x7F7FFFFFu, /* rounds to inf */ 0xFF7FFFFFu, 0x7F800000u, 0xFF800000u,
        0x7FC00000u, 0x7F800001u, /* sNaN */ 0x00000001u, 0x80008000u, 0x00008000u, 0x00018000u, 0x80000000u,
        0x00000000u, 0x007FFFFFu, 0x3F7FFFFFu};
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = rng_u64();
        if ((size_t)i < sizeof special / sizeof *special) x[i] = f32_from_bits(special[i]);
        else if (i % 3 == 0) x[i] = f32_from_bits((uint32_t)r); /* any pattern */
        else x[i] = rng_uniform(-1000, 1000);
    }
    gbuf dx = gb_new(4, (size_t)n + off), dout = gb_new(2, (size_t)n + off);
    gb_upload(&dx, off, x, (size_t)n);
    vhc_f32_to_bf16(0, gb_at(&dx, off), gb_at(&dout, off), n);
    launch_check(what);
    uint16_t *all = gb_download(&dout), *got = all + GUARD + off;
    long bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint16_t want = h_f2bf(x[i]);
        int ok = bf16_is_nan(want) ? bf16_is_nan(got[i]) : got[i] == want;
        stat_add(K_CVT, ok ? 0.0 : 1.0, 0.0);
        if (!ok) {
            if (bad < MAX_REPORTS)
                fail_line(what, "element %lld: 0x%08x -> 0x%04x, expected 0x%04x", (long long)i, bits_from_f32(x[i]),
                          got[i], want);
            bad++;
        }
    }
    g_stats[K_CVT].checks++;
    g_failures += bad;
    g_failures += check_poison_range(what, all, 2, GUARD, GUARD + off, "before the output");
    check_guards(what, all, &dout);
    free(all), free(x);
    gb_free(&dx), gb_free(&dout);
}

static void test_qkv_split(int T, int D, int with_bias, int misalign, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "vit_qkv_split T=%d D=%d%s%s", T, D, with_bias ? "" : " no-bias",
             misalign ? " misaligned" : "");
    rng_seed(seed);
    const size_t off = misalign ? 1 : 0, nin = (size_t)T * 3 * D, n = (size_t)T * D;
    float *qkv = xmalloc(nin * sizeof *qkv), *b = xmalloc((size_t)3 * D * sizeof *b);
    fill_uniform(qkv, nin, -3, 3);
    fill_uniform(b, (size_t)3 * D, -1, 1);
    gbuf dqkv = gb_new(4, nin + off), db = gb_new(4, (size_t)3 * D + off), dq = gb_new(2, n + off),
         dk = gb_new(2, n + off), dv = gb_new(2, n + off);
    gb_upload(&dqkv, off, qkv, nin);
    gb_upload(&db, off, b, (size_t)3 * D);
    vhc_vit_qkv_split(0, gb_at(&dqkv, off), with_bias ? gb_at(&db, off) : NULL, gb_at(&dq, off), gb_at(&dk, off),
                      gb_at(&dv, off), T, D);
    launch_check(what);
    /* one fp32 rounding of the exact sum (u |ref|), then bf16 */
    double *ref = xmalloc(n * sizeof *ref), *err = xmalloc(n * sizeof *err);
    gbuf *outs[3] = {&dq, &dk, &dv};
    for (int part = 0; part < 3; part++) {
        for (int t = 0; t < T; t++) {
            for (int c = 0; c < D; c++) {
                size_t col = (size_t)part * D + c;
                double y = (double)qkv[(size_t)t * 3 * D + col] + (with_bias ? b[col] : 0.0);
                ref[(size_t)t * D + c] = y;
                err[(size_t)t * D + c] = U32 * fabs(y);
            }
        }
        uint16_t *all = gb_download(outs[part]);
        cmp_bf16(K_QKV, what, all + GUARD + off, ref, err, n, NULL, 0, 0);
        g_failures += check_poison_range(what, all, 2, GUARD, GUARD + off, "before the output");
        check_guards(what, all, outs[part]);
        free(all);
    }
    free(ref), free(err), free(qkv), free(b);
    gb_free(&dqkv), gb_free(&db), gb_free(&dq), gb_free(&dk), gb_free(&dv);
}

/* ------------------------------------------------------------------------------------------------
 * Attention (reference and runner)
 */

/* Mean time of `reps` launches of the last configuration, by CUDA events (informational). */
typedef void (*launch_fn)(void *ctx);

static double time_launches(launch_fn fn, void *ctx, int reps)
{
    cudaEvent_t a, b;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    fn(ctx); /* warm */
    CUDA_OK(cudaEventRecord(a, 0));
    for (int i = 0; i < reps; i++) fn(ctx);
    CUDA_OK(cudaEventRecord(b, 0));
    CUDA_OK(cudaEventSynchronize(b));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, a, b));
    CUDA_OK(cudaEventDestroy(a));
    CUDA_OK(cudaEventDestroy(b));
    launch_check("timing");
    return 1000.0 * ms / reps;
}

typedef struct att_args {
    const vhc_bf16 *q;
    int64_t q_stride;
    const vhc_bf16 *k, *v;
    int64_t kv_stride;
    const vhc_row *rows; /* device */
    int n_keys_dense;
    vhc_bf16 *out;
    int64_t out_stride;
    int R, n_heads, n_kv_heads, head_dim;
    float scale;
    int segment;                /* 1: vhc_flash_attention on one causal segment (kv_base, first_position);
                                   2: vhc_flash_attention_tiles over the rows' segments */
    int64_t kv_base;
    int first_position;
    const vhc_attention_tile *tiles; /* device, segment 2 */
    int n_tiles;
} att_args;

static void att_launch(void *ctx)
{
    const att_args *a = ctx;
    if (a->segment == 2) {
        vhc_flash_attention_tiles(0, a->q, a->q_stride, a->k, a->v, a->kv_stride, a->out, a->out_stride, a->tiles,
                                  a->n_tiles, a->n_heads, a->n_kv_heads, a->head_dim, a->scale);
        return;
    }
    if (a->segment) {
        vhc_flash_attention(0, a->q, a->q_stride, a->k + a->kv_base, a->v + a->kv_base, a->kv_stride, a->out,
                            a->out_stride, a->R, a->n_heads, a->n_kv_heads, a->head_dim, a->scale, 0, a->first_position);
        return;
    }
    vhc_attention(0, a->q, a->q_stride, a->k, a->v, a->kv_stride, a->rows, a->n_keys_dense, a->out, a->out_stride, a->R,
                  a->n_heads, a->n_kv_heads, a->head_dim, a->scale);
}

/*
 * Runs vhc_attention on device q/k/v (whose contents at the same offsets are hq/hk/hv on the host)
 * and checks it against a float64 attention. hrows: host copy of the rows (NULL: dense).
 *
 * err32, per output value (the CPU attention test's bound): each score s_j = scale q.k_j carries
 * at most E_s = (hd/16 + 8) u scale sum_d |q_d k_jd| + u |s_j| (per-lane FMA chains of <= 2 hd/32
 * terms, a 5-level shuffle tree, the scale); softmax weights then carry a relative error of at
 * most 2 E_s + a few u (expf 2 ulp, the rescaling); the weighted sum of n keys accumulates <= n +
 * n/8 + 2 roundings of at most u max|v| (FMA chains, rescaling, the final division), and a split
 * row (up to 8 warps) adds the merge: 8 more rescalings (expf, 2 ulp) and 16 roundings:
 * err32 = max|v_d| (4 max_j E_s + 2 (n + 32) u). An off-by-one key, a wrong kv head, a wrong scale
 * or a missing rescale moves outputs by ~max|v| / n or more, far above this.
 *
 * The tensor-core kernel (segment mode, and dense calls it serves) sums the hd products of a score
 * in the tensor cores' order (bounded here as 2 hd + 8 roundings) and rounds P to bf16 before P.V:
 * err32 grows by 2^-8 sum_j p_j |v_jd| / sum_j p_j (twice the 2^-9 relative rounding of each p_j).
 *
 * segment 1: run vhc_flash_attention on rows 0..R-1 of one sequence, causally (hrows give the
 * reference: row r's base and n_keys, which must be hrows[0]'s base and n_keys + r). segment 2:
 * vhc_flash_attention_tiles in one launch over every run of rows that continues one sequence
 * (a packed pass's segments), cut into tiles of VHC_FLASH_TILE_ROWS.
 */
static void run_attention(const char *what, const vhc_bf16 *dq, const uint16_t *hq, int64_t q_stride,
                          const vhc_bf16 *dk, const uint16_t *hk, const vhc_bf16 *dv, const uint16_t *hv,
                          int64_t kv_stride, const vhc_row *hrows, int n_dense, int64_t out_stride, int R, int H,
                          int Hkv, int hd, int segment, int time_it)
{
    const float scale = (float)(1.0 / sqrt((double)hd));
    const size_t nout = (size_t)R * out_stride;
    gbuf dout = gb_new(2, nout), drows = gb_new(4, hrows ? (size_t)R * sizeof(vhc_row) / 4 : 1);
    if (hrows) gb_upload(&drows, 0, hrows, (size_t)R * sizeof(vhc_row) / 4);
    vhc_attention_tile *tiles = xmalloc(((size_t)R + 1) * sizeof *tiles);
    int n_tiles = 0;
    for (int r = 0; segment == 2 && r < R; r++) {
        vhc_attention_tile *t = n_tiles ? &tiles[n_tiles - 1] : NULL;
        if (t && t->n_rows < VHC_FLASH_TILE_ROWS && t->first_row + t->n_rows == r && t->kv_base == hrows[r].kv_seq_base &&
            t->first_position + t->n_rows == hrows[r].n_keys - 1)
            t->n_rows++;
        else
            tiles[n_tiles++] = (vhc_attention_tile){.first_row = r, .n_rows = 1, .first_position = hrows[r].n_keys - 1,
                                                    .kv_base = hrows[r].kv_seq_base};
    }
    gbuf dtiles = gb_new(4, ((size_t)n_tiles + 1) * sizeof *tiles / 4);
    if (n_tiles) gb_upload(&dtiles, 0, tiles, (size_t)n_tiles * sizeof *tiles / 4);
    att_args a = {dq, q_stride, dk, dv, kv_stride, hrows ? (const vhc_row *)gb_at(&drows, 0) : NULL, n_dense,
                  gb_at(&dout, 0), out_stride, R, H, Hkv, hd, scale, segment,
                  segment == 1 ? hrows[0].kv_seq_base : 0, segment == 1 ? hrows[0].n_keys - 1 : 0,
                  (const vhc_attention_tile *)gb_at(&dtiles, 0), n_tiles};
    const int flash = segment || (!hrows && vhc_flash_attention_supported(dq, q_stride, dk, dv, kv_stride, out_stride,
                                                                          H, Hkv, hd));
    if (segment == 1)
        for (int r = 0; r < R; r++)
            if (hrows[r].kv_seq_base != hrows[0].kv_seq_base || hrows[r].n_keys != hrows[0].n_keys + r) {
                printf("FAIL %s: test bug: rows are not one segment\n", what);
                exit(1);
            }
    att_launch(&a);
    launch_check(what);
    uint16_t *all = gb_download(&dout);

    double *ref = xmalloc(nout * sizeof *ref), *err = xmalloc(nout * sizeof *err);
    unsigned char *mask = calloc(nout, 1);
    int max_n = n_dense;
    for (int r = 0; hrows && r < R; r++)
        if (hrows[r].n_keys > max_n) max_n = hrows[r].n_keys;
    double *s = xmalloc(((size_t)max_n + 1) * sizeof *s), *acc = xmalloc((size_t)hd * sizeof *acc),
           *vmax = xmalloc((size_t)hd * sizeof *vmax), *qv = xmalloc((size_t)hd * sizeof *qv),
           *pv = xmalloc((size_t)hd * sizeof *pv);
    const int group = H / Hkv;
    for (int r = 0; r < R; r++) {
        const int n = hrows ? hrows[r].n_keys : n_dense;
        const int64_t base = hrows ? hrows[r].kv_seq_base : 0;
        for (int h = 0; h < H; h++) {
            const int64_t o = (int64_t)r * out_stride + (int64_t)h * hd;
            const int64_t kvo = (int64_t)(h / group) * hd;
            for (int d = 0; d < hd; d++) {
                mask[o + d] = 1;
                qv[d] = h_bf2f(hq[(int64_t)r * q_stride + (int64_t)h * hd + d]);
            }
            if (n <= 0) { /* documented resolution: zeros */
                for (int d = 0; d < hd; d++) ref[o + d] = 0, err[o + d] = 0;
                continue;
            }
            double m = -INFINITY, max_es = 0;
            for (int j = 0; j < n; j++) {
                const uint16_t *kr = hk + base + (int64_t)j * kv_stride + kvo;
                double dot = 0, mag = 0;
                for (int d = 0; d < hd; d++) {
                    double p = qv[d] * h_bf2f(kr[d]);
                    dot += p;
                    mag += fabs(p);
                }
                s[j] = dot * scale;
                double es = ((flash ? 2.0 * hd : hd / 16.0) + 8) * U32 * scale * mag + U32 * fabs(s[j]);
                if (es > max_es) max_es = es;
                if (s[j] > m) m = s[j];
            }
            double sum = 0;
            for (int d = 0; d < hd; d++) acc[d] = 0, vmax[d] = 0, pv[d] = 0;
            for (int j = 0; j < n; j++) {
                double p = exp(s[j] - m);
                sum += p;
                const uint16_t *vr = hv + base + (int64_t)j * kv_stride + kvo;
                for (int d = 0; d < hd; d++) {
                    double vv = h_bf2f(vr[d]);
                    acc[d] += p * vv;
                    pv[d] += p * fabs(vv);
                    if (fabs(vv) > vmax[d]) vmax[d] = fabs(vv);
                }
            }
            for (int d = 0; d < hd; d++) {
                ref[o + d] = acc[d] / sum;
                err[o + d] = vmax[d] * (4 * max_es + 2 * (n + 32.0) * U32) + (flash ? ldexp(pv[d] / sum, -8) : 0.0);
            }
        }
    }
    cmp_bf16(K_ATT, what, all + GUARD, ref, err, nout, mask, 1, 0);
    check_guards(what, all, &dout);
    if (time_it) printf("  time %-58s %9.1f us\n", what, time_launches(att_launch, &a, 20));
    free(all), free(ref), free(err), free(mask), free(s), free(acc), free(vmax), free(qv), free(pv), free(tiles);
    gb_free(&dout), gb_free(&drows), gb_free(&dtiles);
}

/* The images of a ViT batch in one launch (vhc_flash_attention_batch) give the bits of one launch
 * per image (whose results the dense test checks against float64): the batch offsets reach every
 * image, and no block reads another image's keys. */
typedef struct batch_att_args {
    const vhc_bf16 *q, *k, *v;
    vhc_bf16 *out;
    int T, D, H, n_images;
    float scale;
} batch_att_args;

static void batch_att_launch(void *ctx)
{
    const batch_att_args *a = ctx;
    vhc_flash_attention_batch(0, a->q, a->D, a->k, a->v, a->D, a->out, a->D, a->T, a->H, a->H, a->D / a->H, a->scale,
                              a->T, -1, a->n_images, (int64_t)a->T * a->D);
}

static void test_attention_batch(int T, int D, int H, int n_images, uint64_t seed, int time_it)
{
    char what[160];
    snprintf(what, sizeof what, "flash attention batch of %d images T=%d D=%d heads=%d", n_images, T, D, H);
    rng_seed(seed);
    const size_t len = (size_t)n_images * T * D;
    uint16_t *hq = random_bf16(len, -2, 2), *hk = random_bf16(len, -2, 2), *hv = random_bf16(len, -1, 1);
    gbuf bq = gb_new(2, len), bk = gb_new(2, len), bv = gb_new(2, len), one = gb_new(2, len), all = gb_new(2, len);
    gb_upload(&bq, 0, hq, len), gb_upload(&bk, 0, hk, len), gb_upload(&bv, 0, hv, len);
    const float scale = (float)(1.0 / sqrt((double)(D / H)));
    const vhc_bf16 *q = gb_at(&bq, 0), *k = gb_at(&bk, 0), *v = gb_at(&bv, 0);
    for (int i = 0; i < n_images; i++) {
        const size_t at = (size_t)i * T * D;
        vhc_flash_attention(0, q + at, D, k + at, v + at, D, (vhc_bf16 *)gb_at(&one, 0) + at, D, T, H, H, D / H, scale,
                            T, -1);
    }
    batch_att_args args = {q, k, v, gb_at(&all, 0), T, D, H, n_images, scale};
    batch_att_launch(&args);
    launch_check(what);
    if (time_it) {
        const double us = time_launches(batch_att_launch, &args, 20);
        printf("  time %-58s %9.1f us %6.0f TFLOP/s\n", what, us, 4.0 * n_images * T * (double)T * D / us * 1e-6);
    }
    uint16_t *a = gb_download(&one), *b = gb_download(&all);
    long bad = 0;
    for (size_t i = 0; i < len; i++)
        if (a[GUARD + i] != b[GUARD + i] && bad++ < MAX_REPORTS) fail_line(what, "element %zu differs", i);
    g_failures += bad;
    check_guards(what, b, &all);
    free(a), free(b), free(hq), free(hk), free(hv);
    gb_free(&bq), gb_free(&bk), gb_free(&bv), gb_free(&one), gb_free(&all);
}

/* Dense (ViT) attention on random bf16 q, k, v. fused: one [T, 3D] buffer (q | k | v), strides 3D.
 * rising: key j scaled by (0.25 + 3 j / T), so the running max moves often (rescaling). */
static void test_attention_dense(int T, int D, int H, int fused, int out_pad, int n_dense, float amp, int rising,
                                 uint64_t seed, int time_it)
{
    char what[160];
    snprintf(what, sizeof what, "attention dense T=%d D=%d heads=%d hd=%d keys=%d%s%s amp=%g", T, D, H, D / H,
             n_dense, fused ? " fused" : "", rising ? " rising" : "", amp);
    rng_seed(seed);
    const int hd = D / H;
    const int64_t stride = fused ? 3 * (int64_t)D : D;
    const size_t len = (size_t)T * stride;
    uint16_t *hq, *hk, *hv, *hbuf = NULL;
    gbuf bq, bk, bv;
    const vhc_bf16 *dq, *dk, *dv;
    if (fused) {
        hbuf = xmalloc(len * sizeof *hbuf);
        for (int t = 0; t < T; t++) {
            float ks = rising ? 0.25f + 3.0f * t / T : 1.0f;
            for (int c = 0; c < D; c++) {
                hbuf[(size_t)t * stride + c] = h_f2bf(rng_uniform(-amp, amp));
                hbuf[(size_t)t * stride + D + c] = h_f2bf(rng_uniform(-amp, amp) * ks);
                hbuf[(size_t)t * stride + 2 * D + c] = h_f2bf(rng_uniform(-1, 1));
            }
        }
        bq = gb_new(2, len);
        gb_upload(&bq, 0, hbuf, len);
        hq = hbuf, hk = hbuf + D, hv = hbuf + 2 * D;
        dq = gb_at(&bq, 0), dk = dq + D, dv = dq + 2 * D;
    } else {
        hq = random_bf16(len, -amp, amp);
        hk = random_bf16(len, -amp, amp);
        hv = random_bf16(len, -1, 1);
        if (rising)
            for (int t = 0; t < T; t++)
                for (int c = 0; c < D; c++)
                    hk[(size_t)t * D + c] = h_f2bf(h_bf2f(hk[(size_t)t * D + c]) * (0.25f + 3.0f * t / T));
        bq = gb_new(2, len), bk = gb_new(2, len), bv = gb_new(2, len);
        gb_upload(&bq, 0, hq, len);
        gb_upload(&bk, 0, hk, len);
        gb_upload(&bv, 0, hv, len);
        dq = gb_at(&bq, 0), dk = gb_at(&bk, 0), dv = gb_at(&bv, 0);
    }
    run_attention(what, dq, hq, stride, dk, hk, dv, hv, stride, NULL, n_dense, D + out_pad, T, H, H, hd, 0, time_it);
    gb_free(&bq);
    if (fused) {
        free(hbuf);
    } else {
        gb_free(&bk), gb_free(&bv);
        free(hq), free(hk), free(hv);
    }
}

/* Rows with their own sequences in one random cache: n_keys in {0, 1, 7, 8, 9, 15, 16, 17, 64,
 * 100, 287}, sequence bases with every misalignment (0..3 elements), GQA. */
static void test_attention_rows(int H, int Hkv, int hd, int kv_pad, uint64_t seed)
{
    static const int nk[] = {0, 1, 7, 8, 9, 15, 16, 17, 64, 100, 287, 3};
    const int R = (int)(sizeof nk / sizeof *nk);
    char what[160];
    snprintf(what, sizeof what, "attention rows R=%d heads=%d/%d hd=%d kv_stride=%d", R, H, Hkv, hd,
             Hkv * hd + kv_pad);
    rng_seed(seed);
    const int64_t kv_stride = (int64_t)Hkv * hd + kv_pad;
    vhc_row rows[sizeof nk / sizeof *nk];
    int64_t at = 5;
    for (int r = 0; r < R; r++) {
        at += r % 4; /* bases 0..3 elements off any alignment */
        rows[r].token = 0, rows[r].patch = 0, rows[r].rope_pos = nk[r] - 1, rows[r].n_keys = nk[r];
        rows[r].kv_seq_base = at;
        rows[r].kv_write = at + (int64_t)(nk[r] > 0 ? nk[r] - 1 : 0) * kv_stride;
        at += (int64_t)(nk[r] + 1) * kv_stride;
    }
    const size_t len = (size_t)at + 8, qlen = (size_t)R * H * hd;
    uint16_t *hk = random_bf16(len, -2, 2), *hv = random_bf16(len, -1, 1), *hq = random_bf16(qlen, -2, 2);
    gbuf bk = gb_new(2, len), bv = gb_new(2, len), bq = gb_new(2, qlen);
    gb_upload(&bk, 0, hk, len);
    gb_upload(&bv, 0, hv, len);
    gb_upload(&bq, 0, hq, qlen);
    run_attention(what, gb_at(&bq, 0), hq, (int64_t)H * hd, gb_at(&bk, 0), hk, gb_at(&bv, 0), hv, kv_stride, rows, 0,
                  (int64_t)H * hd + 3, R, H, Hkv, hd, 0, 0);
    gb_free(&bk), gb_free(&bv), gb_free(&bq);
    free(hk), free(hv), free(hq);
}

/* ------------------------------------------------------------------------------------------------
 * LLM steps: RoPE + cache write, then attention over the caches, with several sequences
 */

#define MAX_SEQ 8

typedef struct llm_cache {
    int hq, hkv, hd;
    int64_t kv_stride;
    size_t len;               /* elements of each cache */
    gbuf k, v;                /* device caches */
    uint16_t *hk, *hv;        /* what the device caches must hold (poison where never written) */
    int n_seq;
    int64_t base[MAX_SEQ];    /* element offset of each sequence */
    int filled[MAX_SEQ];      /* positions written so far */
    int cap[MAX_SEQ];
} llm_cache;

static void llm_cache_init(llm_cache *c, int hq, int hkv, int hd, int kv_pad, int n_seq, const int *cap)
{
    memset(c, 0, sizeof *c);
    c->hq = hq, c->hkv = hkv, c->hd = hd, c->n_seq = n_seq;
    c->kv_stride = (int64_t)hkv * hd + kv_pad;
    int64_t at = 0;
    for (int s = 0; s < n_seq; s++) {
        at += 3 * kv_pad + 8 * s; /* gaps (never written) between sequences; 16-byte aligned without padding */
        c->base[s] = at, c->cap[s] = cap[s], c->filled[s] = 0;
        at += (int64_t)cap[s] * c->kv_stride;
    }
    c->len = (size_t)at + 16;
    c->k = gb_new(2, c->len), c->v = gb_new(2, c->len);
    c->hk = xmalloc(c->len * 2), c->hv = xmalloc(c->len * 2);
    for (size_t i = 0; i < c->len; i++) c->hk[i] = c->hv[i] = POISON16;
}

static void llm_cache_free(llm_cache *c)
{
    gb_free(&c->k), gb_free(&c->v);
    free(c->hk), free(c->hv);
}

typedef struct step_part {
    int seq, n_new;
} step_part;

typedef struct rope_args {
    const float *qkv;
    const vhc_row *rows;
    vhc_bf16 *q, *k, *v;
    int R, hq, hkv, hd;
    const float *inv_freq; /* device, from vhc_rope_inv_freq */
} rope_args;

static void rope_launch(void *ctx)
{
    const rope_args *a = ctx;
    vhc_llm_rope_qkv(0, a->qkv, a->rows, a->q, a->k, a->v, a->R, a->hq, a->hkv, a->hd, a->inv_freq);
}

/*
 * One batch: for each part, n_new rows of sequence `seq` at its next positions (a row's position
 * is its sequence's fill, its n_keys position + 1). Row order is shuffled (perm_rows) so that
 * positions are not monotonic in r. Checks RoPE's q, k, v and that nothing else in the caches
 * changed, then attention over the caches.
 *
 * RoPE err32: the test computes inv_freq and the angle exactly as documented (fp32 division,
 * fp32 power rounded from the double one, fp32 angle product), cos/sin of that fp32 angle in
 * double. The kernel's cosf / sinf are within 2 ulp (2u absolute), its two products and sum
 * round at u each: <= 5u (|a| + |b|); a 1-ulp difference in the fp32 power (device vs host
 * libm) would move the angle by <= 2u |angle|: err32 = u (|a| + |b|) (6 + 2 |angle|). v is copied
 * exactly.
 */
static void llm_step(const char *name, llm_cache *c, const step_part *parts, int n_parts, float theta, float amp,
                     int perm_rows, uint64_t seed, int time_it)
{
    rng_seed(seed);
    int R = 0;
    for (int p = 0; p < n_parts; p++) R += parts[p].n_new;
    vhc_row *rows = xmalloc((size_t)R * sizeof *rows);
    int r = 0;
    for (int p = 0; p < n_parts; p++) {
        const int s = parts[p].seq;
        for (int i = 0; i < parts[p].n_new; i++, r++) {
            const int pos = c->filled[s] + i;
            if (pos >= c->cap[s]) {
                printf("FAIL %s: test bug: sequence %d over capacity\n", name, s);
                exit(1);
            }
            rows[r].token = 0, rows[r].patch = 0, rows[r].rope_pos = pos, rows[r].n_keys = pos + 1;
            rows[r].kv_seq_base = c->base[s];
            rows[r].kv_write = c->base[s] + (int64_t)pos * c->kv_stride;
        }
    }
    for (int p = 0; p < n_parts; p++) c->filled[parts[p].seq] += parts[p].n_new;
    if (perm_rows) /* Fisher-Yates */
        for (int i = R - 1; i > 0; i--) {
            int j = (int)(rng_u64() % (uint64_t)(i + 1));
            vhc_row t = rows[i];
            rows[i] = rows[j], rows[j] = t;
        }

    const int hq = c->hq, hkv = c->hkv, hd = c->hd, half = hd / 2, width = (hq + 2 * hkv) * hd;
    const size_t nqkv = (size_t)R * width, nq = (size_t)R * hq * hd;
    float *qkv = xmalloc(nqkv * sizeof *qkv);
    fill_uniform(qkv, nqkv, -amp, amp);
    gbuf dqkv = gb_new(4, nqkv), drows = gb_new(4, (size_t)R * sizeof(vhc_row) / 4), dq = gb_new(2, nq);
    gb_upload(&dqkv, 0, qkv, nqkv);
    gb_upload(&drows, 0, rows, (size_t)R * sizeof(vhc_row) / 4);
    float *inv_freq = xmalloc((size_t)half * sizeof *inv_freq);
    vhc_rope_inv_freq(theta, hd, inv_freq);
    gbuf dfreq = gb_new(4, (size_t)half);
    gb_upload(&dfreq, 0, inv_freq, (size_t)half);
    rope_args ra = {gb_at(&dqkv, 0), gb_at(&drows, 0), gb_at(&dq, 0), gb_at(&c->k, 0), gb_at(&c->v, 0), R, hq, hkv, hd,
                    gb_at(&dfreq, 0)};
    char what[200];
    snprintf(what, sizeof what, "rope %s R=%d heads=%d/%d hd=%d", name, R, hq, hkv, hd);
    rope_launch(&ra);
    launch_check(what);
    uint16_t *qall = gb_download(&dq), *kall = gb_download(&c->k), *vall = gb_download(&c->v);
    uint16_t *gq = qall + GUARD, *gk = kall + GUARD, *gv = vall + GUARD;

    double *qref = xmalloc(nq * sizeof *qref), *qerr = xmalloc(nq * sizeof *qerr);
    double *kref = xmalloc(c->len * sizeof *kref), *kerr = xmalloc(c->len * sizeof *kerr),
           *vref = xmalloc(c->len * sizeof *vref);
    unsigned char *wmask = calloc(c->len, 1);
    double *cs = xmalloc((size_t)hd * sizeof *cs), *ang = xmalloc((size_t)half * sizeof *ang);
    for (r = 0; r < R; r++) {
        const float pos = (float)rows[r].rope_pos;
        for (int i = 0; i < half; i++) {
            volatile float e = (float)(2 * i) / (float)hd; /* volatile: fp32 rounding of each step */
            volatile float pw = (float)pow((double)theta, (double)e);
            volatile float inv = 1.0f / pw;
            volatile float an = pos * inv;
            ang[i] = an;
            cs[i] = cos((double)an), cs[half + i] = sin((double)an);
        }
        const float *row = qkv + (size_t)r * width;
        for (int head = 0; head < hq + 2 * hkv; head++) {
            for (int i = 0; i < half; i++) {
                double a = row[head * hd + i], b = row[head * hd + i + half];
                double oa = a, ob = b, e = 0;
                if (head < hq + hkv) {
                    oa = a * cs[i] - b * cs[half + i];
                    ob = b * cs[i] + a * cs[half + i];
                    e = U32 * (fabs(a) + fabs(b)) * (6 + 2 * fabs(ang[i]));
                }
                if (head < hq) {
                    size_t o = ((size_t)r * hq + head) * hd;
                    qref[o + i] = oa, qref[o + i + half] = ob, qerr[o + i] = qerr[o + i + half] = e;
                } else {
                    int64_t o = rows[r].kv_write + (int64_t)(head < hq + hkv ? head - hq : head - hq - hkv) * hd;
                    double *dst = head < hq + hkv ? kref : vref;
                    dst[o + i] = oa, dst[o + i + half] = ob;
                    if (head < hq + hkv) kerr[o + i] = kerr[o + i + half] = e;
                    wmask[o + i] = wmask[o + i + half] = 1;
                }
            }
        }
    }
    cmp_bf16(K_ROPE, what, gq, qref, qerr, nq, NULL, 0, 0);
    check_guards(what, qall, &dq);
    /* written cache slots against the reference (v exact), every other element unchanged */
    cmp_bf16(K_ROPE, what, gk, kref, kerr, c->len, wmask, 0, 0);
    cmp_bf16(K_ROPE, what, gv, vref, NULL, c->len, wmask, 0, 1);
    long bad = 0;
    for (size_t i = 0; i < c->len; i++) {
        if (wmask[i]) continue;
        if (gk[i] != c->hk[i] || gv[i] != c->hv[i]) {
            if (bad < MAX_REPORTS) fail_line(what, "cache element %zu changed but not this batch's slot", i);
            bad++;
        }
    }
    g_failures += bad;
    check_guards(what, kall, &c->k);
    check_guards(what, vall, &c->v);
    if (time_it) printf("  time %-58s %9.1f us\n", what, time_launches(rope_launch, &ra, 20));
    /* the caches now hold what the device wrote */
    memcpy(c->hk, gk, c->len * 2);
    memcpy(c->hv, gv, c->len * 2);

    snprintf(what, sizeof what, "attention %s R=%d heads=%d/%d hd=%d", name, R, hq, hkv, hd);
    run_attention(what, gb_at(&dq, 0), gq, (int64_t)hq * hd, gb_at(&c->k, 0), c->hk, gb_at(&c->v, 0), c->hv,
                  c->kv_stride, rows, 0, (int64_t)hq * hd, R, hq, hkv, hd, 0, time_it);
    /* one in-order segment of one sequence: also the tensor-core kernel, causally */
    const vhc_bf16 *seg_k = (const vhc_bf16 *)gb_at(&c->k, 0) + rows[0].kv_seq_base,
                   *seg_v = (const vhc_bf16 *)gb_at(&c->v, 0) + rows[0].kv_seq_base;
    if (n_parts == 1 && !perm_rows && R > 1 &&
        vhc_flash_attention_supported(gb_at(&dq, 0), (int64_t)hq * hd, seg_k, seg_v, c->kv_stride, (int64_t)hq * hd,
                                      hq, hkv, hd)) {
        snprintf(what, sizeof what, "flash attention %s R=%d heads=%d/%d hd=%d from %d", name, R, hq, hkv, hd,
                 rows[0].n_keys - 1);
        run_attention(what, gb_at(&dq, 0), gq, (int64_t)hq * hd, gb_at(&c->k, 0), c->hk, gb_at(&c->v, 0), c->hv,
                      c->kv_stride, rows, 0, (int64_t)hq * hd, R, hq, hkv, hd, 1, time_it);
    }
    /* every part of the batch as the segments of one tiled launch (a packed pass's prefills and steps) */
    if (!perm_rows &&
        vhc_flash_attention_supported(gb_at(&dq, 0), (int64_t)hq * hd, gb_at(&c->k, 0), gb_at(&c->v, 0), c->kv_stride,
                                      (int64_t)hq * hd, hq, hkv, hd)) {
        snprintf(what, sizeof what, "flash attention tiles %s R=%d heads=%d/%d hd=%d", name, R, hq, hkv, hd);
        run_attention(what, gb_at(&dq, 0), gq, (int64_t)hq * hd, gb_at(&c->k, 0), c->hk, gb_at(&c->v, 0), c->hv,
                      c->kv_stride, rows, 0, (int64_t)hq * hd, R, hq, hkv, hd, 2, time_it);
    }

    free(qall), free(kall), free(vall), free(qref), free(qerr), free(kref), free(kerr), free(vref), free(wmask);
    free(cs), free(ang), free(qkv), free(rows);
    gb_free(&dqkv), gb_free(&drows), gb_free(&dq), gb_free(&dfreq);
    free(inv_freq);
}

/* ------------------------------------------------------------------------------------------------
 * Few-row linear layers: D[m, n] (+)= sum_k A[m, k] W[n, k]
 */

typedef struct gemv_args {
    const vhc_bf16 *A, *W;
    int64_t lda, M, K, N, ldd;
    float *D;
    int accumulate;
} gemv_args;

static void gemv_launch(void *ctx)
{
    const gemv_args *a = ctx;
    vhc_gemv(0, a->A, a->lda, a->M, a->K, a->W, a->N, a->D, a->ldd, a->accumulate);
}

/*
 * err32: each lane's FMA chain has K/32 terms, then a 5-level warp sum, then (accumulating) one
 * addition; every rounding is at most u times a partial sum bounded by sum_k |a_k w_k| (+ |D|):
 * err32 = (K/32 + 6) u (sum_k |a_k w_k| + |D0|). A wrong column, a skipped piece or a row mixed
 * up moves results by a whole product, far above this. time_it: also report the bandwidth of
 * reading W (the decode steps' shapes).
 */
static void test_gemv(int M, int N, int K, int lda_pad, int ldd_pad, int accumulate, uint64_t seed, int time_it)
{
    char what[160];
    snprintf(what, sizeof what, "gemv M=%d N=%d K=%d lda=%d ldd=%d%s", M, N, K, K + lda_pad, N + ldd_pad,
             accumulate ? " accumulate" : "");
    rng_seed(seed);
    const int64_t lda = K + lda_pad, ldd = N + ldd_pad;
    const size_t na = (size_t)M * lda, nw = (size_t)N * K, nd = (size_t)M * ldd;
    uint16_t *ha = random_bf16(na, -1, 1), *hw = random_bf16(nw, -1, 1);
    float *hd = xmalloc(nd * sizeof *hd);
    fill_uniform(hd, nd, -4, 4);
    gbuf ba = gb_new(2, na), bw = gb_new(2, nw), bd = gb_new(4, nd);
    gb_upload(&ba, 0, ha, na);
    gb_upload(&bw, 0, hw, nw);
    if (accumulate)
        for (int m = 0; m < M; m++) gb_upload(&bd, (size_t)m * ldd, hd + (size_t)m * ldd, (size_t)N);
    if (!vhc_gemv_supported(gb_at(&ba, 0), lda, M, K, gb_at(&bw, 0), N, gb_at(&bd, 0), ldd)) {
        fail_line(what, "shape not supported");
        g_failures++;
        goto out;
    }
    gemv_args a = {gb_at(&ba, 0), gb_at(&bw, 0), lda, M, K, N, ldd, gb_at(&bd, 0), accumulate};
    gemv_launch(&a);
    launch_check(what);
    float *all = gb_download(&bd);
    double *ref = xmalloc((size_t)N * sizeof *ref), *err = xmalloc((size_t)N * sizeof *err);
    for (int m = 0; m < M; m++) {
        for (int n = 0; n < N; n++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double p = (double)h_bf2f(ha[(size_t)m * lda + k]) * h_bf2f(hw[(size_t)n * K + k]);
                sum += p;
                mag += fabs(p);
            }
            double d0 = accumulate ? hd[(size_t)m * ldd + n] : 0.0;
            ref[n] = sum + d0;
            err[n] = (K / 32.0 + 6) * U32 * (mag + fabs(d0));
        }
        cmp_f32(K_GEMV, what, all + GUARD + (size_t)m * ldd, ref, err, (size_t)N);
        g_failures += check_poison_range(what, all, 4, GUARD + (size_t)m * ldd + N, GUARD + (size_t)(m + 1) * ldd,
                                         "row padding");
    }
    check_guards(what, all, &bd);
    if (time_it) {
        /* the accumulating launch grows D each time: harmless for timing */
        double us = time_launches(gemv_launch, &a, 50);
        printf("  time %-58s %9.1f us  %7.0f GB/s of weights\n", what, us, 2.0 * (double)nw / us / 1e3);
    }
    free(all), free(ref), free(err);
out:
    free(ha), free(hw), free(hd);
    gb_free(&ba), gb_free(&bw), gb_free(&bd);
}

/* ------------------------------------------------------------------------------------------------
 * Embedding rows, argmax, ViT input side (all exact)
 */

static void test_embed_rows(int V, int dim, int R, int misalign, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "embed_rows V=%d dim=%d R=%d%s", V, dim, R, misalign ? " misaligned" : "");
    rng_seed(seed);
    const int NPATCH = 12;
    const size_t off = misalign ? 1 : 0, ntab = (size_t)V * dim, npe = (size_t)NPATCH * dim, n = (size_t)R * dim;
    uint16_t *tab = random_bf16(ntab, -1, 1);
    float *pe = xmalloc(npe * sizeof *pe);
    fill_uniform(pe, npe, -3, 3);
    vhc_row *rows = xmalloc((size_t)R * sizeof *rows);
    for (int r = 0; r < R; r++) {
        memset(&rows[r], 0, sizeof rows[r]);
        if (r % 3 == 1) {
            rows[r].token = -1;
            rows[r].patch = (int32_t)(rng_u64() % NPATCH);
        } else {
            rows[r].token = r == 0 ? V - 1 : r == 2 ? 0 : (int32_t)(rng_u64() % (uint64_t)V);
            rows[r].patch = 123456; /* must be ignored */
        }
    }
    gbuf dt = gb_new(2, ntab + off), dp = gb_new(4, npe + off), dr = gb_new(4, (size_t)R * sizeof(vhc_row) / 4),
         dx = gb_new(4, n + off);
    gb_upload(&dt, off, tab, ntab);
    gb_upload(&dp, off, pe, npe);
    gb_upload(&dr, 0, rows, (size_t)R * sizeof(vhc_row) / 4);
    vhc_embed_rows(0, gb_at(&dt, off), gb_at(&dp, off), gb_at(&dr, 0), gb_at(&dx, off), R, dim);
    launch_check(what);
    float *all = gb_download(&dx);
    double *ref = xmalloc(n * sizeof *ref);
    for (int r = 0; r < R; r++)
        for (int c = 0; c < dim; c++)
            ref[(size_t)r * dim + c] = rows[r].token >= 0 ? h_bf2f(tab[(size_t)rows[r].token * dim + c])
                                                          : pe[(size_t)rows[r].patch * dim + c];
    cmp_f32(K_EMB, what, all + GUARD + off, ref, NULL, n);
    g_failures += check_poison_range(what, all, 4, GUARD, GUARD + off, "before the output");
    check_guards(what, all, &dx);
    free(all), free(ref), free(tab), free(pe), free(rows);
    gb_free(&dt), gb_free(&dp), gb_free(&dr), gb_free(&dx);
}

/* torch.argmax: first index of the maximum, NaN the maximum (first NaN wins); -1 for n <= 0. */
static int32_t ref_argmax(const float *x, int64_t n)
{
    if (n <= 0) return -1;
    int64_t best = 0;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] != x[i]) return (int32_t)i;
        if (x[i] > x[best]) best = i;
    }
    return (int32_t)best;
}

/* Rows: random, ties at two places, NaN after a larger value, two NaNs, +inf and NaN, two +inf,
 * all -inf, all equal, the maximum last, +0 / -0 as maximum, then random again. */
static void test_argmax(int rows, int64_t n, int misalign, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "argmax rows=%d n=%lld%s", rows, (long long)n, misalign ? " misaligned" : "");
    rng_seed(seed);
    const size_t off = misalign ? 1 : 0, total = (size_t)rows * (size_t)(n > 0 ? n : 0);
    float *x = xmalloc(total * sizeof *x);
    fill_uniform(x, total, -30, 30);
    for (int r = 0; r < rows && n > 0; r++) {
        float *xr = x + (size_t)r * n;
        int64_t a = (int64_t)(rng_u64() % (uint64_t)n), b = (int64_t)(rng_u64() % (uint64_t)n);
        switch (r % 12) {
        case 1: xr[a] = xr[b] = 100.0f; break;                                /* tie */
        case 2: xr[a] = 1e30f, xr[b] = NAN; break;                            /* NaN wins */
        case 3: xr[a] = NAN, xr[b] = -NAN; break;                             /* first NaN */
        case 4: xr[a] = INFINITY, xr[b] = NAN; break;                         /* NaN over inf */
        case 5: xr[a] = INFINITY, xr[b] = INFINITY; break;                    /* first inf */
        case 6: for (int64_t i = 0; i < n; i++) xr[i] = -INFINITY; break;     /* all -inf: 0 */
        case 7: for (int64_t i = 0; i < n; i++) xr[i] = 2.5f; break;          /* all equal: 0 */
        case 8: xr[n - 1] = 1000.0f; break;                                   /* last */
        case 9:                                                               /* +0 == -0 */
            for (int64_t i = 0; i < n; i++) xr[i] = -fabsf(xr[i]);
            xr[a] = -0.0f, xr[b] = 0.0f;
            break;
        case 10: xr[0] = 1000.0f; break; /* first */
        default: break;
        }
    }
    gbuf dx = gb_new(4, total + off), dout = gb_new(4, (size_t)rows);
    gb_upload(&dx, off, x, total);
    vhc_argmax_rows(0, gb_at(&dx, off), rows, n, gb_at(&dout, 0));
    launch_check(what);
    int32_t *all = gb_download(&dout), *got = all + GUARD;
    long bad = 0;
    for (int r = 0; r < rows; r++) {
        int32_t want = ref_argmax(x + (size_t)r * (size_t)(n > 0 ? n : 0), n);
        stat_add(K_ARGMAX, got[r] == want ? 0.0 : 1.0, 0.0);
        if (got[r] != want) {
            if (bad < MAX_REPORTS) fail_line(what, "row %d: got %d, expected %d", r, got[r], want);
            bad++;
        }
    }
    g_stats[K_ARGMAX].checks++;
    g_failures += bad;
    check_guards(what, all, &dout);
    free(all), free(x);
    gb_free(&dx), gb_free(&dout);
}

static void test_im2col(int S, int P, uint64_t seed)
{
    char what[128];
    snprintf(what, sizeof what, "im2col S=%d P=%d", S, P);
    rng_seed(seed);
    const int G = S / P, ld = VHC_PATCH_LD(P);
    const size_t npix = (size_t)3 * S * S, n = (size_t)G * G * ld;
    float *px = xmalloc(npix * sizeof *px);
    fill_uniform(px, npix, -2.2f, 2.7f);
    gbuf dp = gb_new(4, npix), dout = gb_new(2, n);
    gb_upload(&dp, 0, px, npix);
    vhc_im2col_bf16(0, gb_at(&dp, 0), S, P, gb_at(&dout, 0), ld);
    launch_check(what);
    uint16_t *all = gb_download(&dout);
    double *ref = xmalloc(n * sizeof *ref);
    for (size_t i = 0; i < n; i++) ref[i] = 0.0; /* the padding columns */
    for (int gy = 0; gy < G; gy++)
        for (int gx = 0; gx < G; gx++)
            for (int ch = 0; ch < 3; ch++)
                for (int ky = 0; ky < P; ky++)
                    for (int kx = 0; kx < P; kx++)
                        ref[((size_t)gy * G + gx) * ld + ((size_t)ch * P + ky) * P + kx] =
                            px[((size_t)ch * S + (size_t)gy * P + ky) * S + (size_t)gx * P + kx];
    cmp_bf16(K_IM2COL, what, all + GUARD, ref, NULL, n, NULL, 0, 1);
    check_guards(what, all, &dout);
    free(all), free(ref), free(px);
    gb_free(&dp), gb_free(&dout);
}

/* err32: (patch + bias) + pos, two fp32 roundings: <= 2u (|patch| + |bias| + |pos|)(1 + u). */
static void test_assemble(int NP, int D, int with_cls, int n_reg, int covers, int with_bias, int with_pos,
                          uint64_t seed)
{
    char what[160];
    snprintf(what, sizeof what, "vit_assemble NP=%d D=%d cls=%d reg=%d pos_covers_prefix=%d bias=%d pos=%d", NP, D,
             with_cls, n_reg, covers, with_bias, with_pos);
    rng_seed(seed);
    const int prefix = with_cls + n_reg, ntok = prefix + NP, L = covers ? ntok : NP;
    const size_t n = (size_t)ntok * D;
    float *pt = xmalloc((size_t)NP * D * sizeof *pt), *pb = xmalloc((size_t)D * sizeof *pb),
          *cls = xmalloc((size_t)D * sizeof *cls), *reg = xmalloc(((size_t)n_reg * D + 1) * sizeof *reg),
          *pos = xmalloc((size_t)L * D * sizeof *pos);
    fill_uniform(pt, (size_t)NP * D, -3, 3);
    fill_uniform(pb, (size_t)D, -1, 1);
    fill_uniform(cls, (size_t)D, -1, 1);
    fill_uniform(reg, (size_t)n_reg * D, -1, 1);
    fill_uniform(pos, (size_t)L * D, -0.5f, 0.5f);
    gbuf dpt = gb_new(4, (size_t)NP * D), dpb = gb_new(4, (size_t)D), dcls = gb_new(4, (size_t)D),
         dreg = gb_new(4, (size_t)n_reg * D + 1), dpos = gb_new(4, (size_t)L * D), dx = gb_new(4, n);
    gb_upload(&dpt, 0, pt, (size_t)NP * D);
    gb_upload(&dpb, 0, pb, (size_t)D);
    gb_upload(&dcls, 0, cls, (size_t)D);
    gb_upload(&dreg, 0, reg, (size_t)n_reg * D);
    gb_upload(&dpos, 0, pos, (size_t)L * D);
    vhc_vit_assemble(0, gb_at(&dpt, 0), with_bias ? gb_at(&dpb, 0) : NULL, with_cls ? gb_at(&dcls, 0) : NULL,
                     n_reg ? gb_at(&dreg, 0) : NULL, n_reg, with_pos ? gb_at(&dpos, 0) : NULL, covers, gb_at(&dx, 0),
                     NP, D);
    launch_check(what);
    float *all = gb_download(&dx);
    double *ref = xmalloc(n * sizeof *ref), *err = xmalloc(n * sizeof *err);
    for (int t = 0; t < ntok; t++) {
        for (int c = 0; c < D; c++) {
            double v, mag;
            if (t < prefix) v = (with_cls && t == 0) ? cls[c] : reg[(size_t)(t - with_cls) * D + c];
            else v = pt[(size_t)(t - prefix) * D + c] + (with_bias ? pb[c] : 0.0);
            mag = t < prefix ? fabs(v) : fabs(pt[(size_t)(t - prefix) * D + c]) + (with_bias ? fabs(pb[c]) : 0.0);
            int pi = t - (ntok - L);
            if (with_pos && pi >= 0) v += pos[(size_t)pi * D + c], mag += fabs(pos[(size_t)pi * D + c]);
            ref[(size_t)t * D + c] = v;
            err[(size_t)t * D + c] = 2 * U32 * mag * (1 + U32);
        }
    }
    cmp_f32(K_ASM, what, all + GUARD, ref, err, n);
    check_guards(what, all, &dx);
    free(all), free(ref), free(err), free(pt), free(pb), free(cls), free(reg), free(pos);
    gb_free(&dpt), gb_free(&dpb), gb_free(&dcls), gb_free(&dreg), gb_free(&dpos), gb_free(&dx);
}

/* Two gathers into column slices of one [N, Dv] buffer, leaving `gap` columns between and after
 * them unwritten (they must stay poison). */
static void test_gather(int N, int prefix1, int D1, int prefix2, int D2, int gap, uint64_t seed)
{
    char what[160];
    snprintf(what, sizeof what, "gather_patches N=%d D=%d+%d gap=%d", N, D1, D2, gap);
    rng_seed(seed);
    const int Dv = D1 + gap + D2 + gap;
    const size_t n1 = (size_t)(prefix1 + N) * D1, n2 = (size_t)(prefix2 + N) * D2, n = (size_t)N * Dv;
    float *t1 = xmalloc(n1 * sizeof *t1), *t2 = xmalloc(n2 * sizeof *t2);
    fill_uniform(t1, n1, -4, 4);
    fill_uniform(t2, n2, -4, 4);
    gbuf d1 = gb_new(4, n1), d2 = gb_new(4, n2), dout = gb_new(2, n);
    gb_upload(&d1, 0, t1, n1);
    gb_upload(&d2, 0, t2, n2);
    vhc_gather_patches_bf16(0, gb_at(&d1, 0), prefix1, N, D1, gb_at(&dout, 0), 0, Dv);
    launch_check(what);
    vhc_gather_patches_bf16(0, gb_at(&d2, 0), prefix2, N, D2, gb_at(&dout, 0), D1 + gap, Dv);
    launch_check(what);
    uint16_t *all = gb_download(&dout);
    double *ref = xmalloc(n * sizeof *ref);
    unsigned char *mask = calloc(n, 1);
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < D1; c++) {
            ref[(size_t)i * Dv + c] = t1[(size_t)(prefix1 + i) * D1 + c];
            mask[(size_t)i * Dv + c] = 1;
        }
        for (int c = 0; c < D2; c++) {
            ref[(size_t)i * Dv + D1 + gap + c] = t2[(size_t)(prefix2 + i) * D2 + c];
            mask[(size_t)i * Dv + D1 + gap + c] = 1;
        }
    }
    cmp_bf16(K_GATHER, what, all + GUARD, ref, NULL, n, mask, 1, 1);
    check_guards(what, all, &dout);
    free(all), free(ref), free(mask), free(t1), free(t2);
    gb_free(&d1), gb_free(&d2), gb_free(&dout);
}

/* Every launcher with empty work (rows / n / T / R = 0): enqueues nothing, writes nothing. */
static void test_empty(void)
{
    const char *what = "empty launches";
    gbuf f = gb_new(4, 4096), b = gb_new(2, 4096), o32 = gb_new(4, 64), ob = gb_new(2, 4096), of = gb_new(4, 4096);
    float *fp = gb_at(&f, 0);
    vhc_bf16 *bp = gb_at(&b, 0), *obp = gb_at(&ob, 0);
    float *ofp = gb_at(&of, 0);
    const vhc_row *rows = gb_at(&f, 0);
    vhc_rmsnorm_bf16(0, fp, fp, obp, 0, 64, 1e-6f, NULL);
    vhc_layernorm_bf16(0, fp, fp, fp, obp, 0, 64, 1e-6f);
    vhc_bias_gelu_bf16(0, fp, fp, obp, 0, 64);
    vhc_bias_add_f32(0, fp, fp, ofp, 0, 64);
    vhc_residual_add(0, ofp, fp, fp, fp, 0, 64);
    vhc_silu_mul_bf16(0, fp, obp, 0, 64);
    vhc_f32_to_bf16(0, fp, obp, 0);
    vhc_vit_qkv_split(0, fp, fp, obp, obp, obp, 0, 64);
    vhc_llm_rope_qkv(0, fp, rows, obp, obp, obp, 0, 4, 2, 16, fp);
    vhc_attention(0, bp, 64, bp, bp, 64, NULL, 8, obp, 64, 0, 4, 2, 16, 0.25f);
    vhc_flash_attention(0, bp, 64, bp, bp, 64, obp, 64, 0, 4, 2, 16, 0.25f, 8, -1);
    vhc_gemv(0, bp, 64, 0, 64, bp, 64, ofp, 64, 0);
    vhc_embed_rows(0, bp, fp, rows, ofp, 0, 64);
    vhc_argmax_rows(0, fp, 0, 100, gb_at(&o32, 0));
    vhc_vit_assemble(0, fp, fp, NULL, NULL, 0, fp, 0, ofp, 0, 64);
    vhc_gather_patches_bf16(0, fp, 1, 0, 64, obp, 0, 64);
    vhc_im2col_bf16(0, fp, 0, 14, obp, VHC_PATCH_LD(14));
    launch_check(what);
    void *a = gb_download(&ob), *c = gb_download(&of), *d = gb_download(&o32);
    g_failures += check_poison_range(what, a, 2, 0, 4096 + 2 * GUARD, "bf16 output");
    g_failures += check_poison_range(what, c, 4, 0, 4096 + 2 * GUARD, "fp32 output");
    g_failures += check_poison_range(what, d, 4, 0, 64 + 2 * GUARD, "argmax output");
    free(a), free(c), free(d);
    gb_free(&f), gb_free(&b), gb_free(&o32), gb_free(&ob), gb_free(&of);
}

/* Informational timings of the full-size norms and argmax. */
typedef struct norm_args {
    const float *x, *w, *b;
    vhc_bf16 *out;
    int rows, dim;
} norm_args;

static void rms_launch(void *ctx)
{
    const norm_args *a = ctx;
    vhc_rmsnorm_bf16(0, a->x, a->w, a->out, a->rows, a->dim, 1e-6f, NULL);
}

static void ln_launch(void *ctx)
{
    const norm_args *a = ctx;
    vhc_layernorm_bf16(0, a->x, a->w, a->b, a->out, a->rows, a->dim, 1e-6f);
}

static void argmax_launch(void *ctx)
{
    const norm_args *a = ctx;
    vhc_argmax_rows(0, a->x, a->rows, a->dim, (int32_t *)(void *)a->out);
}

static void timings(void)
{
    gbuf x = gb_new(4, (size_t)600 * 32064), w = gb_new(4, 4096), b = gb_new(4, 4096),
         o = gb_new(2, (size_t)600 * 4096);
    float *hx = xmalloc((size_t)600 * 32064 * sizeof *hx);
    rng_seed(99);
    fill_uniform(hx, (size_t)600 * 32064, -1, 1);
    gb_upload(&x, 0, hx, (size_t)600 * 32064);
    gb_upload(&w, 0, hx, 4096);
    gb_upload(&b, 0, hx, 4096);
    norm_args a = {gb_at(&x, 0), gb_at(&w, 0), gb_at(&b, 0), gb_at(&o, 0), 286, 4096};
    printf("  time %-58s %9.1f us\n", "rmsnorm rows=286 dim=4096", time_launches(rms_launch, &a, 20));
    a.rows = 1;
    printf("  time %-58s %9.1f us\n", "rmsnorm rows=1 dim=4096", time_launches(rms_launch, &a, 20));
    a.rows = 261, a.dim = 1024;
    printf("  time %-58s %9.1f us\n", "layernorm rows=261 dim=1024", time_launches(ln_launch, &a, 20));
    a.rows = 1, a.dim = 32064;
    printf("  time %-58s %9.1f us\n", "argmax rows=1 n=32064", time_launches(argmax_launch, &a, 20));
    a.rows = 600;
    printf("  time %-58s %9.1f us\n", "argmax rows=600 n=32064", time_launches(argmax_launch, &a, 20));
    free(hx);
    gb_free(&x), gb_free(&w), gb_free(&b), gb_free(&o);
}

int main(void)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        printf("skipped: %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        return 77;
    }
    struct cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);

    uint64_t seed = 1;
    test_empty();

    /* norms: Llama 4096 (prefill and decode), ViT 1024 / 1152, small, odd, misaligned, row_index */
    test_rmsnorm(286, 4096, 1e-6f, 0, 0, seed++);
    test_rmsnorm(1, 4096, 1e-6f, 0, 0, seed++);
    test_rmsnorm(5, 32, 1e-5f, 0, 0, seed++);
    test_rmsnorm(3, 64, 1e-6f, 0, 0, seed++);
    test_rmsnorm(7, 37, 1e-6f, 0, 0, seed++);
    test_rmsnorm(4, 64, 1e-6f, 0, 1, seed++);
    test_rmsnorm(3, 4096, 1e-6f, 1, 0, seed++);
    test_rmsnorm(2, 11008, 1e-6f, 0, 0, seed++);
    test_layernorm(261, 1024, 1e-6f, 0.0f, 0, seed++);
    test_layernorm(256, 1152, 1e-6f, 0.5f, 0, seed++);
    test_layernorm(5, 24, 1e-5f, 0.0f, 0, seed++);
    test_layernorm(3, 37, 1e-6f, 1.0f, 1, seed++);
    test_layernorm(4, 64, 1e-6f, 100.0f, 0, seed++);
    test_layernorm(2, 1024, 1e-6f, 0.0f, 1, seed++);

    /* element-wise */
    test_bias_gelu(256, 4096, 1, 0, seed++);
    test_bias_gelu(256, 4304, 1, 0, seed++);
    test_bias_gelu(5, 33, 1, 1, seed++);
    test_bias_gelu(3, 64, 0, 0, seed++);
    test_bias_add(256, 3072, 0, 0, seed++);
    test_bias_add(256, 1024, 1, 0, seed++);
    test_bias_add(3, 33, 1, 1, seed++);
    test_bias_add(70000, 4, 0, 0, seed++); /* rows beyond gridDim.y's 65535 */
    test_residual(286, 4096, 0, 0, 0, seed++);
    test_residual(261, 1024, 1, 1, 0, seed++);
    test_residual(261, 1024, 1, 0, 0, seed++);
    test_residual(261, 1152, 0, 1, 0, seed++);
    test_residual(5, 37, 1, 1, 1, seed++);
    test_silu_mul(286, 11008, 0, seed++);
    test_silu_mul(5, 88, 0, seed++);
    test_silu_mul(3, 172, 1, seed++);
    test_silu_mul(2, 33, 0, seed++);
    test_f32_to_bf16((1 << 20) + 3, 0, seed++);
    test_f32_to_bf16(4099, 1, seed++);
    test_f32_to_bf16(1, 0, seed++);
    test_f32_to_bf16(5, 1, seed++);
    test_qkv_split(261, 1024, 1, 0, seed++);
    test_qkv_split(256, 1152, 1, 0, seed++);
    test_qkv_split(5, 24, 1, 0, seed++);
    test_qkv_split(3, 37, 0, 1, seed++);

    /* Llama-2 7B layer: rmsnorm (above) + rope + attention, prefill R = 286 then decode with 287
     * keys, one sequence; qkv amplitude 3: scores of standard deviation ~3 (peaked softmax) */
    {
        llm_cache c;
        int cap[1] = {300};
        llm_cache_init(&c, 32, 32, 128, 0, 1, cap);
        step_part prefill = {0, 286}, decode = {0, 1};
        llm_step("7B prefill", &c, &prefill, 1, 10000.0f, 3.0f, 0, seed++, 1);
        llm_step("7B decode", &c, &decode, 1, 10000.0f, 3.0f, 0, seed++, 1);
        llm_cache_free(&c);
    }
    /* prefill in chunks (segments starting past position 0), GQA, then decode rows */
    {
        static const int hds[3] = {64, 128, 72}, hqs[3] = {4, 8, 6}, hkvs[3] = {4, 2, 3};
        for (int cfg = 0; cfg < 3; cfg++) {
            llm_cache c;
            int cap[2] = {300, 40};
            llm_cache_init(&c, hqs[cfg], hkvs[cfg], hds[cfg], 0, 2, cap);
            step_part a = {0, 70}, b = {0, 129}, d = {0, 1}, e = {0, 17};
            char name[64];
            snprintf(name, sizeof name, "chunked cfg%d part1", cfg);
            llm_step(name, &c, &a, 1, 10000.0f, 3.0f, 0, seed++, 0);
            snprintf(name, sizeof name, "chunked cfg%d part2", cfg);
            llm_step(name, &c, &b, 1, 10000.0f, 3.0f, 0, seed++, 0);
            snprintf(name, sizeof name, "chunked cfg%d decode", cfg);
            llm_step(name, &c, &d, 1, 10000.0f, 3.0f, 0, seed++, 0);
            snprintf(name, sizeof name, "chunked cfg%d part3", cfg);
            llm_step(name, &c, &e, 1, 10000.0f, 3.0f, 0, seed++, 0);
            llm_cache_free(&c);
        }
    }
    /* several sequences per launch (different bases, fills, n_keys), GQA, padded kv rows */
    {
        static const int hds[3] = {16, 8, 128}, hqs[3] = {4, 4, 8}, hkvs[3] = {2, 2, 2}, pads[3] = {3, 0, 0};
        for (int cfg = 0; cfg < 3; cfg++) {
            llm_cache c;
            int cap[4] = {40, 64, 30, 20};
            llm_cache_init(&c, hqs[cfg], hkvs[cfg], hds[cfg], pads[cfg], 4, cap);
            step_part s1[2] = {{0, 5}, {1, 12}};
            step_part s2[3] = {{0, 1}, {1, 4}, {2, 9}};
            step_part s3[4] = {{2, 1}, {0, 1}, {3, 17}, {1, 1}};
            step_part s4[4] = {{3, 1}, {2, 1}, {1, 40}, {0, 30}};
            char name[64];
            snprintf(name, sizeof name, "multi-seq cfg%d step1", cfg);
            llm_step(name, &c, s1, 2, 10000.0f, 2.0f, 1, seed++, 0);
            snprintf(name, sizeof name, "multi-seq cfg%d step2", cfg);
            llm_step(name, &c, s2, 3, 10000.0f, 2.0f, 1, seed++, 0);
            snprintf(name, sizeof name, "multi-seq cfg%d step3", cfg);
            llm_step(name, &c, s3, 4, 10000.0f, 2.0f, 1, seed++, 0);
            snprintf(name, sizeof name, "multi-seq cfg%d step4", cfg);
            llm_step(name, &c, s4, 4, 10000.0f, 2.0f, 1, seed++, 0);
            llm_cache_free(&c);
        }
    }
    /* a packed pass's layout, rows in segment order: prefills of several sequences and decode rows
     * in one batch, also as one tiled flash launch (llm_step's "flash attention tiles") */
    {
        static const int hds[2] = {128, 64}, hqs[2] = {8, 4}, hkvs[2] = {2, 4};
        for (int cfg = 0; cfg < 2; cfg++) {
            llm_cache c;
            int cap[3] = {300, 300, 300};
            llm_cache_init(&c, hqs[cfg], hkvs[cfg], hds[cfg], 0, 3, cap);
            step_part s1[2] = {{0, 70}, {1, 100}};
            step_part s2[3] = {{2, 130}, {0, 1}, {1, 1}};
            step_part s3[3] = {{1, 1}, {0, 65}, {2, 1}};
            char name[64];
            snprintf(name, sizeof name, "packed cfg%d step1", cfg);
            llm_step(name, &c, s1, 2, 10000.0f, 2.0f, 0, seed++, 0);
            snprintf(name, sizeof name, "packed cfg%d step2", cfg);
            llm_step(name, &c, s2, 3, 10000.0f, 2.0f, 0, seed++, 0);
            snprintf(name, sizeof name, "packed cfg%d step3", cfg);
            llm_step(name, &c, s3, 3, 10000.0f, 2.0f, 0, seed++, 0);
            llm_cache_free(&c);
        }
    }
    /* RoPE at positions 0..2048 (one prefill of 2049 rows, shuffled), theta 10000, and attention over
     * 2049 keys */
    {
        llm_cache c;
        int cap[1] = {2049};
        llm_cache_init(&c, 4, 2, 16, 0, 1, cap);
        step_part p = {0, 2049};
        llm_step("positions 0..2048", &c, &p, 1, 10000.0f, 2.0f, 1, seed++, 0);
        llm_cache_free(&c);
    }

    /* ViT attention: SigLIP-like and DINOv2-like full sizes, small test sizes, fused layout, padded
     * output rows, fewer keys than rows, large scores, rising scores, odd head_dim */
    test_attention_dense(261, 1024, 16, 0, 0, 261, 2.0f, 0, seed++, 1);
    test_attention_batch(261, 1024, 16, 4, seed++, 0); /* DINOv2-L, 4 images */
    test_attention_batch(256, 1152, 16, 3, seed++, 0); /* SigLIP so400m (head_dim 72), 3 images */
    test_attention_batch(1600, 1024, 16, 6, seed++, 1); /* EVA-02-L's global layers, six cameras */
    test_attention_batch(256, 1024, 16, 54, seed++, 1); /* its windows: 9 a camera */
    test_attention_dense(256, 1152, 16, 0, 0, 256, 2.0f, 0, seed++, 1);
    test_attention_dense(256, 1152, 16, 1, 8, 256, 2.0f, 0, seed++, 0);
    test_attention_dense(197, 64, 8, 0, 0, 197, 2.0f, 0, seed++, 0);
    test_attention_dense(200, 48, 12, 1, 5, 200, 2.0f, 0, seed++, 0);
    test_attention_dense(200, 64, 16, 0, 0, 200, 2.0f, 1, seed++, 0);
    test_attention_dense(197, 24, 8, 0, 1, 197, 2.0f, 0, seed++, 0);  /* hd 3 */
    test_attention_dense(40, 1024, 16, 0, 0, 23, 2.0f, 0, seed++, 0); /* 23 keys */
    test_attention_dense(64, 512, 4, 0, 0, 64, 8.0f, 0, seed++, 0);   /* hd 128, scores ~ +-100 */
    test_attention_dense(64, 1024, 4, 1, 0, 64, 1.0f, 1, seed++, 0);  /* hd 256 */
    test_attention_dense(33, 800, 4, 0, 0, 33, 1.0f, 0, seed++, 0);   /* hd 200: E 8, partial lanes */
    test_attention_dense(3, 96, 1, 0, 0, 3, 2.0f, 0, seed++, 0);      /* hd 96, R < warps per block */
    test_attention_dense(256, 1184, 16, 1, 0, 256, 2.0f, 0, seed++, 0); /* hd 74: 2-byte loads, E 4 */
    test_attention_dense(200, 495, 15, 1, 0, 200, 2.0f, 0, seed++, 0);  /* hd 33: 2-byte loads, E 2 */
    test_attention_rows(4, 2, 64, 0, seed++);
    test_attention_rows(8, 2, 128, 0, seed++);
    test_attention_rows(4, 4, 72, 0, seed++);
    test_attention_rows(4, 1, 128, 1, seed++);
    test_attention_rows(6, 3, 16, 2, seed++);
    test_attention_rows(2, 1, 33, 0, seed++);

    /* few-row linear layers: odd sizes, padded rows, every M, accumulate; then the decode step's
     * shapes of Llama-2 7B (q|k|v, o, gate|up, down, LM head), timed */
    test_gemv(1, 37, 64, 0, 0, 0, seed++, 0);
    test_gemv(3, 45, 136, 8, 5, 1, seed++, 0);
    test_gemv(8, 129, 1032, 16, 1, 0, seed++, 0);
    test_gemv(5, 64, 8, 0, 3, 1, seed++, 0);
    test_gemv(2, 300, 11008, 0, 0, 1, seed++, 0);
    test_gemv(7, 17, 4096, 8, 0, 0, seed++, 0);
    test_gemv(1, 12288, 4096, 0, 0, 0, seed++, 1);
    test_gemv(1, 4096, 4096, 0, 0, 1, seed++, 1);
    test_gemv(1, 22016, 4096, 0, 0, 0, seed++, 1);
    test_gemv(1, 4096, 11008, 0, 0, 1, seed++, 1);
    test_gemv(1, 32000, 4096, 0, 0, 0, seed++, 1);
    test_gemv(4, 22016, 4096, 0, 0, 0, seed++, 1);
    test_gemv(8, 4096, 11008, 0, 0, 1, seed++, 1);

    /* embeddings, argmax, ViT input side */
    test_embed_rows(1000, 4096, 20, 0, seed++);
    test_embed_rows(50, 37, 9, 0, seed++);
    test_embed_rows(50, 64, 9, 1, seed++);
    test_argmax(12, 32064, 0, seed++);
    test_argmax(300, 32064, 0, seed++);
    test_argmax(12, 32064, 1, seed++);
    test_argmax(12, 1001, 0, seed++);
    test_argmax(12, 7, 0, seed++);
    test_argmax(4, 1, 0, seed++);
    test_argmax(3, 0, 0, seed++);
    test_im2col(224, 14, seed++);
    test_im2col(224, 16, seed++);
    test_im2col(30, 7, seed++);
    test_im2col(31, 7, seed++);
    test_assemble(256, 1024, 1, 4, 0, 1, 1, seed++); /* DINOv2 with registers */
    test_assemble(256, 1152, 0, 0, 0, 1, 1, seed++); /* SigLIP */
    test_assemble(9, 24, 1, 0, 1, 1, 1, seed++);     /* cls, pos over the prefix */
    test_assemble(7, 37, 1, 2, 1, 0, 1, seed++);
    test_assemble(5, 24, 0, 3, 0, 1, 0, seed++);     /* registers only, no pos */
    test_gather(256, 5, 1024, 0, 1152, 0, seed++);
    test_gather(16, 1, 24, 0, 37, 3, seed++);

    timings();

    printf("%-26s %6s %10s %12s %16s\n", "kernel", "cases", "values", "max |err|", "max err/allowed");
    for (int k = 0; k < K_COUNT; k++)
        printf("%-26s %6ld %10ld %12.4g %16.4g\n", g_stats[k].name, g_stats[k].checks, g_stats[k].values,
               g_stats[k].max_abs, g_stats[k].max_ratio);
    if (g_failures) {
        printf("FAILED: %ld check(s)\n", g_failures);
        return 1;
    }
    printf("all kernels passed\n");
    return 0;
}
