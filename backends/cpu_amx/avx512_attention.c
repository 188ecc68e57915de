/*
 * cpu_amx's attention for many query rows (an LLM prefill, a ViT's tokens), hand-written for
 * AVX-512 (fp32 in, fp32 out, FMA): the portable kernel (backends/cpu_kernels/attention.c)
 * reduces every query-key dot product across lanes, 7 ms a Llama-2-7B block at 276 rows on the
 * Xeon; here the keys lie along the lanes instead.
 *
 * The keys of each KV head are first transposed, Kt[d][j], and its values packed (one parallel
 * pass; the cache's rows are 4 KB multiples apart, which reading down a column pays for in L1
 * misses: 5 ms of a 276-row block before this copy). A task is one head
 * and a tile of 8 query rows; it walks the keys 16 at a time with an online softmax:
 *   scores s[r] (16 lanes) = sum_d q[r][d] Kt[d][j..j+15]      (8 x 16 FMAs a d)
 *   m' = max(m, max s), p = e^(s - m'), l = l e^(m - m') + sum p
 *   out[r] = out[r] e^(m - m') + sum_j p[r][j] v_j             (out in the caller's rows)
 * then divides by l. Causal rows see keys up to their own position; masked lanes weigh 0. Tasks
 * are taken in turn, the longest (last rows) first. Fewer rows go to the portable kernel. Heads
 * of any size (SigLIP's 72: the last 16 lanes masked).
 */
#include "avx512_attention.h"
#include "avx512_exp.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define TILE 8                         /* query rows a task */
#define KEYS 16                        /* keys a step: one zmm of scores a row */
#define MASKED (-1e30f)                /* a masked score: e^(MASKED - m) is 0 */
#define AVX512 __attribute__((target("avx512f")))

/* A call's keys and values, per KV head: Kt[d][j] rows ld = (keys rounded to 16) + 16 floats
 * apart, and the values [j][head_dim] packed. Rows 4 KB apart (the KV cache's, a context's) would
 * share one L1 set: 16 keys or 128 dimensions read down a column would miss every time. */
struct avx512_attention {
    float *kt, *v;
    size_t capacity;                   /* keys a head the buffer holds (a multiple of 16) */
    size_t floats;                     /* each buffer's */
};

static int64_t key_stride(int64_t n_kv) { return (n_kv + KEYS - 1) / KEYS * KEYS + KEYS; }

avx512_attention *avx512_attention_create(int64_t max_keys, int64_t kv_dim)
{
    avx512_attention *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    a->capacity = (size_t)((max_keys + KEYS - 1) / KEYS * KEYS);
    a->floats = (a->capacity + KEYS) * (size_t)(kv_dim > 0 ? kv_dim : 1);
    a->kt = aligned_alloc(64, sizeof(float) * a->floats);
    a->v = aligned_alloc(64, sizeof(float) * a->floats);
    if (!a->kt || !a->v) {
        avx512_attention_destroy(a);
        return NULL;
    }
    return a;
}

void avx512_attention_destroy(avx512_attention *a)
{
    if (!a) return;
    free(a->kt);
    free(a->v);
    free(a);
}

typedef struct attention_job {
    const vhk_attention_args *args;
    avx512_attention *a;
    int64_t n_tiles, n_tasks;
    _Atomic int64_t next;
} attention_job;

/* KV head h's keys transposed, Kt[d][j] = k[j][h hd + d] (keys past n_kv zero), and its values
 * packed, V[j][d] = v[j][h hd + d]. */
AVX512 static void gather_keys_values(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const attention_job *job = ctx;
    const vhk_attention_args *g = job->args;
    const int64_t hd = g->head_dim, n_kv = g->n_kv, ld = key_stride(n_kv);
    for (int64_t h = begin; h < end; h++) {
        float *kt = job->a->kt + h * hd * ld, *v = job->a->v + h * hd * ld;
        for (int64_t j = 0; j < n_kv; j++) {
            const float *key = g->k + j * g->kv_stride + h * hd;
            for (int64_t d = 0; d < hd; d++) kt[d * ld + j] = key[d];
            memcpy(v + j * hd, g->v + j * g->kv_stride + h * hd, sizeof(float) * (size_t)hd);
        }
        for (int64_t d = 0; d < hd; d++) memset(kt + d * ld + n_kv, 0, sizeof(float) * (size_t)(ld - n_kv));
    }
}

/* The lanes of head dimensions [d, d + 16) that exist (a head of 72: the last 8). */
static inline __mmask16 lanes_at(int64_t head_dim, int64_t d)
{
    return head_dim - d >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (head_dim - d)) - 1);
}

/* One task: head h, query rows [r0, r0 + n). */
AVX512 static void attend_tile(const attention_job *job, int64_t h, int64_t r0, int n)
{
    const vhk_attention_args *g = job->args;
    const int64_t hd = g->head_dim, ld = key_stride(g->n_kv), kvh = h / (g->n_heads / g->n_kv_heads);
    const float *kt = job->a->kt + kvh * hd * ld, *values = job->a->v + kvh * hd * ld;
    const float *q[TILE];
    float *out[TILE];
    int64_t n_keys[TILE];
    __m512 m[TILE], l[TILE];
    int64_t keys_max = 0;
    for (int r = 0; r < TILE; r++) {
        const int64_t row = r0 + (r < n ? r : n - 1); /* padding rows repeat the last one */
        q[r] = g->q + row * g->q_stride + h * hd;
        out[r] = g->out + row * g->out_stride + h * hd;
        n_keys[r] = g->causal ? g->first_position + row + 1 : g->n_kv;
        if (n_keys[r] > g->n_kv) n_keys[r] = g->n_kv;
        if (n_keys[r] > keys_max) keys_max = n_keys[r];
        m[r] = _mm512_set1_ps(MASKED);
        l[r] = _mm512_setzero_ps();
    }
    for (int r = 0; r < n; r++) memset(out[r], 0, sizeof(float) * (size_t)hd);
    const __m512 scale = _mm512_set1_ps(g->scale);
    float p[TILE][KEYS] __attribute__((aligned(64)));
    for (int64_t j0 = 0; j0 < keys_max; j0 += KEYS) {
        __m512 s[TILE];
        for (int r = 0; r < TILE; r++) s[r] = _mm512_setzero_ps();
        for (int64_t d = 0; d < hd; d++) {
            const __m512 k = _mm512_loadu_ps(kt + d * ld + j0);
            for (int r = 0; r < TILE; r++) s[r] = _mm512_fmadd_ps(_mm512_set1_ps(q[r][d]), k, s[r]);
        }
        __m512 correction[TILE];
        for (int r = 0; r < TILE; r++) {
            const int64_t valid = n_keys[r] - j0;
            const __mmask16 in = valid >= KEYS ? (__mmask16)0xffff : valid > 0 ? (__mmask16)((1u << valid) - 1) : 0;
            const __m512 sr = _mm512_mask_mov_ps(_mm512_set1_ps(MASKED), in, _mm512_mul_ps(s[r], scale));
            const __m512 m_new = _mm512_max_ps(m[r], _mm512_set1_ps(_mm512_reduce_max_ps(sr)));
            correction[r] = avx512_exp_nonpositive(_mm512_sub_ps(m[r], m_new));
            const __m512 pr = avx512_exp_nonpositive(_mm512_sub_ps(sr, m_new));
            l[r] = _mm512_add_ps(_mm512_mul_ps(l[r], correction[r]), _mm512_set1_ps(_mm512_reduce_add_ps(pr)));
            m[r] = m_new;
            _mm512_store_ps(p[r], pr);
        }
        const int64_t keys = keys_max - j0 < KEYS ? keys_max - j0 : KEYS;
        for (int64_t d = 0; d < hd; d += 16) {
            const __mmask16 lanes = lanes_at(hd, d);
            __m512 o[TILE];
            for (int r = 0; r < TILE; r++) o[r] = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, out[r] + d), correction[r]);
            for (int64_t j = 0; j < keys; j++) {
                const __m512 v = _mm512_maskz_loadu_ps(lanes, values + (j0 + j) * hd + d);
                for (int r = 0; r < TILE; r++) o[r] = _mm512_fmadd_ps(_mm512_set1_ps(p[r][j]), v, o[r]);
            }
            for (int r = 0; r < n; r++) _mm512_mask_storeu_ps(out[r] + d, lanes, o[r]);
        }
    }
    for (int r = 0; r < n; r++) {
        const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), l[r]);
        for (int64_t d = 0; d < hd; d += 16) {
            const __mmask16 lanes = lanes_at(hd, d);
            _mm512_mask_storeu_ps(out[r] + d, lanes, _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, out[r] + d), inv));
        }
    }
}

static void attend_tasks(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)begin;
    (void)end;
    (void)thread_index;
    attention_job *job = ctx;
    const vhk_attention_args *g = job->args;
    for (int64_t t; (t = atomic_fetch_add(&job->next, 1)) < job->n_tasks;) {
        const int64_t tile = job->n_tiles - 1 - t / g->n_heads, h = t % g->n_heads; /* longest first */
        const int64_t r0 = tile * TILE;
        attend_tile(job, h, r0, (int)(g->n_rows - r0 < TILE ? g->n_rows - r0 : TILE));
    }
}

int avx512_attention_fits(const avx512_attention *a, const vhk_attention_args *g)
{
    return a && g->n_rows >= AVX512_ATTENTION_MIN_ROWS && g->head_dim > 0 && g->n_kv_heads > 0 &&
           g->n_heads % g->n_kv_heads == 0 && g->n_kv <= (int64_t)a->capacity &&
           (size_t)(g->n_kv_heads * g->head_dim) * (size_t)key_stride(g->n_kv) <= a->floats;
}

void avx512_attention_run(avx512_attention *a, vh_thread_pool *pool, const vhk_attention_args *g)
{
    attention_job job = {.args = g, .a = a, .n_tiles = (g->n_rows + TILE - 1) / TILE};
    job.n_tasks = job.n_tiles * g->n_heads;
    atomic_init(&job.next, 0);
    vh_parallel_for(pool, g->n_kv_heads, 1, gather_keys_values, &job);
    const int64_t threads = vh_thread_pool_size(pool);
    vh_parallel_for(pool, threads < job.n_tasks ? threads : job.n_tasks, 1, attend_tasks, &job);
}
