/*
 * vhk_attention against a float64 naive attention (full max-subtracted softmax per row and head).
 *
 * Tolerance, per output value, from the fp32 error sources of the kernel:
 *  - each score s_j = scale * q.k_j carries at most E_s = (hd/16 + 6) u scale sum_d |q_d k_jd|
 *    + u |s_j| (16-lane sums of hd/16 terms, a 4-level tree, the scale);
 *  - softmax weights then carry a relative error of at most 2 E_s + a few u (expf, rescaling);
 *  - the weighted sum of n_keys values accumulates n_keys roundings of at most u max|v|.
 * allowed = max|v_d| (4 max_j E_s + 2 (n_keys + 8) u). An off-by-one key, a wrong kv head or a
 * wrong scale moves outputs by ~max|v| / n_keys or more, far above this for n_keys <= 300.
 */
#include <math.h>

#include "cpu_kernels.h"
#include "kernel_test_util.h"
#include "test_support.h"

typedef struct attn_case {
    const char *name;
    int64_t n_rows, n_kv, n_heads, n_kv_heads, head_dim, first_position;
    int causal;
    int fused_qkv;            /* ViT layout: q, k, v interleaved in one [T, 3D] buffer */
    int64_t pad;              /* extra floats at the end of every q / kv / out row */
    float qk_scale;           /* magnitude of q and k values */
    int rising_scores;        /* keys aligned with the query more and more: max rises per block */
} attn_case;

static void reference(const vhk_attention_args *a, double *ref, double *allowed)
{
    int64_t hd = a->head_dim, group = a->n_heads / a->n_kv_heads;
    double *s = test_alloc_doubles(a->n_kv);
    for (int64_t i = 0; i < a->n_rows; i++) {
        for (int64_t h = 0; h < a->n_heads; h++) {
            int64_t n_keys = a->n_kv;
            if (a->causal && a->first_position + i + 1 < n_keys) n_keys = a->first_position + i + 1;
            const float *q = a->q + i * a->q_stride + h * hd;
            int64_t kvo = (h / group) * hd;
            double m = -INFINITY, max_es = 0;
            for (int64_t j = 0; j < n_keys; j++) {
                const float *k = a->k + j * a->kv_stride + kvo;
                double dot = 0, mag = 0;
                for (int64_t d = 0; d < hd; d++) {
                    dot += (double)q[d] * k[d];
                    mag += fabs((double)q[d] * k[d]);
                }
                s[j] = dot * a->scale;
                double es = (hd / 16 + 6) * FP32_U * fabs(a->scale) * mag + FP32_U * fabs(s[j]);
                if (es > max_es) max_es = es;
                if (s[j] > m) m = s[j];
            }
            double sum = 0;
            for (int64_t j = 0; j < n_keys; j++) {
                s[j] = exp(s[j] - m);
                sum += s[j];
            }
            for (int64_t d = 0; d < hd; d++) {
                double acc = 0, vmax = 0;
                for (int64_t j = 0; j < n_keys; j++) {
                    double v = a->v[j * a->kv_stride + kvo + d];
                    acc += s[j] * v;
                    if (fabs(v) > vmax) vmax = fabs(v);
                }
                int64_t o = i * a->out_stride + h * hd + d;
                ref[o] = acc / sum;
                allowed[o] = vmax * (4 * max_es + 2 * (double)(n_keys + 8) * FP32_U) + 1e-30;
            }
        }
    }
    free(s);
}

static void run_case(const attn_case *c, uint64_t seed)
{
    test_rng rng = test_rng_seed(seed);
    int64_t hd = c->head_dim, dq = c->n_heads * hd, dkv = c->n_kv_heads * hd;
    int64_t q_stride, kv_stride, out_stride = dq + c->pad;
    float *q_buf, *k_buf, *v_buf, *qkv = NULL;
    float *q_own = NULL, *k_own = NULL, *v_own = NULL;
    if (c->fused_qkv) { /* n_rows == n_kv, n_heads == n_kv_heads: rows [q | k | v | pad] */
        q_stride = kv_stride = 3 * dq + c->pad;
        qkv = test_alloc_floats(c->n_kv * q_stride);
        test_fill(&rng, qkv, c->n_kv * q_stride, 1.0f);
        q_buf = qkv;
        k_buf = qkv + dq;
        v_buf = qkv + 2 * dq;
        for (int64_t t = 0; t < c->n_kv; t++)
            for (int64_t x = 0; x < 2 * dq; x++) qkv[t * q_stride + x] *= c->qk_scale;
    } else {
        q_stride = dq + c->pad;
        kv_stride = dkv + c->pad;
        q_own = test_alloc_floats(c->n_rows * q_stride);
        k_own = test_alloc_floats(c->n_kv * kv_stride);
        v_own = test_alloc_floats(c->n_kv * kv_stride);
        test_fill(&rng, q_own, c->n_rows * q_stride, c->qk_scale);
        test_fill(&rng, k_own, c->n_kv * kv_stride, c->qk_scale);
        test_fill(&rng, v_own, c->n_kv * kv_stride, 1.0f);
        if (c->rising_scores) { /* k_j = (j / n_kv) * 4 * q_row0 + noise: scores rise with j */
            for (int64_t j = 0; j < c->n_kv; j++)
                for (int64_t x = 0; x < dkv; x++)
                    k_own[j * kv_stride + x] = (float)(4.0 * j / c->n_kv) * q_own[x % dq] +
                                               test_rng_float(&rng, 0.1f);
        }
        q_buf = q_own;
        k_buf = k_own;
        v_buf = v_own;
    }

    int64_t n_out = c->n_rows * out_stride;
    double *ref = test_alloc_doubles(n_out), *allowed = test_alloc_doubles(n_out);
    float *outs[4];
    vh_thread_pool *pools[4] = {NULL, vh_thread_pool_create(1), vh_thread_pool_create(2),
                                vh_thread_pool_create(3)};
    vhk_attention_args a = {q_buf, q_stride, k_buf, v_buf, kv_stride, NULL, out_stride, c->n_rows,
                            c->n_kv, c->n_heads, c->n_kv_heads, hd, c->first_position, c->causal,
                            1.0f / sqrtf((float)hd)};
    for (int p = 0; p < 4; p++) {
        outs[p] = test_alloc_floats(n_out);
        for (int64_t i = 0; i < n_out; i++) outs[p][i] = -777.0f; /* sentinel for the padding */
        a.out = outs[p];
        vhk_attention(pools[p], &a);
    }
    reference(&a, ref, allowed);

    double worst = 0;
    int64_t worst_at = -1, pad_touched = 0;
    for (int64_t r = 0; r < c->n_rows; r++) {
        for (int64_t x = 0; x < out_stride; x++) {
            int64_t o = r * out_stride + x;
            if (x >= dq) {
                pad_touched += outs[0][o] != -777.0f;
                continue;
            }
            double e = fabs(outs[0][o] - ref[o]) / allowed[o];
            if (!(e <= worst)) { worst = e; worst_at = o; }
        }
    }
    ck_assert_msg(worst <= 1.0, "%s: error %.3g x the tolerance at %lld (got %.9g want %.9g)", c->name,
                  worst, (long long)worst_at, worst_at >= 0 ? outs[0][worst_at] : 0.0,
                  worst_at >= 0 ? ref[worst_at] : 0.0);
    ck_assert_msg(pad_touched == 0, "%s: wrote past the heads into the row padding", c->name);
    for (int p = 1; p < 4; p++)
        ck_assert_msg(memcmp(outs[0], outs[p], (size_t)n_out * sizeof(float)) == 0,
                      "%s: pool %d gives different bits", c->name, p);
    for (int p = 0; p < 4; p++) {
        free(outs[p]);
        vh_thread_pool_destroy(pools[p]);
    }
    free(ref); free(allowed); free(qkv); free(q_own); free(k_own); free(v_own);
}

/* name, rows, n_kv, heads, kv_heads, hd, first, causal, fused, pad, qk_scale, rising */
static const attn_case cases[] = {
    {"vit fused qkv, non-causal", 261, 261, 4, 4, 64, 0, 0, 1, 3, 1.0f, 0},
    {"vit fused qkv, hd 72", 64, 64, 2, 2, 72, 0, 0, 1, 0, 1.0f, 0},
    {"llama prefill, causal", 64, 64, 8, 8, 128, 0, 1, 0, 0, 1.0f, 0},
    {"causal, first_position 20, GQA 8/2", 7, 27, 8, 2, 16, 20, 1, 0, 5, 1.0f, 0},
    {"decode, MQA 4/1, hd 72", 1, 300, 4, 1, 72, 299, 1, 0, 0, 1.0f, 0},
    {"rows 2, hd 7, non-causal", 2, 5, 3, 3, 7, 0, 0, 0, 1, 1.0f, 0},
    {"rows 3, GQA 6/3, hd 20", 3, 130, 6, 3, 20, 127, 1, 0, 2, 1.0f, 0},
    {"large scores (stability)", 5, 200, 2, 2, 64, 0, 0, 0, 0, 20.0f, 0},
    {"rising max across blocks", 2, 300, 2, 1, 32, 0, 0, 0, 0, 1.0f, 1},
    {"causal window clamped to n_kv", 5, 10, 2, 2, 16, 8, 1, 0, 0, 1.0f, 0},
    {"single key", 3, 1, 2, 1, 16, 0, 0, 0, 0, 1.0f, 0},
};

START_TEST(test_attention_cases)
{
    const attn_case *c = &cases[_i];
    run_case(c, 100 + (uint64_t)_i);
}
END_TEST

/* With one key the output is exactly that key's value (weight exp(0) / exp(0)). */
START_TEST(test_attention_single_key_exact)
{
    float q[8] = {1, 2, 3, 4, 5, 6, 7, 8}, k[8] = {8, 7, 6, 5, 4, 3, 2, 1};
    float v[8] = {0.1f, -2, 3e-5f, 4, 5, 6, 7, 1e20f}, out[8];
    vhk_attention_args a = {q, 8, k, v, 8, out, 8, 1, 1, 2, 2, 4, 0, 0, 0.5f};
    vhk_attention(NULL, &a);
    ck_assert(memcmp(out, v, sizeof v) == 0);
}
END_TEST

static Suite *attention_suite(void)
{
    Suite *s = suite_create("kernels_attention");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_attention_cases, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_test(tc, test_attention_single_key_exact);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return vh_test_run_suite(attention_suite());
}
