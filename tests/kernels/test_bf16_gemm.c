/*
 * cpu_amx's bf16 GEMM (backends/cpu_amx/bf16_gemm.h) against a float64 naive reference written
 * here: packing (bf16, f16 and f32 sources; STACK and GATED layouts, checked element by element
 * against the documented tile layout), the activations (fp32 rows, optional RMSNorm prologue,
 * checked against the test's own bf16 rounding, in the tiled layout and, on the small cases, the
 * plain rows one), and y = epilogue(x . W^T) for every epilogue
 * (STORE with and without bias, ADD onto a non-zero y, GELU, SILU_MUL of a gated pair), row strides on
 * x and y (y a column slice of a wider buffer whose other columns must stay untouched), both
 * micro-kernels (AVX-512 bf16 always; AMX where the CPU has it; AUTO), pools of 1, 2 and 16
 * OpenMP threads, on the shapes of Llama-2-7B, DINOv2-L, SigLIP so400m and small uneven ones.
 *
 * The reference takes the SAME bf16 inputs the GEMM sees: W rounded to bf16 (round to nearest
 * even, from the source's exact value), x rounded to bf16 after the optional RMSNorm; products of
 * two bf16 values are exact in fp32 and in double, so the only error of a correct GEMM is its
 * fp32 accumulation (plus the epilogue's few roundings). Per output,
 *   M = sum_k |x_k w_k| (+ |bias| + |y0| for ADD),
 *   |got - ref| <= TOL M + flips + 1e-30,                       TOL = 1e-5 (about 168 u).
 * TOL is a statistical bound, not Higham's worst case (which is (K-1) u M, 6.6e-4 M at K = 11008):
 * with random signs the partial sums stay ~sqrt(K) terms wide and the rounding errors add like a
 * random walk, so a correct kernel lands near u M whatever its summation order or K blocking;
 * 168 u leaves two orders of magnitude. A wrong, dropped or doubled term of average size
 * M / K (K <= 11008) moves y by >= 9 TOL M, a dropped K step of 32 terms by hundreds of TOL M.
 *
 * flips: with the RMSNorm prologue, the normalised value v_k = x_k * rsqrt(mean(x^2) + eps) * g_k
 * is computed in fp32 by the code under test and in double here. The fp32 value is within a
 * relative RMS_REL(K) = (K / 2 + 8) u of the double one: the fp32 sum of K positive squares is
 * within (K - 1) u relative in any summation order, the rsqrt halves that, and the division by
 * K, the eps, the rsqrt and the two products add a few u. Where v_k (1 - RMS_REL) and
 * v_k (1 + RMS_REL) round to different bf16 values, a correct implementation may produce either
 * one: such an input is "ambiguous", the reference uses the rounding of v_k and the bound adds
 * |bf16_hi - bf16_lo| |w_k| for it (only for those k: the bound stays tight elsewhere). The
 * activations themselves are checked the same way: each element must be the rounding of v_k, or
 * one of the two candidates where ambiguous (+0 and -0 alike), and their padding (columns up to
 * k_steps * 32, rows up to a multiple of 32) zero, also after a load of more rows.
 *
 * GELU: y = gelu(v), v the sum (+ bias) with its bound e_v; GELU's slope is at most 1.129 (at
 * x = sqrt 2), so the bound is 1.13 e_v plus GELU_REL = 1e-5 of |y| (erfc's fit, 1.2e-7, e^x and
 * the products in fp32); the reference is (v / 2) erfc(-v / sqrt 2), exact where GELU vanishes.
 *
 * SILU_MUL: y = silu(g) u from the gate and up sums, each with its bound e_g, e_u above. silu's
 * slope is at most 1.0999 (at g ~ 2.4), so |silu(g') u' - silu(g) u| <= 1.1 e_g (|u| + e_u) +
 * |silu(g)| e_u, plus SILU_REL = 1e-5 of |y| for silu in fp32 (expf or a vectorised polynomial
 * exp, the divide, the product). The big gated shape drives |g| to ~100: exp overflow handling
 * is part of the test.
 *
 * Big shapes are sampled to keep CI fast: every row at 48 columns (the first, the last, the
 * padded edge, panel and 16-column boundaries, source boundaries, the rest random) and three rows
 * at every column; every output column of a STORE must be written and finite. Small shapes are
 * checked everywhere, with every pool size and kernel choice.
 *
 * Without AVX-512 bf16 (CI can be AVX2-only) the whole test is skipped (exit 77). Without AMX the
 * AMX cases are skipped with a note, except one small case that checks the documented fallback
 * (BF16_KERNEL_AMX runs the AVX-512 kernel).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bf16_gemm.h"
#include "kernel_test_util.h"
#include "test_support.h"
#include "thread_pool_openmp.h"

#define TOL 1e-5
#define SILU_REL 1e-5
#define GELU_REL 1e-5
#define ABS_FLOOR 1e-30
#define RMS_EPS 1e-5f
#define SENTINEL -4242.0f
#define N_SAMPLED_COLS 48

static double rms_rel(int64_t k)
{
    return ((double)k / 2 + 8) * FP32_U;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- the test's own bf16 rounding ---------------------------------------------------------- */

/* Exact double -> bf16 value, round to nearest even (normal range; 0 stays 0). No double
 * rounding through fp32. */
static float bf16_round_double(double v)
{
    if (v == 0) return (float)v;
    int e;
    double m = frexp(v, &e);                /* v = m 2^e, 0.5 <= |m| < 1 */
    double q = nearbyint(ldexp(m, 8));      /* 8 significant bits, ties to even */
    return (float)ldexp(q, e - 8);
}

static uint16_t bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

static uint16_t f16_to_bf16_table[65536];

static void init_tables(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        double v = test_f16_value((uint16_t)h);
        f16_to_bf16_table[h] = isnan(v) ? 0x7FC0 : test_bf16_encode((float)v);
    }
}

/* ---- weights ------------------------------------------------------------------------------- */

typedef struct source {
    vh_tensor_view view;
    int64_t n, k;
} source;

static const char *dtype_name(vh_dtype d)
{
    return d == VH_DTYPE_F32 ? "f32" : d == VH_DTYPE_F16 ? "f16" : "bf16";
}

static void make_source(source *s, test_rng *rng, vh_dtype dtype, int64_t n, int64_t k, const char *name)
{
    int64_t count = n * k;
    void *data = test_alloc((size_t)count * (dtype == VH_DTYPE_F32 ? 4 : 2));
    for (int64_t i = 0; i < count; i++) {
        if (dtype == VH_DTYPE_BF16) {
            ((uint16_t *)data)[i] = test_bf16_encode(test_rng_float(rng, 1.0f));
        } else if (dtype == VH_DTYPE_F16) {
            /* |w| in [2^-15, 2) with some f16 subnormals (exponent field 0) */
            ((uint16_t *)data)[i] = test_f16_random(rng, 0, 15);
        } else {
            float f = test_rng_float(rng, 1.0f);
            if (i % 97 == 5) { /* an exact tie between two bf16 values: rounds to even */
                uint32_t u;
                memcpy(&u, &f, sizeof u);
                u = (u & 0xFFFF0000u) | 0x8000u;
                memcpy(&f, &u, sizeof f);
            }
            ((float *)data)[i] = f;
        }
    }
    vh_tensor_view v = {data, dtype, 2, {n, k, 0, 0}, name, 0};
    s->view = v;
    s->n = n;
    s->k = k;
}

static void free_source(source *s)
{
    free((void *)s->view.data);
}

/* Row j's bf16 bits as the packed matrix must hold them. */
static inline uint16_t source_bits(const source *s, int64_t j, int64_t kk)
{
    int64_t i = j * s->k + kk;
    if (s->view.dtype == VH_DTYPE_BF16) return ((const uint16_t *)s->view.data)[i];
    if (s->view.dtype == VH_DTYPE_F16) return f16_to_bf16_table[((const uint16_t *)s->view.data)[i]];
    return test_bf16_encode(((const float *)s->view.data)[i]);
}

static void source_row(const source *s, int64_t j, float *out)
{
    for (int64_t kk = 0; kk < s->k; kk++) out[kk] = (float)test_bf16_value(source_bits(s, j, kk));
}

/* ---- cases --------------------------------------------------------------------------------- */

#define MAX_ROW_COUNTS 6

typedef struct gemm_case {
    const char *name;
    bf16_pack_layout layout;
    int n_src;
    int64_t n_i[3];
    int64_t k;
    vh_dtype dtype;
    int64_t rows[MAX_ROW_COUNTS];  /* row counts, in this order (0 ends the list) */
    bf16_epilogue epilogue;
    int bias, rms;
    int64_t x_pad, y_col, y_pad;   /* extra floats after each x row; y's offset and extra columns */
    int threads;                   /* pool size; 0: each of 1, 2 and 16 */
    int with_auto;                 /* also BF16_KERNEL_AUTO (and the AMX fallback without AMX) */
} gemm_case;

static const gemm_case cases[] = {
    /* Llama-2-7B (kv heads = heads: q, k and v are 4096 each) */
    {"llama qkv 4096->3x4096", BF16_PACK_STACK, 3, {4096, 4096, 4096}, 4096, VH_DTYPE_BF16, {1, 276},
     BF16_EPI_STORE, 0, 1, 3, 0, 5, 2, 1},
    {"llama gate|up 4096->2x11008", BF16_PACK_GATED, 2, {11008, 11008}, 4096, VH_DTYPE_BF16, {64, 7},
     BF16_EPI_SILU_MUL, 0, 1, 0, 2, 3, 2, 0},
    {"llama down 11008->4096", BF16_PACK_STACK, 1, {4096}, 11008, VH_DTYPE_F32, {16},
     BF16_EPI_ADD, 0, 0, 3, 0, 4, 1, 0},
    {"llama o 4096->4096", BF16_PACK_STACK, 1, {4096}, 4096, VH_DTYPE_F16, {1, 64},
     BF16_EPI_ADD, 1, 0, 0, 2, 1, 2, 0},
    {"llama up 4096->11008", BF16_PACK_STACK, 1, {11008}, 4096, VH_DTYPE_F32, {7},
     BF16_EPI_STORE, 0, 1, 1, 0, 3, 16, 0},
    /* DINOv2-L */
    {"dinov2 qkv 1024->3x1024", BF16_PACK_STACK, 3, {1024, 1024, 1024}, 1024, VH_DTYPE_BF16, {1124},
     BF16_EPI_STORE, 1, 0, 0, 0, 7, 2, 1},
    {"dinov2 fc1 1024->4096 gelu", BF16_PACK_STACK, 1, {4096}, 1024, VH_DTYPE_F16, {276},
     BF16_EPI_GELU, 1, 0, 2, 1, 2, 1, 0},
    {"dinov2 fc2 4096->1024", BF16_PACK_STACK, 1, {1024}, 4096, VH_DTYPE_BF16, {64},
     BF16_EPI_ADD, 1, 0, 0, 0, 16, 2, 0},
    /* SigLIP so400m (4304 is not a multiple of 32) */
    {"siglip qkv 1152->3x1152", BF16_PACK_STACK, 3, {1152, 1152, 1152}, 1152, VH_DTYPE_F32, {276},
     BF16_EPI_STORE, 1, 0, 1, 0, 2, 2, 0},
    {"siglip fc1 1152->4304 gelu", BF16_PACK_STACK, 1, {4304}, 1152, VH_DTYPE_BF16, {16},
     BF16_EPI_GELU, 1, 0, 0, 3, 1, 2, 0},
    {"siglip fc2 4304->1152", BF16_PACK_STACK, 1, {1152}, 4304, VH_DTYPE_BF16, {1124},
     BF16_EPI_ADD, 1, 0, 3, 0, 2, 2, 0},
    /* the ViTs' patch embedding as a GEMM: 14 x 14 x 3 = 588 inputs */
    {"patch embed 588->1024", BF16_PACK_STACK, 1, {1024}, 588, VH_DTYPE_F32, {276},
     BF16_EPI_STORE, 1, 0, 5, 1, 1, 2, 0},
    /* small and uneven, checked everywhere, pools of 1, 2 and 16 */
    {"stack 64+32+32 k96", BF16_PACK_STACK, 3, {64, 32, 32}, 96, VH_DTYPE_BF16, {7, 1, 33, 16, 8},
     BF16_EPI_STORE, 0, 1, 0, 0, 1, 0, 1},
    {"stack 40+24+17 k75", BF16_PACK_STACK, 3, {40, 24, 17}, 75, VH_DTYPE_F32, {2, 65, 1, 9, 31},
     BF16_EPI_ADD, 1, 0, 3, 2, 5, 0, 1},
    {"stack 40+24+17 k75 store rms", BF16_PACK_STACK, 3, {40, 24, 17}, 75, VH_DTYPE_F16, {33, 3},
     BF16_EPI_STORE, 1, 1, 1, 1, 1, 0, 1},
    {"gated 2x40 k100", BF16_PACK_GATED, 2, {40, 40}, 100, VH_DTYPE_F16, {5, 40, 1, 8},
     BF16_EPI_SILU_MUL, 0, 1, 2, 3, 2, 0, 1},
    {"gated 2x16 k32", BF16_PACK_GATED, 2, {16, 16}, 32, VH_DTYPE_BF16, {32, 3},
     BF16_EPI_SILU_MUL, 0, 0, 0, 0, 1, 0, 1},
    {"gated 2x7 k33", BF16_PACK_GATED, 2, {7, 7}, 33, VH_DTYPE_F32, {1, 17},
     BF16_EPI_SILU_MUL, 0, 1, 0, 1, 1, 0, 1},
    {"tiny 1x1", BF16_PACK_STACK, 1, {1}, 1, VH_DTYPE_F32, {1, 2, 40},
     BF16_EPI_STORE, 1, 0, 0, 0, 1, 0, 1},
    {"odd 33x33", BF16_PACK_STACK, 1, {33}, 33, VH_DTYPE_BF16, {17, 1, 96},
     BF16_EPI_STORE, 0, 1, 1, 1, 0, 0, 1},
    {"gelu 70 k50 (every lane count)", BF16_PACK_STACK, 1, {70}, 50, VH_DTYPE_F32, {1, 33, 5},
     BF16_EPI_GELU, 1, 1, 0, 0, 1, 0, 1},
    {"long k 100x4099", BF16_PACK_STACK, 2, {60, 40}, 4099, VH_DTYPE_F16, {3, 40},
     BF16_EPI_ADD, 1, 1, 2, 0, 3, 0, 1},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))
#define N_SMALL_CASES 9 /* the last ones: small and uneven */

/* ---- the packed matrix, against the documented layout ---------------------------------------- */

static void check_packed(const gemm_case *c, const source *src, const bf16_packed *p, int64_t n_total)
{
    int64_t k = c->k;
    ck_assert_int_eq(p->n, n_total);
    ck_assert_int_eq(p->k, k);
    ck_assert_int_eq(p->n_panels, (n_total + 31) / 32);
    ck_assert_int_eq(p->k_steps, (k + 31) / 32);
    ck_assert_int_eq(p->layout, c->layout);
    ck_assert_ptr_nonnull(p->data);
    ck_assert_msg(((uintptr_t)p->data & 63) == 0, "%s: packed data not 64-byte aligned", c->name);
    ck_assert_uint_eq(bf16_packed_bytes(p), (uint64_t)p->n_panels * (uint64_t)p->k_steps * 1024 * 2);

    /* which source row each padded column is (NULL: padding) */
    int64_t ncols = p->n_panels * 32;
    const source **col_src = test_alloc((size_t)ncols * sizeof *col_src);
    int64_t *col_row = test_alloc((size_t)ncols * sizeof *col_row);
    for (int64_t col = 0; col < ncols; col++) {
        col_src[col] = NULL;
        col_row[col] = 0;
        if (c->layout == BF16_PACK_GATED) {
            /* interleaved 16 at a time: panel q holds gate 16q..16q+15, then up 16q..16q+15 */
            int64_t which = (col / 16) % 2, row = (col / 32) * 16 + col % 16;
            if (row < src[which].n) col_src[col] = &src[which], col_row[col] = row;
        } else {
            int64_t row = col;
            for (int s = 0; s < c->n_src; s++) {
                if (row < src[s].n) {
                    col_src[col] = &src[s], col_row[col] = row;
                    break;
                }
                row -= src[s].n;
            }
        }
    }
    int64_t bad = 0, first_bad = -1;
    const uint16_t *d = p->data;
    for (int64_t panel = 0; panel < p->n_panels; panel++) {
        for (int64_t step = 0; step < p->k_steps; step++) {
            const uint16_t *blk = d + (panel * p->k_steps + step) * 1024;
            for (int t = 0; t < 2; t++) {
                for (int j = 0; j < 16; j++) {
                    for (int cc = 0; cc < 16; cc++) {
                        int64_t col = panel * 32 + t * 16 + cc;
                        for (int e = 0; e < 2; e++) {
                            int64_t kk = step * 32 + 2 * j + e;
                            uint16_t want = 0;
                            if (col_src[col] && kk < k) want = source_bits(col_src[col], col_row[col], kk);
                            uint16_t got = blk[t * 512 + j * 32 + cc * 2 + e];
                            if (got != want) {
                                if (first_bad < 0) first_bad = (blk - d) + t * 512 + j * 32 + cc * 2 + e;
                                bad++;
                            }
                        }
                    }
                }
            }
        }
    }
    ck_assert_msg(bad == 0, "%s: %lld packed elements differ from the documented layout (first at element %lld)",
                  c->name, (long long)bad, (long long)first_bad);
    free(col_src);
    free(col_row);
}

/* ---- activations ----------------------------------------------------------------------------- */

/* The inputs the GEMM must see, per row: xr (the bf16 rounding of x or of RMSNorm(x) in double)
 * and dx (|bf16_hi - bf16_lo| where the prologue's fp32 error can flip the rounding, else 0), with
 * the two candidates' bits lo / hi for the activation check. */
typedef struct inputs {
    float *xr, *dx;
    uint16_t *lo, *hi;
} inputs;

static inputs make_inputs(const float *x, int64_t x_stride, int64_t rows, int64_t k, const float *g)
{
    inputs in = {test_alloc_floats(rows * k), test_alloc_floats(rows * k),
                 test_alloc((size_t)(rows * k) * 2), test_alloc((size_t)(rows * k) * 2)};
    double rel = rms_rel(k);
    for (int64_t r = 0; r < rows; r++) {
        const float *xrow = x + r * x_stride;
        double scale = 1;
        if (g) {
            double ss = 0;
            for (int64_t kk = 0; kk < k; kk++) ss += (double)xrow[kk] * xrow[kk];
            scale = 1 / sqrt(ss / (double)k + (double)RMS_EPS);
        }
        for (int64_t kk = 0; kk < k; kk++) {
            int64_t i = r * k + kk;
            if (!g) {
                uint16_t h = test_bf16_encode(xrow[kk]);
                in.xr[i] = (float)test_bf16_value(h);
                in.dx[i] = 0;
                in.lo[i] = in.hi[i] = h;
                continue;
            }
            double v = (double)xrow[kk] * scale * (double)g[kk];
            float a = bf16_round_double(v * (1 - rel)), b = bf16_round_double(v * (1 + rel));
            in.xr[i] = bf16_round_double(v);
            in.dx[i] = fabsf(a - b);
            in.lo[i] = bf16_bits(a);
            in.hi[i] = bf16_bits(b);
        }
    }
    return in;
}

static void free_inputs(inputs *in)
{
    free(in->xr); free(in->dx); free(in->lo); free(in->hi);
}

/* Where bf16_gemm.h's layouts put element (r, kk); kk < k_steps * 32. */
static int64_t act_index(const bf16_activations *a, int64_t r, int64_t kk)
{
    return (r / 32) * a->block_stride + (r % 32) * a->row_stride + (kk / 32) * a->step_stride + kk % 32;
}

static void check_activations(const char *what, const bf16_activations *a, const inputs *in, int64_t rows,
                              int64_t k)
{
    /* bf16_gemm.h: K steps of 32, rows to a multiple of 32; tiles: a row block's step is one 2 KB
     * pair of tiles; rows: plain rows one cache line (32 bf16) longer than their steps */
    const int64_t width = (k + 31) / 32 * 32, padded_rows = (rows + 31) / 32 * 32;
    const int64_t stride = a->tiled ? width : width + 32;
    ck_assert_msg(a->rows == rows && a->k == k && a->stride == stride,
                  "%s: activations rows %lld k %lld stride %lld, expected %lld %lld %lld", what, (long long)a->rows,
                  (long long)a->k, (long long)a->stride, (long long)rows, (long long)k, (long long)stride);
    if (a->tiled)
        ck_assert_msg(a->row_stride == 32 && a->step_stride == 1024 && a->block_stride == 32 * width,
                      "%s: tiled strides %lld %lld %lld", what, (long long)a->row_stride, (long long)a->step_stride,
                      (long long)a->block_stride);
    else
        ck_assert_msg(a->row_stride == stride && a->step_stride == 32 && a->block_stride == 32 * stride,
                      "%s: row strides %lld %lld %lld", what, (long long)a->row_stride, (long long)a->step_stride,
                      (long long)a->block_stride);
    ck_assert_msg(a->capacity >= (size_t)(padded_rows * stride), "%s: capacity %zu below %lld rows of %lld", what,
                  a->capacity, (long long)padded_rows, (long long)stride);
    int64_t bad = 0, bad_pad = 0, first_r = -1, first_k = -1;
    for (int64_t r = 0; r < padded_rows; r++) {
        for (int64_t kk = 0; kk < width; kk++) {
            uint16_t got = a->data[act_index(a, r, kk)];
            if (r >= rows || kk >= k) {
                bad_pad += got != 0;
                continue;
            }
            int64_t i = r * k + kk;
            int zeros = (got & 0x7FFF) == 0 && (in->lo[i] & 0x7FFF) == 0; /* +0 and -0 alike */
            if (got != in->lo[i] && got != in->hi[i] && !zeros) {
                if (first_r < 0) first_r = r, first_k = kk;
                bad++;
            }
        }
        for (int64_t kk = width; !a->tiled && kk < stride; kk++) bad_pad += a->data[r * stride + kk] != 0;
    }
    if (bad) {
        const int64_t i = first_r * k + first_k;
        const uint16_t got = a->data[act_index(a, first_r, first_k)];
        ck_abort_msg("%s: %lld activations differ from the bf16 rounding (first row %lld col %lld: got %#06x = %.9g,"
                     " expected %#06x or %#06x = %.9g)",
                     what, (long long)bad, (long long)first_r, (long long)first_k, got, test_bf16_value(got),
                     in->lo[i], in->hi[i], (double)in->xr[i]);
    }
    ck_assert_msg(bad_pad == 0, "%s: %lld padding activations (columns >= k or rows up to a multiple of 32) not zero",
                  what, (long long)bad_pad);
}

/* ---- reference --------------------------------------------------------------------------------- */

typedef struct expect {
    double ref, allowed;
} expect;

static void dot3(const float *x, const float *dx, const float *w, int64_t k, double out[3])
{
    double dot = 0, mag = 0, flip = 0;
    for (int64_t kk = 0; kk < k; kk++) {
        double t = (double)x[kk] * (double)w[kk];
        dot += t;
        mag += fabs(t);
    }
    for (int64_t kk = 0; kk < k; kk++) flip += (double)dx[kk] * fabs((double)w[kk]);
    out[0] = dot, out[1] = mag, out[2] = flip;
}

static double silu(double g)
{
    return g / (1 + exp(-g));
}

static double gelu(double x)
{
    return 0.5 * x * erfc(-x / sqrt(2.0)); /* (x / 2) (1 + erf(x / sqrt 2)), accurate where it vanishes */
}

/* The expected value at one (row, y column) from the sums of the weight row(s). */
static expect expected(bf16_epilogue epi, const double s[3], const double su[3], double bias, double y0)
{
    expect e;
    if (epi == BF16_EPI_SILU_MUL) {
        double eg = TOL * s[1] + s[2], eu = TOL * su[1] + su[2];
        double sg = silu(s[0]), u = su[0];
        e.ref = sg * u;
        e.allowed = 1.1 * eg * (fabs(u) + eu) + fabs(sg) * eu +
                    SILU_REL * (fabs(sg) + 1.1 * eg) * (fabs(u) + eu) + ABS_FLOOR;
        return e;
    }
    if (epi == BF16_EPI_GELU) {
        const double v = s[0] + bias, ev = TOL * (s[1] + fabs(bias)) + s[2];
        e.ref = gelu(v);
        e.allowed = 1.13 * ev + GELU_REL * (fabs(e.ref) + 1.13 * ev) + ABS_FLOOR;
        return e;
    }
    e.ref = s[0] + bias + (epi == BF16_EPI_ADD ? y0 : 0);
    e.allowed = TOL * (s[1] + fabs(bias) + (epi == BF16_EPI_ADD ? fabs(y0) : 0)) + s[2] + ABS_FLOOR;
    return e;
}

/* ---- one case ---------------------------------------------------------------------------------- */

typedef struct run_ctx {
    const gemm_case *c;
    source src[3];
    int64_t n_total;           /* packed columns */
    int64_t ny;                /* y columns */
    float *bias;               /* [n_total] or NULL */
    float *g;                  /* RMSNorm weight [k] or NULL */
    test_rng rng;
} run_ctx;

/* Weight row(s) of y column j: w (the packed column j, or the gate row) and wu (the up row). */
static void weight_rows(const run_ctx *ctx, int64_t j, float *w, float *wu)
{
    if (ctx->c->layout == BF16_PACK_GATED) {
        source_row(&ctx->src[0], j, w);
        source_row(&ctx->src[1], j, wu);
        return;
    }
    for (int s = 0; s < ctx->c->n_src; s++) {
        if (j < ctx->src[s].n) {
            source_row(&ctx->src[s], j, w);
            return;
        }
        j -= ctx->src[s].n;
    }
    ck_abort_msg("column out of range");
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The y columns to check at every row: all of them (full), or the edges and boundaries and random
 * ones, N_SAMPLED_COLS in all. Returns the count. */
static int64_t pick_columns(run_ctx *ctx, int full, int64_t *out)
{
    int64_t ny = ctx->ny, count = 0;
    if (full) {
        for (int64_t j = 0; j < ny; j++) out[count++] = j;
        return count;
    }
    int64_t fixed[64], nf = 0;
    int64_t edges[] = {0, 1, 15, 16, 17, 31, 32, 33, ny - 1, ny - 2, ny - 16, ny - 17, (ny - 1) / 32 * 32,
                       (ny - 1) / 32 * 32 - 1, (ny - 1) / 16 * 16};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) fixed[nf++] = edges[i];
    if (ctx->c->layout == BF16_PACK_STACK) {
        int64_t b = 0;
        for (int s = 0; s + 1 < ctx->c->n_src; s++) {
            b += ctx->src[s].n;
            fixed[nf++] = b - 1, fixed[nf++] = b, fixed[nf++] = b + 1;
        }
    }
    for (int64_t i = 0; i < nf; i++) {
        int64_t j = fixed[i], dup = 0;
        if (j < 0 || j >= ny) continue;
        for (int64_t q = 0; q < count; q++) dup |= out[q] == j;
        if (!dup) out[count++] = j;
    }
    while (count < N_SAMPLED_COLS && count < ny) {
        int64_t j = (int64_t)(test_rng_u64(&ctx->rng) % (uint64_t)ny), dup = 0;
        for (int64_t q = 0; q < count; q++) dup |= out[q] == j;
        if (!dup) out[count++] = j;
    }
    qsort(out, (size_t)count, sizeof *out, cmp_i64);
    return count;
}

typedef struct check_set {
    int64_t rows, n_cols, n_full_rows;
    int64_t *cols;             /* checked at every row */
    int64_t full_rows[3];      /* checked at every column (sampled cases) */
    expect *at_cols;           /* [rows][n_cols] */
    expect *at_rows;           /* [n_full_rows][ny] */
} check_set;

static void compute_expectations(run_ctx *ctx, check_set *cs, const inputs *in, const float *y0, int64_t ys)
{
    const gemm_case *c = ctx->c;
    int64_t k = c->k, rows = cs->rows, ny = ctx->ny;
    float *w = test_alloc_floats(k), *wu = test_alloc_floats(k);
    int gated = c->epilogue == BF16_EPI_SILU_MUL;
    cs->at_cols = test_alloc((size_t)(rows * cs->n_cols) * sizeof(expect));
    cs->at_rows = test_alloc((size_t)(cs->n_full_rows * ny) * sizeof(expect));
    for (int64_t q = 0; q < ny; q++) {
        int64_t j = q;
        int sampled = 0;
        int64_t col_index = -1;
        /* cols is sorted */
        int64_t lo = 0, hi = cs->n_cols - 1;
        while (lo <= hi) {
            int64_t mid = (lo + hi) / 2;
            if (cs->cols[mid] == j) { col_index = mid; break; }
            if (cs->cols[mid] < j) lo = mid + 1; else hi = mid - 1;
        }
        sampled = col_index >= 0;
        if (!sampled && cs->n_full_rows == 0) continue;
        weight_rows(ctx, j, w, wu);
        double b = ctx->bias && !gated ? ctx->bias[j] : 0;
        for (int64_t r = 0; r < rows; r++) {
            int64_t fr = -1;
            for (int64_t f = 0; f < cs->n_full_rows; f++)
                if (cs->full_rows[f] == r) fr = f;
            if (!sampled && fr < 0) continue;
            double s[3], su[3] = {0, 0, 0};
            dot3(in->xr + r * k, in->dx + r * k, w, k, s);
            if (gated) dot3(in->xr + r * k, in->dx + r * k, wu, k, su);
            expect e = expected(c->epilogue, s, su, b, y0 ? y0[r * ys + j] : 0);
            if (sampled) cs->at_cols[r * cs->n_cols + col_index] = e;
            if (fr >= 0) cs->at_rows[fr * ny + j] = e;
        }
    }
    free(w);
    free(wu);
}

/* Compare y (the slice: rows x ny, ys apart, inside a buffer with y_col columns before it) with
 * the expectations; returns the worst error as a fraction of the allowed one. */
static double check_y(const run_ctx *ctx, const check_set *cs, const float *buf, int64_t ys, const char *what)
{
    const gemm_case *c = ctx->c;
    int64_t ny = ctx->ny, rows = cs->rows;
    double worst = 0;
    int64_t worst_r = -1, worst_j = -1;
    double worst_got = 0, worst_ref = 0, worst_allowed = 0;
#define CONSIDER(r_, j_, e_)                                                                                   \
    do {                                                                                                       \
        double got_ = buf[(r_) * ys + c->y_col + (j_)];                                                        \
        double ratio_ = fabs(got_ - (e_).ref) / (e_).allowed;                                                  \
        if (!(ratio_ <= worst)) {                                                                              \
            worst = isnan(ratio_) ? INFINITY : ratio_;                                                         \
            worst_r = (r_), worst_j = (j_), worst_got = got_, worst_ref = (e_).ref, worst_allowed = (e_).allowed; \
        }                                                                                                      \
    } while (0)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t q = 0; q < cs->n_cols; q++) CONSIDER(r, cs->cols[q], cs->at_cols[r * cs->n_cols + q]);
    for (int64_t f = 0; f < cs->n_full_rows; f++)
        for (int64_t j = 0; j < ny; j++) CONSIDER(cs->full_rows[f], j, cs->at_rows[f * ny + j]);
#undef CONSIDER
    ck_assert_msg(worst <= 1.0,
                  "%s: rows %lld: y[%lld][%lld] = %.9g, reference %.9g, |error| %.3g = %.3g x the bound %.3g", what,
                  (long long)rows, (long long)worst_r, (long long)worst_j, worst_got, worst_ref,
                  fabs(worst_got - worst_ref), worst, worst_allowed);

    /* every row: the columns outside the slice untouched (and the guard row below), every
     * output finite, and a STORE / SILU_MUL wrote every column */
    int64_t outside = 0, unwritten = 0, nonfinite = 0, first_nonfinite = -1;
    for (int64_t r = 0; r <= rows; r++) {
        for (int64_t col = 0; col < ys; col++) {
            float v = buf[r * ys + col];
            int64_t j = col - c->y_col;
            if (r == rows || j < 0 || j >= ny) {
                outside += memcmp(&v, &(float){SENTINEL}, sizeof v) != 0;
                continue;
            }
            if (c->epilogue != BF16_EPI_ADD) unwritten += v == SENTINEL;
            if (!isfinite(v)) {
                if (first_nonfinite < 0) first_nonfinite = r * ny + j;
                nonfinite++;
            }
        }
    }
    ck_assert_msg(outside == 0, "%s: rows %lld: %lld values outside y's slice (padding columns or the row after)"
                  " changed", what, (long long)rows, (long long)outside);
    ck_assert_msg(unwritten == 0, "%s: rows %lld: %lld outputs never written", what, (long long)rows,
                  (long long)unwritten);
    ck_assert_msg(nonfinite == 0, "%s: rows %lld: %lld outputs not finite (first row %lld col %lld)", what,
                  (long long)rows, (long long)nonfinite, (long long)(first_nonfinite / ny),
                  (long long)(first_nonfinite % ny));
    return worst;
}

static const char *kernel_name(bf16_kernel k)
{
    return k == BF16_KERNEL_AMX ? "amx" : k == BF16_KERNEL_AVX512 ? "avx512" : "auto";
}

static void run_gemm_case(int _i)
{
    const gemm_case *c = &cases[_i];
    double t_start = now_s();
    init_tables();
    run_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.c = c;
    ctx.rng = test_rng_seed(1000 + (uint64_t)_i);
    static const char *names[3] = {"w0", "w1", "w2"};
    for (int s = 0; s < c->n_src; s++) make_source(&ctx.src[s], &ctx.rng, c->dtype, c->n_i[s], c->k, names[s]);
    for (int s = 0; s < c->n_src; s++) ctx.n_total += c->n_i[s];
    ctx.ny = c->epilogue == BF16_EPI_SILU_MUL ? c->n_i[0] : ctx.n_total;
    if (c->bias) {
        ctx.bias = test_alloc_floats(ctx.n_total);
        test_fill(&ctx.rng, ctx.bias, ctx.n_total, 1.0f);
    }
    if (c->rms) {
        ctx.g = test_alloc_floats(c->k);
        for (int64_t kk = 0; kk < c->k; kk++) ctx.g[kk] = 0.25f + 1.25f * fabsf(test_rng_float(&ctx.rng, 1.0f));
        for (int64_t kk = 0; kk < c->k; kk += 7) ctx.g[kk] = -ctx.g[kk];
    }

    int has_amx = bf16_gemm_has_amx();
    bf16_kernel kernels[3];
    int n_kernels = 0;
    kernels[n_kernels++] = BF16_KERNEL_AVX512;
    if (has_amx) kernels[n_kernels++] = BF16_KERNEL_AMX;
    else if (c->with_auto && c->threads == 0) kernels[n_kernels++] = BF16_KERNEL_AMX; /* the fallback */
    if (c->with_auto) kernels[n_kernels++] = BF16_KERNEL_AUTO;
    if (!has_amx && c->threads != 0)
        printf("%s: no AMX on this CPU: the AMX kernel's cases skipped\n", c->name);

    int thread_list[3] = {c->threads, 0, 0}, n_pools = 1;
    if (c->threads == 0) thread_list[0] = 1, thread_list[1] = 2, thread_list[2] = 16, n_pools = 3;
    vh_thread_pool *pools[3];
    bf16_gemm_scratch *scratch[3];
    for (int q = 0; q < n_pools; q++) {
        pools[q] = vh_thread_pool_create_openmp(thread_list[q], 0);
        ck_assert_ptr_nonnull(pools[q]);
        ck_assert_int_eq(vh_thread_pool_size(pools[q]), thread_list[q]);
        scratch[q] = bf16_gemm_scratch_create(thread_list[q]);
        ck_assert_ptr_nonnull(scratch[q]);
    }

    /* pack (with every pool: the same bits), check the layout */
    const vh_tensor_view *views[3] = {&ctx.src[0].view, &ctx.src[1].view, &ctx.src[2].view};
    bf16_packed packed;
    char err[256] = "";
    double t0 = now_s();
    vh_status st = bf16_pack(pools[0], views, c->n_src, c->layout, &packed, err, sizeof err);
    double t_pack = now_s() - t0;
    ck_assert_msg(st == VH_OK, "%s: bf16_pack: status %d: %s", c->name, (int)st, err);
    check_packed(c, ctx.src, &packed, ctx.n_total);
    for (int q = 1; q < n_pools; q++) {
        bf16_packed again;
        ck_assert_int_eq(bf16_pack(pools[q], views, c->n_src, c->layout, &again, err, sizeof err), VH_OK);
        ck_assert_msg(memcmp(again.data, packed.data, bf16_packed_bytes(&packed)) == 0,
                      "%s: packing on %d threads gives other bits", c->name, thread_list[q]);
        bf16_packed_free(&again);
    }
    double t_checks = 0, t_gemm = 0;

    bf16_activations act;
    memset(&act, 0, sizeof act);
    int64_t max_cols = ctx.ny < 64 ? 64 : ctx.ny;
    int64_t *cols = test_alloc((size_t)max_cols * sizeof *cols);
    for (int ri = 0; ri < MAX_ROW_COUNTS && c->rows[ri]; ri++) {
        int64_t rows = c->rows[ri], k = c->k;
        int64_t xs = k + c->x_pad, ys = c->y_col + ctx.ny + c->y_pad;
        int full = rows * ctx.ny * k * (c->epilogue == BF16_EPI_SILU_MUL ? 2 : 1) <= 30000000;
        float *x = test_alloc_floats(rows * xs);
        test_fill(&ctx.rng, x, rows * xs, 2.0f);
        /* a row of one value and a row of mostly zeros, where there is room */
        if (rows > 2) {
            for (int64_t kk = 0; kk < k; kk++) x[1 * xs + kk] = 0.75f;
            for (int64_t kk = 0; kk < k; kk++) if (kk % 5) x[2 * xs + kk] = 0;
        }
        if (rows > 3)
            for (int64_t kk = 0; kk < k; kk++) x[3 * xs + kk] = 0;
        float *y0 = NULL;
        if (c->epilogue == BF16_EPI_ADD) {
            y0 = test_alloc_floats((rows + 1) * ys);
            test_fill(&ctx.rng, y0, (rows + 1) * ys, 10.0f);
            for (int64_t r = 0; r <= rows; r++)
                for (int64_t col = 0; col < ys; col++)
                    if (r == rows || col < c->y_col || col >= c->y_col + ctx.ny) y0[r * ys + col] = SENTINEL;
        }
        t0 = now_s();
        inputs in = make_inputs(x, xs, rows, k, ctx.g);
        check_set cs = {rows, 0, 0, cols, {0, 0, 0}, NULL, NULL};
        cs.n_cols = pick_columns(&ctx, full, cols);
        if (!full) {
            int64_t fr[3] = {0, 1 + (int64_t)(test_rng_u64(&ctx.rng) % (uint64_t)(rows > 2 ? rows - 2 : 1)), rows - 1};
            for (int f = 0; f < 3; f++) {
                int dup = fr[f] >= rows;
                for (int64_t q = 0; q < cs.n_full_rows; q++) dup |= cs.full_rows[q] == fr[f];
                if (!dup) cs.full_rows[cs.n_full_rows++] = fr[f];
            }
        }
        compute_expectations(&ctx, &cs, &in, y0 ? y0 + c->y_col : NULL, ys);
        t_checks += now_s() - t0;

        float *buf = test_alloc_floats((rows + 1) * ys);
        for (int q = 0; q < n_pools; q++) {
            char what[160];
            snprintf(what, sizeof what, "%s (%s)", c->name, dtype_name(c->dtype));
            ck_assert_int_eq(bf16_activations_load(pools[q], &act, x, xs, rows, k, ctx.g, RMS_EPS), VH_OK);
            check_activations(what, &act, &in, rows, k);
            for (int ki = 0; ki < n_kernels; ki++) {
                snprintf(what, sizeof what, "%s (%s, %s kernel, %d threads%s%s)", c->name, dtype_name(c->dtype),
                         kernel_name(kernels[ki]), thread_list[q], c->rms ? ", rmsnorm" : "",
                         c->bias ? ", bias" : "");
                if (y0) memcpy(buf, y0, (size_t)((rows + 1) * ys) * sizeof(float));
                else for (int64_t i = 0; i < (rows + 1) * ys; i++) buf[i] = SENTINEL;
                bf16_gemm_args args = {&act, &packed, ctx.bias, c->epilogue, buf + c->y_col, ys};
                t0 = now_s();
                bf16_gemm(pools[q], scratch[q], &args, kernels[ki]);
                double t = now_s() - t0;
                t_gemm += t;
                t0 = now_s();
                double worst = check_y(&ctx, &cs, buf, ys, what);
                t_checks += now_s() - t0;
                printf("  %-72s rows %4lld: %8.2f ms, worst %.3f of the bound%s\n", what, (long long)rows, t * 1e3,
                       worst, full ? "" : " (sampled)");
            }
        }
        free(buf);
        free(cs.at_cols);
        free(cs.at_rows);
        free_inputs(&in);
        free(x);
        free(y0);
    }
    printf("%s: pack %.2f s, gemm %.2f s, reference and checks %.2f s, all %.2f s\n", c->name, t_pack, t_gemm,
           t_checks, now_s() - t_start);
    fflush(stdout);
    free(cols);
    bf16_activations_free(&act);
    bf16_packed_free(&packed);
    for (int q = 0; q < n_pools; q++) {
        bf16_gemm_scratch_destroy(scratch[q]);
        vh_thread_pool_destroy(pools[q]);
    }
    for (int s = 0; s < c->n_src; s++) free_source(&ctx.src[s]);
    free(ctx.bias);
    free(ctx.g);
}

START_TEST(test_gemm_cases)
{
    run_gemm_case(_i);
}
END_TEST

/* The activations' other layout (plain rows, VH_BF16_A_LAYOUT=rows) on the small and uneven cases
 * (each test runs in its own process: the variable stays there). */
START_TEST(test_gemm_cases_rows_layout)
{
    setenv("VH_BF16_A_LAYOUT", "rows", 1);
    bf16_activations probe;
    memset(&probe, 0, sizeof probe);
    const float x[1] = {1.0f};
    ck_assert(bf16_activations_load(NULL, &probe, x, 1, 1, 1, NULL, 0.0f) == VH_OK);
    /* the layout is read once a process: this test needs a process of its own (check's fork mode) */
    ck_assert_msg(!probe.tiled, "VH_BF16_A_LAYOUT=rows not in effect: the layout was read before (CK_FORK=no?)");
    bf16_activations_free(&probe);
    run_gemm_case(N_CASES - N_SMALL_CASES + _i);
}
END_TEST

/* ---- bad input ---------------------------------------------------------------------------------- */

static void expect_invalid(vh_thread_pool *pool, const vh_tensor_view *const *src, int n_src, bf16_pack_layout layout,
                           const char *what)
{
    bf16_packed p;
    memset(&p, 0, sizeof p);
    char err[256] = "";
    vh_status st = bf16_pack(pool, src, n_src, layout, &p, err, sizeof err);
    ck_assert_msg(st == VH_ERR_INVALID_ARGUMENT, "%s: status %d, expected VH_ERR_INVALID_ARGUMENT", what, (int)st);
    ck_assert_msg(err[0] != 0, "%s: no message", what);
    printf("  refused %-40s %s\n", what, err);
    /* a short buffer still gets a terminated message */
    char small[8];
    memset(small, 'x', sizeof small);
    st = bf16_pack(pool, src, n_src, layout, &p, small, sizeof small);
    ck_assert_int_eq(st, VH_ERR_INVALID_ARGUMENT);
    ck_assert_msg(memchr(small, 0, sizeof small) != NULL, "%s: message not terminated in a short buffer", what);
}

START_TEST(test_pack_bad_input)
{
    vh_thread_pool *pool = vh_thread_pool_create_openmp(2, 0);
    test_rng rng = test_rng_seed(77);
    source a, b, c, d, e;
    make_source(&a, &rng, VH_DTYPE_BF16, 40, 100, "a");   /* [40, 100] */
    make_source(&b, &rng, VH_DTYPE_BF16, 48, 100, "b");   /* other n */
    make_source(&c, &rng, VH_DTYPE_F32, 40, 96, "c");     /* other k */
    make_source(&d, &rng, VH_DTYPE_F16, 40, 100, "d");    /* same shape, other dtype */
    make_source(&e, &rng, VH_DTYPE_BF16, 40, 100, "e");
    e.view.dtype = (vh_dtype)7;                           /* not a dtype */

    const vh_tensor_view *none[1] = {&a.view};
    expect_invalid(pool, none, 0, BF16_PACK_STACK, "STACK of no source");
    expect_invalid(pool, none, 0, BF16_PACK_GATED, "GATED of no source");
    const vh_tensor_view *one[1] = {&a.view};
    expect_invalid(pool, one, 1, BF16_PACK_GATED, "GATED of one source");
    const vh_tensor_view *three[3] = {&a.view, &a.view, &a.view};
    expect_invalid(pool, three, 3, BF16_PACK_GATED, "GATED of three sources");
    const vh_tensor_view *gated_n[2] = {&a.view, &b.view};
    expect_invalid(pool, gated_n, 2, BF16_PACK_GATED, "GATED [40,100] + [48,100]");
    const vh_tensor_view *gated_k[2] = {&a.view, &c.view};
    expect_invalid(pool, gated_k, 2, BF16_PACK_GATED, "GATED [40,100] + [40,96]");
    const vh_tensor_view *stack_k[3] = {&a.view, &b.view, &c.view};
    expect_invalid(pool, stack_k, 3, BF16_PACK_STACK, "STACK k 100, 100, 96");
    const vh_tensor_view *stack_k2[2] = {&c.view, &a.view};
    expect_invalid(pool, stack_k2, 2, BF16_PACK_STACK, "STACK k 96, 100");
    const vh_tensor_view *bad_dtype[2] = {&a.view, &e.view};
    expect_invalid(pool, bad_dtype, 2, BF16_PACK_STACK, "STACK with an unknown dtype");

    /* mixed dtypes of one k are fine: STACK and GATED */
    const vh_tensor_view *mixed_ok[2] = {&a.view, &d.view};
    bf16_packed p;
    char err[256] = "";
    ck_assert_msg(bf16_pack(pool, mixed_ok, 2, BF16_PACK_GATED, &p, err, sizeof err) == VH_OK, "%s", err);
    ck_assert_int_eq(p.n, 80);
    bf16_packed_free(&p);
    const vh_tensor_view *stack_ok[3] = {&a.view, &b.view, &d.view};
    ck_assert_msg(bf16_pack(pool, stack_ok, 3, BF16_PACK_STACK, &p, err, sizeof err) == VH_OK, "%s", err);
    ck_assert_int_eq(p.n, 128);
    ck_assert_int_eq(p.k, 100);
    bf16_packed_free(&p);

    free_source(&a); free_source(&b); free_source(&c); free_source(&d); free_source(&e);
    vh_thread_pool_destroy(pool);
}
END_TEST

/* Where AUTO switches: the default (VH_AMX_MIN_ROWS unset) is 8 rows. */
START_TEST(test_amx_min_rows)
{
    if (getenv("VH_AMX_MIN_ROWS")) return;
    ck_assert_int_eq(bf16_gemm_amx_min_rows(), 8);
    ck_assert(bf16_gemm_has_avx512_bf16());
}
END_TEST

static Suite *bf16_gemm_suite(void)
{
    Suite *s = suite_create("bf16_gemm");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_amx_min_rows);
    tcase_add_test(tc, test_pack_bad_input);
    tcase_add_loop_test(tc, test_gemm_cases, 0, N_CASES);
    tcase_add_loop_test(tc, test_gemm_cases_rows_layout, 0, N_SMALL_CASES);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!bf16_gemm_has_avx512_bf16()) {
        printf("skipped: this CPU has no AVX-512 bf16 (VDPBF16PS), which cpu_amx's GEMM needs\n");
        return 77;
    }
    return vh_test_run_suite(bf16_gemm_suite());
}
