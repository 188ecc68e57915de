/*
 * Multi-head attention for one sequence, fp32, with an online (blockwise) softmax.
 *
 * Each (query row, head) pair is one independent task: walk its keys in blocks of KEY_BLOCK,
 * keep the running maximum m and denominator l, and accumulate sum_j exp(s_j - m) v_j directly in
 * the output row; when a block raises the maximum, rescale what was accumulated by exp(m_old -
 * m_new). At the end divide by l. Memory: one block of scores on the stack.
 *
 * Tasks are ordered head-major (all rows of head 0, then head 1, ...) so a thread's contiguous
 * share of tasks reuses one head's keys and values from cache. For causal attention the rows
 * within a head are visited as 0, n-1, 1, n-2, ... so every contiguous share gets a fair mix of
 * short and long rows.
 *
 * Vector code uses GCC vector extensions (16 floats) compiled for AVX-512, AVX2 and baseline
 * x86-64 (target_clones); products and sums are separate roundings (no FMA contraction in ISO C
 * mode), so every clone gives the same bits.
 */
#include <math.h>
#include <string.h>

#include "cpu_kernels.h"

#define KEY_BLOCK 64

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VHK_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define VHK_CLONES
#endif
#define VHK_INLINE static inline __attribute__((always_inline))

typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

/* dot(a, b) over n: 16 lane sums over k, lanes combined pairwise (j + j+8, j + j+4, ...), then
 * the n % 16 leftover products added in order. */
VHK_INLINE float dot_f32(const float *a, const float *b, int64_t n)
{
    v16f acc = {0}, va, vb;
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
        memcpy(&va, a + k, sizeof va);
        memcpy(&vb, b + k, sizeof vb);
        acc += va * vb;
    }
    v8f lo, hi;
    memcpy(&lo, &acc, sizeof lo);
    memcpy(&hi, (char *)&acc + sizeof lo, sizeof hi);
    v8f s8 = lo + hi;
    v4f l4, h4;
    memcpy(&l4, &s8, sizeof l4);
    memcpy(&h4, (char *)&s8 + sizeof l4, sizeof h4);
    v4f s4 = l4 + h4;
    float s = (s4[0] + s4[2]) + (s4[1] + s4[3]);
    for (; k < n; k++) s += a[k] * b[k];
    return s;
}

/* y += a * x over n. */
VHK_INLINE void axpy_f32(float *y, float a, const float *x, int64_t n)
{
    for (int64_t k = 0; k < n; k++) y[k] += a * x[k];
}

/* y *= a over n. */
VHK_INLINE void scale_f32(float *y, float a, int64_t n)
{
    for (int64_t k = 0; k < n; k++) y[k] *= a;
}

/* Attention of one query vector over n_keys keys/values (rows kv_stride apart) into out. */
VHK_CLONES
static void attend_one(const float *q, const float *k, const float *v, int64_t kv_stride,
                       int64_t n_keys, int64_t head_dim, float scale, float *out)
{
    float scores[KEY_BLOCK];
    float running_max = -INFINITY, denominator = 0.0f;
    memset(out, 0, (size_t)head_dim * sizeof(float));
    for (int64_t j0 = 0; j0 < n_keys; j0 += KEY_BLOCK) {
        int64_t nb = n_keys - j0 < KEY_BLOCK ? n_keys - j0 : KEY_BLOCK;
        float block_max = -INFINITY;
        for (int64_t j = 0; j < nb; j++) {
            float s = dot_f32(q, k + (j0 + j) * kv_stride, head_dim) * scale;
            scores[j] = s;
            if (s > block_max) block_max = s;
        }
        if (block_max > running_max) {
            if (running_max != -INFINITY) {
                float c = expf(running_max - block_max);
                denominator *= c;
                scale_f32(out, c, head_dim);
            }
            running_max = block_max;
        }
        for (int64_t j = 0; j < nb; j++) {
            float p = expf(scores[j] - running_max);
            denominator += p;
            axpy_f32(out, p, v + (j0 + j) * kv_stride, head_dim);
        }
    }
    scale_f32(out, 1.0f / denominator, head_dim);
}

static void attention_tasks(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const vhk_attention_args *a = ctx;
    int64_t group = a->n_heads / a->n_kv_heads, hd = a->head_dim;
    for (int64_t t = begin; t < end; t++) {
        int64_t head = t / a->n_rows, slot = t % a->n_rows, row = slot;
        if (a->causal) row = (slot % 2 == 0) ? slot / 2 : a->n_rows - 1 - slot / 2;

        int64_t n_keys = a->n_kv;
        if (a->causal && a->first_position + row + 1 < n_keys) n_keys = a->first_position + row + 1;
        float *out = a->out + row * a->out_stride + head * hd;
        if (n_keys <= 0) {
            memset(out, 0, (size_t)hd * sizeof(float));
            continue;
        }
        int64_t kv_offset = (head / group) * hd;
        attend_one(a->q + row * a->q_stride + head * hd, a->k + kv_offset, a->v + kv_offset,
                   a->kv_stride, n_keys, hd, a->scale, out);
    }
}

void vhk_attention(vh_thread_pool *pool, const vhk_attention_args *a)
{
    if (a->n_rows <= 0 || a->n_heads <= 0 || a->n_kv_heads <= 0 || a->head_dim <= 0) return;
    int64_t work_per_task = (a->n_kv > 0 ? a->n_kv : 1) * a->head_dim;
    int64_t grain = 1 + 32768 / work_per_task;
    vh_parallel_for(pool, a->n_rows * a->n_heads, grain, attention_tasks, (void *)a);
}
