/* LayerNorm (ViT) and RMSNorm (Llama), row by row, statistics in double.
 *
 * On aarch64 the loops have NEON forms (float64x2 pairs of the four accumulators, float32x4 for
 * RMSNorm's output) doing the same operations in the same order, so they give the C code's bits. */
#include <math.h>

#include "cpu_kernels.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

typedef struct norm_job {
    const float *x;
    float *y;
    int64_t dim;
    const float *weight;      /* gamma (LayerNorm) or weight (RMSNorm) */
    const float *beta;
    float eps;
} norm_job;

/* Rows per chunk so one chunk touches at least ~16K values. */
static int64_t rows_grain(int64_t dim)
{
    return 1 + 16384 / (dim > 0 ? dim : 1);
}

/* Sum of x[0..n), in double with four interleaved accumulators (fixed order). */
static double sum_f64(const float *x, int64_t n)
{
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t i = 0;
#if defined(__aarch64__)
    float64x2_t a01 = vdupq_n_f64(0), a23 = vdupq_n_f64(0);
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(x + i);
        a01 = vaddq_f64(a01, vcvt_f64_f32(vget_low_f32(v)));
        a23 = vaddq_f64(a23, vcvt_high_f64_f32(v));
    }
    a0 = vgetq_lane_f64(a01, 0); a1 = vgetq_lane_f64(a01, 1);
    a2 = vgetq_lane_f64(a23, 0); a3 = vgetq_lane_f64(a23, 1);
#endif
    for (; i + 4 <= n; i += 4) {
        a0 += x[i];
        a1 += x[i + 1];
        a2 += x[i + 2];
        a3 += x[i + 3];
    }
    for (; i < n; i++) a0 += x[i];
    return (a0 + a1) + (a2 + a3);
}

/* Sum of (x - c)^2 over x[0..n), like sum_f64. */
static double sum_sq_dev_f64(const float *x, int64_t n, double c)
{
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t i = 0;
#if defined(__aarch64__)
    float64x2_t a01 = vdupq_n_f64(0), a23 = vdupq_n_f64(0), cc = vdupq_n_f64(c);
    for (; i + 4 <= n; i += 4) {  /* separate multiply and add, as the C code (no fused form) */
        float32x4_t v = vld1q_f32(x + i);
        float64x2_t d01 = vsubq_f64(vcvt_f64_f32(vget_low_f32(v)), cc);
        float64x2_t d23 = vsubq_f64(vcvt_high_f64_f32(v), cc);
        a01 = vaddq_f64(a01, vmulq_f64(d01, d01));
        a23 = vaddq_f64(a23, vmulq_f64(d23, d23));
    }
    a0 = vgetq_lane_f64(a01, 0); a1 = vgetq_lane_f64(a01, 1);
    a2 = vgetq_lane_f64(a23, 0); a3 = vgetq_lane_f64(a23, 1);
#endif
    for (; i + 4 <= n; i += 4) {
        double d0 = x[i] - c, d1 = x[i + 1] - c, d2 = x[i + 2] - c, d3 = x[i + 3] - c;
        a0 += d0 * d0;
        a1 += d1 * d1;
        a2 += d2 * d2;
        a3 += d3 * d3;
    }
    for (; i < n; i++) {
        double d = x[i] - c;
        a0 += d * d;
    }
    return (a0 + a1) + (a2 + a3);
}

static void layernorm_rows(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const norm_job *job = ctx;
    int64_t dim = job->dim;
    for (int64_t r = begin; r < end; r++) {
        const float *x = job->x + r * dim;
        float *y = job->y + r * dim;
        double mean = sum_f64(x, dim) / (double)dim;
        double var = sum_sq_dev_f64(x, dim, mean) / (double)dim;  /* two-pass: no cancellation */
        double rstd = 1.0 / sqrt(var + (double)job->eps);
        int64_t c = 0;
#if defined(__aarch64__)
        float64x2_t mean2 = vdupq_n_f64(mean), rstd2 = vdupq_n_f64(rstd);
        for (; c + 4 <= dim; c += 4) {
            float32x4_t xv = vld1q_f32(x + c), wv = vld1q_f32(job->weight + c), bv = vld1q_f32(job->beta + c);
            float64x2_t lo = vmulq_f64(vsubq_f64(vcvt_f64_f32(vget_low_f32(xv)), mean2), rstd2);
            float64x2_t hi = vmulq_f64(vsubq_f64(vcvt_high_f64_f32(xv), mean2), rstd2);
            lo = vaddq_f64(vmulq_f64(lo, vcvt_f64_f32(vget_low_f32(wv))), vcvt_f64_f32(vget_low_f32(bv)));
            hi = vaddq_f64(vmulq_f64(hi, vcvt_high_f64_f32(wv)), vcvt_high_f64_f32(bv));
            vst1q_f32(y + c, vcvt_high_f32_f64(vcvt_f32_f64(lo), hi));
        }
#endif
        for (; c < dim; c++)
            y[c] = (float)(((double)x[c] - mean) * rstd * job->weight[c] + job->beta[c]);
    }
}

static void rmsnorm_rows(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const norm_job *job = ctx;
    int64_t dim = job->dim;
    for (int64_t r = begin; r < end; r++) {
        const float *x = job->x + r * dim;
        float *y = job->y + r * dim;
        double mean_sq = sum_sq_dev_f64(x, dim, 0.0) / (double)dim;
        float rs = (float)(1.0 / sqrt(mean_sq + (double)job->eps));
        int64_t c = 0;
#if defined(__aarch64__)
        for (; c + 4 <= dim; c += 4)
            vst1q_f32(y + c, vmulq_f32(vld1q_f32(job->weight + c), vmulq_n_f32(vld1q_f32(x + c), rs)));
#endif
        for (; c < dim; c++) y[c] = job->weight[c] * (x[c] * rs);
    }
}

void vhk_layernorm(vh_thread_pool *pool, const float *x, float *y, int64_t rows, int64_t dim,
                   const float *gamma, const float *beta, float eps)
{
    if (dim <= 0) return;
    norm_job job = {x, y, dim, gamma, beta, eps};
    vh_parallel_for(pool, rows, rows_grain(dim), layernorm_rows, &job);
}

void vhk_rmsnorm(vh_thread_pool *pool, const float *x, float *y, int64_t rows, int64_t dim,
                 const float *weight, float eps)
{
    if (dim <= 0) return;
    norm_job job = {x, y, dim, weight, NULL, eps};
    vh_parallel_for(pool, rows, rows_grain(dim), rmsnorm_rows, &job);
}
