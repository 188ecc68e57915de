/*
 * Multi-head attention for one sequence, fp32, with an online (blockwise) softmax.
 *
 * Work is split into tasks of (head, tile of up to TILE_ROWS consecutive query rows). A task walks
 * the keys in blocks of KEY_BLOCK; each key and value vector it loads serves every row of the
 * tile. Per row it keeps the running maximum m and denominator l and accumulates
 * sum_j exp(s_j - m) v_j directly in the output row; when a block raises the maximum, what was
 * accumulated is rescaled by exp(m_old - m_new). At the end the row is divided by l. Memory: one
 * block of scores per row of the tile, on the stack.
 *
 * Each row's arithmetic is the same sequence whatever tile or thread it lands in (keys in order,
 * a fixed reduction per dot product), so results do not depend on the pool size.
 *
 * Tasks are ordered head-major so a thread's contiguous share reuses one head's keys and values
 * from cache. For causal attention the tiles within a head are visited as 0, n-1, 1, n-2, ... so
 * every contiguous share gets a fair mix of short and long rows.
 *
 * Vector code uses GCC vector extensions (16 floats) compiled for AVX-512, AVX2 and baseline
 * x86-64 (target_clones); products and sums are separate roundings (no FMA contraction in ISO C
 * mode), so every clone gives the same bits. On aarch64 the same code is the NEON path: GCC lowers
 * each 16-float vector to four 128-bit Advanced SIMD registers (baseline there, no clones needed),
 * doing the same operations in the same order as the x86 clones.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_kernels.h"

#define KEY_BLOCK 64
#define TILE_ROWS 4
#define SHORT_HEAD 32 /* heads up to this width take short_head_scores */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VHK_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define VHK_CLONES
#endif
#define VHK_INLINE static inline __attribute__((always_inline))

typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

/* dot(a, b) over n: 16 lane sums over k, lanes combined pairwise (j + j+8, j + j+4, then
 * (0 + 2) + (1 + 3)), then the n % 16 leftover products added in order. */
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

typedef int32_t v16i __attribute__((vector_size(64)));

/* e^x on 16 lanes for x <= 0 (softmax weights), within 1.3 ulp of the true value (checked
 * exhaustively against double exp over [-87.3, 0]). x = n ln2 + r with |r| <= ln2/2 (Cody-Waite:
 * ln2 = 355/512 + LN2_LO, so n * 355/512 is exact), e^r by its degree-7 Taylor polynomial
 * (truncation < 6e-9), times 2^n built in the exponent bits. x < -87.3 (e^x < 2^-126, nothing next
 * to a row's largest weight, 1) gives 0; NaN stays NaN. Vectorises where glibc's expf cannot. */
VHK_INLINE void exp_nonpositive16(float values[16])
{
    const float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f,
                ln2_lo = -2.12194440054690583e-4f;
    v16f x, y;
    memcpy(&x, values, sizeof x);
    v16i n = __builtin_convertvector(x * log2e - 0.5f, v16i); /* truncation: ceil for x <= 0 */
    v16f nf = __builtin_convertvector(n, v16f);
    v16f r = (x - nf * ln2_hi) - nf * ln2_lo;
    v16f p = r * (1.0f / 5040) + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    v16i bits = (n + 127) << 23;
    memcpy(&y, &bits, sizeof y);
    y = p * y;
    v16i keep = ~(x < -87.3f), y_bits;  /* all-ones lanes, also for NaN */
    memcpy(&y_bits, &y, sizeof y_bits);
    y_bits &= keep;
    memcpy(values, &y_bits, sizeof y_bits);
}

/* p[j] = e^(p[j] - m) for j < n, where every p[j] <= m. */
VHK_INLINE void exp_shifted(float *p, int64_t n, float m)
{
    float lanes[16];
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
        int64_t count = n - j0 < 16 ? n - j0 : 16;
        for (int l = 0; l < 16; l++) lanes[l] = l < count ? p[j0 + l] - m : 0.0f;
        exp_nonpositive16(lanes);
        memcpy(p + j0, lanes, (size_t)count * sizeof(float));
    }
}

/* y *= a over n. */
VHK_INLINE void scale_f32(float *y, float a, int64_t n)
{
    for (int64_t k = 0; k < n; k++) y[k] *= a;
}

/* One task's rows: a tile of up to TILE_ROWS query rows of one head. */
typedef struct tile {
    int n;                            /* rows in the tile */
    const float *q[TILE_ROWS];
    float *out[TILE_ROWS];
    int64_t n_keys[TILE_ROWS];        /* keys row i attends to: [0, n_keys[i]) */
} tile;

/* For every row i of the tile with keys left in this block (nb[i] > 0):
 * out_i[d] += p[i][j] * v_j[d] for j < nb[i] in order. Runs d-outer, j-middle, i-inner, so each
 * value vector is loaded once for the whole tile and the tile's 16-wide output slices stay in
 * registers across the block; per (row, d) the sum is still sequential in j. */
VHK_INLINE void accumulate_values(const tile *t, float p[TILE_ROWS][KEY_BLOCK],
                                  const int64_t nb[TILE_ROWS], int64_t nb_max, const float *v,
                                  int64_t stride, int64_t n)
{
    int64_t d = 0;
    for (; d + 16 <= n; d += 16) {
        v16f acc[TILE_ROWS] = {{0}}, x;
        for (int i = 0; i < TILE_ROWS; i++)
            if (i < t->n) memcpy(&acc[i], t->out[i] + d, sizeof acc[i]);
        for (int64_t j = 0; j < nb_max; j++) {
            memcpy(&x, v + j * stride + d, sizeof x);
            for (int i = 0; i < TILE_ROWS; i++)
                if (i < t->n && j < nb[i]) acc[i] += p[i][j] * x;
        }
        for (int i = 0; i < TILE_ROWS; i++)
            if (i < t->n) memcpy(t->out[i] + d, &acc[i], sizeof acc[i]);
    }
    for (; d < n; d++) {
        for (int i = 0; i < t->n; i++) {
            float a = t->out[i][d];
            for (int64_t j = 0; j < nb[i]; j++) a += p[i][j] * v[j * stride + d];
            t->out[i][d] = a;
        }
    }
}

/* Scores of short heads (head_dim <= SHORT_HEAD: a DETR-style decoder's 32): there a per-key dot
 * product's lane reduction costs more than its products, so the block's keys are transposed once
 * for the tile and each row's 16 scores at a time accumulate over d in order (a row's arithmetic
 * still the same whatever its tile or thread). p[i][j] for j < nb_max (past it: zeros). */
VHK_INLINE void short_head_scores(const tile *t, float p[TILE_ROWS][KEY_BLOCK], int64_t nb_max, const float *k,
                                  int64_t stride, int64_t head_dim, float scale)
{
    enum { LANES = KEY_BLOCK / 8 };
    float kt[SHORT_HEAD][KEY_BLOCK];
    for (int64_t j = 0; j < KEY_BLOCK; j++) { /* key rows read whole, once */
        const float *kj = k + j * stride;
        for (int64_t d = 0; d < head_dim; d++) kt[d][j] = j < nb_max ? kj[d] : 0.0f;
    }
    for (int i = 0; i < t->n; i++) { /* d outer, the block's keys inner: independent lanes, no reduction */
        v8f acc[LANES] = {{0}}, x; /* the row's 64 scores, in registers (8-wide: every clone keeps them there) */
        for (int64_t d = 0; d < head_dim; d++) {
            const v8f qd = (v8f){0} + t->q[i][d];
            for (int c = 0; c < LANES; c++) {
                memcpy(&x, &kt[d][8 * c], sizeof x);
                acc[c] += qd * x;
            }
        }
        for (int c = 0; c < LANES; c++) {
            acc[c] *= scale;
            memcpy(p[i] + 8 * c, &acc[c], sizeof acc[c]);
        }
    }
}

/* Attention of a tile of query rows over keys/values k, v (rows kv_stride apart). */
VHK_CLONES
static void attend_tile(const tile *t, const float *k, const float *v, int64_t kv_stride,
                        int64_t head_dim, float scale)
{
    float p[TILE_ROWS][KEY_BLOCK];
    float running_max[TILE_ROWS], denominator[TILE_ROWS];
    int64_t nb[TILE_ROWS], keys_max = 0;
    for (int i = 0; i < t->n; i++) {
        running_max[i] = -INFINITY;
        denominator[i] = 0.0f;
        memset(t->out[i], 0, (size_t)head_dim * sizeof(float));
        if (t->n_keys[i] > keys_max) keys_max = t->n_keys[i];
    }
    for (int64_t j0 = 0; j0 < keys_max; j0 += KEY_BLOCK) {
        int64_t nb_max = 0;
        for (int i = 0; i < t->n; i++) {
            int64_t left = t->n_keys[i] - j0;
            nb[i] = left <= 0 ? 0 : left < KEY_BLOCK ? left : KEY_BLOCK;
            if (nb[i] > nb_max) nb_max = nb[i];
        }
        if (head_dim <= SHORT_HEAD) {
            short_head_scores(t, p, nb_max, k + j0 * kv_stride, kv_stride, head_dim, scale);
        } else { /* scores: each key vector serves all rows of the tile */
            for (int64_t j = 0; j < nb_max; j++) {
                const float *kj = k + (j0 + j) * kv_stride;
                for (int i = 0; i < t->n; i++)
                    if (j < nb[i]) p[i][j] = dot_f32(t->q[i], kj, head_dim) * scale;
            }
        }
        /* per row: new maximum, rescale, scores -> weights */
        for (int i = 0; i < t->n; i++) {
            if (nb[i] == 0) continue;
            float block_max = -INFINITY;
            for (int64_t j = 0; j < nb[i]; j++)
                if (p[i][j] > block_max) block_max = p[i][j];
            if (block_max > running_max[i]) {
                if (running_max[i] != -INFINITY) {
                    float c = expf(running_max[i] - block_max);
                    denominator[i] *= c;
                    scale_f32(t->out[i], c, head_dim);
                }
                running_max[i] = block_max;
            }
            exp_shifted(p[i], nb[i], running_max[i]);
            for (int64_t j = 0; j < nb[i]; j++) denominator[i] += p[i][j];
        }
        accumulate_values(t, p, nb, nb_max, v + j0 * kv_stride, kv_stride, head_dim);
    }
    for (int i = 0; i < t->n; i++) scale_f32(t->out[i], 1.0f / denominator[i], head_dim);
}

typedef struct attention_job {
    const vhk_attention_args *a;
    int64_t n_tiles;          /* tiles per head */
} attention_job;

static void attention_tasks(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const attention_job *job = ctx;
    const vhk_attention_args *a = job->a;
    int64_t group = a->n_heads / a->n_kv_heads, hd = a->head_dim;
    for (int64_t task = begin; task < end; task++) {
        int64_t head = task / job->n_tiles, slot = task % job->n_tiles, index = slot;
        if (a->causal) index = (slot % 2 == 0) ? slot / 2 : job->n_tiles - 1 - slot / 2;
        int64_t row0 = index * TILE_ROWS;

        tile t = {0};
        for (int64_t row = row0; row < a->n_rows && row < row0 + TILE_ROWS; row++) {
            int64_t n_keys = a->n_kv;
            if (a->causal && a->first_position + row + 1 < n_keys) n_keys = a->first_position + row + 1;
            float *out = a->out + row * a->out_stride + head * hd;
            if (n_keys <= 0) { /* nothing to attend to (n_kv == 0) */
                memset(out, 0, (size_t)hd * sizeof(float));
                continue;
            }
            t.q[t.n] = a->q + row * a->q_stride + head * hd;
            t.out[t.n] = out;
            t.n_keys[t.n] = n_keys;
            t.n++;
        }
        if (t.n == 0) continue;
        int64_t kv_offset = (head / group) * hd;
        attend_tile(&t, a->k + kv_offset, a->v + kv_offset, a->kv_stride, hd, a->scale);
    }
}

void vhk_attention(vh_thread_pool *pool, const vhk_attention_args *a)
{
    if (a->n_rows <= 0 || a->n_heads <= 0 || a->n_kv_heads <= 0 || a->head_dim <= 0) return;
    attention_job job = {a, (a->n_rows + TILE_ROWS - 1) / TILE_ROWS};
    int64_t work_per_task = TILE_ROWS * (a->n_kv > 0 ? a->n_kv : 1) * a->head_dim;
    int64_t grain = 1 + 32768 / work_per_task;
    vh_parallel_for(pool, job.n_tiles * a->n_heads, grain, attention_tasks, &job);
}
