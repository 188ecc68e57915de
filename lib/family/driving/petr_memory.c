/* Orion's head memory banks, statement by statement as the released heads update them (see the header). */
#include "family/driving/petr_memory.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void identity4(float *m)
{
    memset(m, 0, sizeof(float) * 16);
    m[0] = m[5] = m[10] = m[15] = 1.0f;
}

/* out = a @ b, 4 x 4 row-major, float32 (out may not alias b) */
static void mul4(const float *a, const float *b, float *out)
{
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
            float s = 0.0f;
            for (int k = 0; k < 4; k++) s += a[r * 4 + k] * b[k * 4 + c];
            out[r * 4 + c] = s;
        }
}

/* p = (m @ [p, 1])[:3] */
static void transform_point(const float *m, float *p)
{
    float q[3];
    for (int r = 0; r < 3; r++) q[r] = m[r * 4] * p[0] + m[r * 4 + 1] * p[1] + m[r * 4 + 2] * p[2] + m[r * 4 + 3];
    memcpy(p, q, sizeof q);
}

vh_status vh_petr_bank_init(vh_petr_bank *b, const vh_petr_bank_config *c, vh_error *err)
{
    memset(b, 0, sizeof *b);
    if (!c || !c->embed || !c->memory_len || !c->topk || !c->n_points || c->n_points > VH_PETR_MAX_POINTS ||
        c->n_pseudo > c->memory_len || (c->n_pseudo && !c->pseudo_points))
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "head memory: a NULL, an empty size, over %d points "
                            "or pseudo entries beyond the memory", VH_PETR_MAX_POINTS);
    b->c = *c;
    const size_t cap = (size_t)c->memory_len + c->topk;
    b->embedding = calloc(cap * c->embed, sizeof(float));
    b->points = calloc(cap * c->n_points * 3, sizeof(float));
    b->age = calloc(cap, sizeof(double));
    b->egopose = calloc(cap * 16, sizeof(float));
    b->pseudo = c->n_pseudo ? malloc(sizeof(float) * 3 * c->n_pseudo) : NULL;
    if (!b->embedding || !b->points || !b->age || !b->egopose || (c->n_pseudo && !b->pseudo)) {
        vh_petr_bank_free(b);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "head memory: %zu entries of %u", cap, c->embed);
    }
    if (c->n_pseudo) memcpy(b->pseudo, c->pseudo_points, sizeof(float) * 3 * c->n_pseudo);
    b->c.pseudo_points = b->pseudo;
    return VH_OK;
}

void vh_petr_bank_free(vh_petr_bank *b)
{
    if (!b) return;
    free(b->embedding);
    free(b->points);
    free(b->age);
    free(b->egopose);
    free(b->pseudo);
    memset(b, 0, sizeof *b);
}

float vh_petr_bank_pre_update(vh_petr_bank *b, double timestamp, const float ego_pose_inv[16], bool same_episode)
{
    const vh_petr_bank_config *c = &b->c;
    const size_t P = (size_t)c->n_points * 3;
    float x = 0.0f;
    if (!b->started) {                 /* the `memory_embedding is None` branch: zeros, x = 0 */
        b->started = true;
        b->n = c->memory_len;
        memset(b->embedding, 0, sizeof(float) * b->n * c->embed);
        memset(b->points, 0, sizeof(float) * b->n * P);
        memset(b->egopose, 0, sizeof(float) * b->n * 16);
        for (uint32_t i = 0; i < b->n; i++) b->age[i] = 0.0;
        b->sample_time = 0.0;
    } else {
        for (uint32_t i = 0; i < b->n; i++) b->age[i] += timestamp;
        b->sample_time += timestamp;
        x = (fabs(b->sample_time) < 2.0 && same_episode) ? 1.0f : 0.0f;
        for (uint32_t i = 0; i < b->n; i++) {
            float m[16];
            mul4(ego_pose_inv, b->egopose + (size_t)i * 16, m);
            memcpy(b->egopose + (size_t)i * 16, m, sizeof m);
            for (uint32_t p = 0; p < c->n_points; p++) transform_point(ego_pose_inv, b->points + i * P + 3 * p);
        }
        if (b->n > c->memory_len) b->n = c->memory_len;    /* memory_refresh(X[:, :memory_len], x) */
        for (size_t i = 0; i < (size_t)b->n * c->embed; i++) b->embedding[i] *= x;
        for (size_t i = 0; i < (size_t)b->n * P; i++) b->points[i] *= x;
        for (size_t i = 0; i < (size_t)b->n * 16; i++) b->egopose[i] *= x;
        for (uint32_t i = 0; i < b->n; i++) b->age[i] *= (double)x;
        b->sample_time = 0.0;
    }
    /* the pseudo entries: points[:n_pseudo] += (1 - x) pseudo, egopose[:n_pseudo] += (1 - x) I */
    const float keep_out = 1.0f - x;
    for (uint32_t i = 0; i < c->n_pseudo; i++) {
        for (int k = 0; k < 3; k++) b->points[i * P + k] += keep_out * b->pseudo[i * 3 + k];
        for (int k = 0; k < 4; k++) b->egopose[(size_t)i * 16 + k * 5] += keep_out;
    }
    return x;
}

typedef struct ranked { float score; uint32_t index; } ranked;

static int by_score_desc(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

vh_status vh_petr_bank_post_update(vh_petr_bank *b, uint32_t n_rows, const float *rows, const float *scores,
                                   const float *points, double timestamp, const float ego_pose[16],
                                   uint32_t *topk_out, vh_error *err)
{
    const vh_petr_bank_config *c = &b->c;
    if (!b->started || b->n != c->memory_len)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "head memory: a post-update without its pre-update");
    if (!rows || !scores || !points || !ego_pose || n_rows < c->topk)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "head memory: %u rows for a top-%u (or a NULL)", n_rows,
                            c->topk);
    ranked *r = malloc(sizeof *r * n_rows);
    if (!r) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "head memory: top-k of %u", n_rows);
    for (uint32_t i = 0; i < n_rows; i++) r[i] = (ranked){isnan(scores[i]) ? -INFINITY : scores[i], i};
    qsort(r, n_rows, sizeof *r, by_score_desc);
    const size_t P = (size_t)c->n_points * 3, K = c->topk, N = b->n;
    /* cat([gathered, memory]): the old entries move back by topk */
    memmove(b->embedding + K * c->embed, b->embedding, sizeof(float) * N * c->embed);
    memmove(b->points + K * P, b->points, sizeof(float) * N * P);
    memmove(b->egopose + K * 16, b->egopose, sizeof(float) * N * 16);
    memmove(b->age + K, b->age, sizeof(double) * N);
    for (size_t k = 0; k < K; k++) {
        const uint32_t i = r[k].index;
        if (topk_out) topk_out[k] = i;
        memcpy(b->embedding + k * c->embed, rows + (size_t)i * c->embed, sizeof(float) * c->embed);
        memcpy(b->points + k * P, points + (size_t)i * P, sizeof(float) * P);
        identity4(b->egopose + k * 16);
        b->age[k] = 0.0;
    }
    free(r);
    b->n = (uint32_t)(N + K);
    for (uint32_t i = 0; i < b->n; i++) {
        for (uint32_t p = 0; p < c->n_points; p++) transform_point(ego_pose, b->points + i * P + 3 * p);
        b->age[i] -= timestamp;
        float m[16];
        mul4(ego_pose, b->egopose + (size_t)i * 16, m);
        memcpy(b->egopose + (size_t)i * 16, m, sizeof m);
    }
    b->sample_time -= timestamp;
    return VH_OK;
}

void vh_petr_bank_encode_row(const vh_petr_bank *b, uint32_t i, const float pc_range[6], float *points_enc,
                             float *motion_enc, float *age_enc)
{
    const vh_petr_bank_config *c = &b->c;
    if (points_enc) {
        float norm[VH_PETR_MAX_POINTS * 3];
        for (uint32_t p = 0; p < VH_PETR_MAX_POINTS; p++)
            for (int k = 0; k < 3; k++) {
                const float v = b->points[(size_t)i * c->n_points * 3 + (c->n_points == 1 ? 0 : p) * 3 + k];
                norm[p * 3 + k] = (v - pc_range[k]) / (pc_range[3 + k] - pc_range[k]);
            }
        vh_nerf_encode(norm, VH_PETR_MAX_POINTS * 3, points_enc);
    }
    if (motion_enc) {
        float m[13];
        m[0] = (float)b->age[i];
        memcpy(m + 1, b->egopose + (size_t)i * 16, sizeof(float) * 12);
        vh_nerf_encode(m, 13, motion_enc);
    }
    if (age_enc) vh_pos2posemb1d(b->age[i], 256, age_enc);
}

void vh_petr_max_sigmoid(const float *logits, uint32_t n, uint32_t classes, float *scores)
{
    for (uint32_t i = 0; i < n; i++) {
        float best = -INFINITY;
        for (uint32_t k = 0; k < classes; k++) {
            const float s = 1.0f / (1.0f + expf(-logits[(size_t)i * classes + k]));
            if (s > best || isnan(s)) best = s;
        }
        scores[i] = best;
    }
}

void vh_petr_pseudo_points(const float *weight, uint32_t n, const float pc_range[6], float *out)
{
    for (uint32_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            out[i * 3 + k] = weight[i * 3 + k] * (pc_range[3 + k] - pc_range[k]) + pc_range[k];
}
