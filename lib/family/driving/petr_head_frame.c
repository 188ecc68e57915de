/*
 * A frame of one stream through a PETR head: the host's part between the block runs
 * (petr_heads.h), in the released order (OrionHead.forward / OrionHeadM.forward with
 * temporal_alignment, the branches' decoding and post_update_memory), float32 as the heads run.
 */
#include "family/driving/petr_heads.h"

#include "family/driving/petr_math.h"
#include "util/thread_start.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NERF_POINTS (VH_PETR_MAX_POINTS * 3 * 12)
#define NERF_MOTION (13 * 12)
#define AGE_ENC 256

vh_status vh_petr_head_state_init(vh_petr_head_state *s, const vh_petr_head *h, const vh_petr_heads_config *c,
                                  uint32_t n_slots, vh_error *err)
{
    memset(s, 0, sizeof *s);
    const vh_petr_head_sizes *n = &h->n;
    if (c->topk > sizeof s->last_topk / sizeof *s->last_topk)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "a top-%u memory update (at most %zu)", c->topk,
                            sizeof s->last_topk / sizeof *s->last_topk);
    const size_t D = n->embed, M = c->memory_len, Q0 = n->extra + n->queries, R = Q0 + n->propagated;
    const size_t rows = n->queries + n->propagated, NM = n->num_memory;
    vh_petr_bank_config bc = {.embed = n->embed, .memory_len = c->memory_len, .topk = c->topk,
                              .n_points = h->map ? VH_PETR_MAX_POINTS : 1, .n_pseudo = n->propagated,
                              .pseudo_points = h->pseudo_points};
    vh_status st = vh_petr_bank_init(&s->bank, &bc, err);
    if (!st && !h->map) st = vh_petr_scene_init(&s->scene, n->embed, n->num_memory, c->scene_len, c->canbus_len, err);
    if (st) {
        vh_petr_head_state_free(s);
        return st;
    }
    struct { float **p; size_t n; } b[] = {
        {&s->pt_enc, (M + Q0) * NERF_POINTS}, {&s->pt_pos, (M + Q0) * D}, {&s->age_enc, (M + 1) * AGE_ENC},
        {&s->age_pos, (M + 1) * D}, {&s->motion_enc, M * NERF_MOTION}, {&s->mem_pos0, M * D}, {&s->mem_pos1, M * D},
        {&s->x, R * D}, {&s->x_pos, R * D}, {&s->extra_rows, M * D}, {&s->extra_pos, M * D}, {&s->obj, rows * D},
        {&s->vlm, n->extra * D}, {&s->logits, rows * n->classes}, {&s->boxes, rows * n->reg_out},
        {&s->points, rows * 3 * VH_PETR_MAX_POINTS}, {&s->scores, rows}, {&s->scene_enc, c->scene_len * AGE_ENC + 1},
        {&s->zeros, NM * D + 1}, {&s->history, NM * D + 1}, {&s->out_in, (n->extra + NM) * D},
        {&s->canbus, 512},
    };
    for (size_t i = 0; i < sizeof b / sizeof *b; i++)
        if (!(*b[i].p = calloc(b[i].n ? b[i].n : 1, sizeof(float)))) {
            vh_petr_head_state_free(s);
            return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (a head's buffers)");
        }
    s->inputs = calloc(n_slots ? n_slots : 1, sizeof *s->inputs);
    if (!s->inputs) {
        vh_petr_head_state_free(s);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (a head's buffers)");
    }
    return VH_OK;
}

void vh_petr_head_state_restart(vh_petr_head_state *s)
{
    s->bank.started = false;
    s->scene.started = false;
}

void vh_petr_head_state_free(vh_petr_head_state *s)
{
    if (!s) return;
    vh_petr_bank_free(&s->bank);
    vh_petr_scene_free(&s->scene);
    float *b[] = {s->pt_enc, s->pt_pos, s->age_enc, s->age_pos, s->motion_enc, s->mem_pos0, s->mem_pos1, s->x,
                  s->x_pos, s->extra_rows, s->extra_pos, s->obj, s->vlm, s->logits, s->boxes, s->points, s->scores,
                  s->scene_enc, s->zeros, s->history, s->out_in, s->canbus};
    for (size_t i = 0; i < sizeof b / sizeof *b; i++) free(b[i]);
    free(s->inputs);
    memset(s, 0, sizeof *s);
}

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* torch.nan_to_num: NaN 0, infinities the largest finite floats. */
static void nan_to_num(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (isnan(x[i])) x[i] = 0.0f;
        else if (isinf(x[i])) x[i] = x[i] > 0 ? FLT_MAX : -FLT_MAX;
}

typedef struct step {
    const vh_petr_runner *r;
    vh_petr_head_state *s;
    vh_error *err;
} step;

static void give(step *t, uint32_t slot, const float *rows)
{
    if (slot < t->r->n_slots) t->s->inputs[slot] = rows;
}

/* Run the head's run k with the inputs given since the last one. */
static vh_status run(step *t, const vh_petr_head *h, int k)
{
    vh_status st = t->r->run(t->r->user, h->run_first[k], h->run_count[k], t->s->inputs, t->err);
    memset(t->s->inputs, 0, sizeof *t->s->inputs * t->r->n_slots);
    return st;
}

static vh_status read_rows(step *t, uint32_t slot, float *dst, size_t n)
{
    return t->r->read(t->r->user, slot, dst, n, t->err);
}

/* The bank's M entries' age and motion encodings. Entries written in one frame share their age
 * and ego motion, so those two encodings (~5 ms a head at the agent's 600 entries) are computed
 * once per distinct input and copied to the entries that repeat it: the same bits, since equal
 * inputs give equal outputs. A few recent inputs are remembered; the points' encodings differ
 * entry by entry (encode_points). */
#define ENCODE_CACHE 8

static void encode_bank(const vh_petr_bank *b, uint32_t M, const float pc_range[6], float *motion_enc, float *age_enc)
{
    uint32_t age_from[ENCODE_CACHE], motion_from[ENCODE_CACHE]; /* rows whose encodings are remembered */
    uint32_t n_age = 0, n_motion = 0, next_age = 0, next_motion = 0;
    for (uint32_t i = 0; i < M; i++) {
        float *age_out = age_enc + (size_t)i * AGE_ENC, *motion_out = motion_enc + (size_t)i * NERF_MOTION;
        int age_hit = 0, motion_hit = 0;
        for (uint32_t k = 0; k < n_age && !age_hit; k++)
            if (!memcmp(&b->age[age_from[k]], &b->age[i], sizeof(double))) { /* the bits: -0 is not 0 here */
                memcpy(age_out, age_enc + (size_t)age_from[k] * AGE_ENC, sizeof(float) * AGE_ENC);
                age_hit = 1;
            }
        for (uint32_t k = 0; k < n_motion && !motion_hit; k++) {
            const uint32_t j = motion_from[k];
            const float aj = (float)b->age[j], ai = (float)b->age[i];
            if (!memcmp(&aj, &ai, sizeof(float)) &&
                !memcmp(b->egopose + (size_t)j * 16, b->egopose + (size_t)i * 16, sizeof(float) * 12)) {
                memcpy(motion_out, motion_enc + (size_t)j * NERF_MOTION, sizeof(float) * NERF_MOTION);
                motion_hit = 1;
            }
        }
        if (!age_hit || !motion_hit)
            vh_petr_bank_encode_row(b, i, pc_range, NULL, motion_hit ? NULL : motion_out, age_hit ? NULL : age_out);
        if (!age_hit) {
            age_from[next_age] = i;
            next_age = (next_age + 1) % ENCODE_CACHE;
            if (n_age < ENCODE_CACHE) n_age++;
        }
        if (!motion_hit) {
            motion_from[next_motion] = i;
            next_motion = (next_motion + 1) % ENCODE_CACHE;
            if (n_motion < ENCODE_CACHE) n_motion++;
        }
    }
}

/* The entries' points' encodings (every entry its own: 396 sines and cosines, ~1.3 ms a head of
 * one core at 600 entries), rows [first, end) a part, the parts on threads of their own started
 * and joined here (the first on the calling thread, a part whose thread does not start too). */
#define POINT_PARTS_MAX 4
#define POINT_ROWS_PER_PART 64 /* fewer rows a part: not worth a thread */

typedef struct point_part {
    const vh_petr_bank *b;
    const float *pc_range;
    float *pt_enc;
    uint32_t first, end;
    pthread_t thread;
    int started;
} point_part;

static void *encode_points_part(void *arg)
{
    const point_part *p = arg;
    for (uint32_t i = p->first; i < p->end; i++)
        vh_petr_bank_encode_row(p->b, i, p->pc_range, p->pt_enc + (size_t)i * NERF_POINTS, NULL, NULL);
    return NULL;
}

static void encode_points(const vh_petr_bank *b, uint32_t M, const float pc_range[6], float *pt_enc)
{
    const uint32_t cpus = (uint32_t)vh_thread_cpus();
    uint32_t parts = M / POINT_ROWS_PER_PART;
    if (parts > POINT_PARTS_MAX) parts = POINT_PARTS_MAX;
    if (parts > cpus) parts = cpus;
    if (parts < 1) parts = 1;
    point_part p[POINT_PARTS_MAX];
    for (uint32_t k = 0; k < parts; k++) {
        p[k] = (point_part){.b = b, .pc_range = pc_range, .pt_enc = pt_enc,
                            .first = (uint32_t)((uint64_t)M * k / parts), .end = (uint32_t)((uint64_t)M * (k + 1) / parts)};
        if (k > 0) p[k].started = vh_thread_start(&p[k].thread, NULL, encode_points_part, &p[k], "vh-encode") == 0;
    }
    encode_points_part(&p[0]);
    for (uint32_t k = 1; k < parts; k++) {
        if (p[k].started) pthread_join(p[k].thread, NULL);
        else encode_points_part(&p[k]);
    }
}

/* A: the positions of the memory and the queries, the ages'; B: the ego motion's modulation. On
 * return s->mem_pos1 holds temp_pos (MLN + time_embedding of the age) and s->pt_pos from row M on
 * the queries' positions with time_embedding(0) added. */
static vh_status positions(step *t, const vh_petr_head *h, const vh_petr_heads_config *c, const float *features)
{
    vh_petr_head_state *s = t->s;
    const uint32_t D = h->n.embed, M = c->memory_len, Q0 = h->n.extra + h->n.queries;
    encode_bank(&s->bank, M, c->pc_range, s->motion_enc, s->age_enc);
    encode_points(&s->bank, M, c->pc_range, s->pt_enc);
    memcpy(s->pt_enc + (size_t)M * NERF_POINTS, h->query_pt_enc, sizeof(float) * Q0 * NERF_POINTS);
    vh_pos2posemb1d(0.0, AGE_ENC, s->age_enc + (size_t)M * AGE_ENC);
    give(t, h->pt_enc, s->pt_enc);
    give(t, h->age_enc, s->age_enc);
    if (features) give(t, h->features, features);
    if (!h->map) {
        for (uint32_t i = 0; i < c->scene_len; i++)
            vh_pos2posemb1d(s->scene.age[i], AGE_ENC, s->scene_enc + (size_t)i * AGE_ENC);
        give(t, h->scene_enc, s->scene_enc);
    }
    vh_status st;
    if ((st = run(t, h, 0)) || (st = read_rows(t, h->pt_pos, s->pt_pos, (size_t)(M + Q0) * D)) ||
        (st = read_rows(t, h->age_pos, s->age_pos, (size_t)(M + 1) * D)))
        return st;
    memcpy(s->mem_pos0, s->pt_pos, sizeof(float) * M * D);
    give(t, h->mem_pos0, s->mem_pos0);
    give(t, h->motion_enc, s->motion_enc);
    if ((st = run(t, h, 1)) || (st = read_rows(t, h->mem_pos1, s->mem_pos1, (size_t)M * D))) return st;
    for (size_t i = 0; i < (size_t)M * D; i++) s->mem_pos1[i] += s->age_pos[i];
    const float *age0 = s->age_pos + (size_t)M * D;
    for (uint32_t q = 0; q < Q0; q++)
        for (uint32_t j = 0; j < D; j++) s->pt_pos[(size_t)(M + q) * D + j] += age0[j];
    return VH_OK;
}

/* The decoder's inputs: rows [extra | queries | propagated], their positions, the extra keys. */
static void decoder_inputs(step *t, const vh_petr_head *h, const vh_petr_heads_config *c)
{
    vh_petr_head_state *s = t->s;
    const vh_petr_head_sizes *n = &h->n;
    const size_t D = n->embed, M = c->memory_len, E = n->extra, Q0 = E + n->queries, P = n->propagated;
    memcpy(s->x, h->query_embedding, sizeof(float) * E * D);
    if (h->map) memcpy(s->x + E * D, h->lane_embedding, sizeof(float) * n->queries * D);
    else memset(s->x + E * D, 0, sizeof(float) * n->queries * D);
    memcpy(s->x + Q0 * D, s->bank.embedding, sizeof(float) * P * D);
    memset(s->x_pos, 0, sizeof(float) * E * D); /* the scene queries' positions are zeroed */
    memcpy(s->x_pos + E * D, s->pt_pos + (M + E) * D, sizeof(float) * n->queries * D);
    memcpy(s->x_pos + Q0 * D, s->mem_pos1, sizeof(float) * P * D);
    memcpy(s->extra_rows, s->bank.embedding + P * D, sizeof(float) * (M - P) * D);
    memcpy(s->extra_pos, s->mem_pos1 + P * D, sizeof(float) * (M - P) * D);
    give(t, h->x, s->x);
    give(t, h->x_pos, s->x_pos);
    give(t, h->extra_rows, s->extra_rows);
    give(t, h->extra_pos, s->extra_pos);
}

/* Each query's points in metres from its branch output: sigmoid(out + vh_inverse_sigmoid(ref)),
 * denormalised to pc_range; the reference of a propagated query is its memory entry's point. */
static void decode_points(const vh_petr_head *h, const vh_petr_heads_config *c, vh_petr_head_state *s)
{
    const vh_petr_head_sizes *n = &h->n;
    const uint32_t P = h->map ? VH_PETR_MAX_POINTS : 1, rows = n->queries + n->propagated;
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t p = 0; p < P; p++)
            for (uint32_t k = 0; k < 3; k++) {
                const float *pc = c->pc_range;
                float ref;
                if (r < n->queries) ref = h->query_ref[(r * P + p) * 3 + k];
                else ref = (s->bank.points[(size_t)(r - n->queries) * 3 + k] - pc[k]) / (pc[3 + k] - pc[k]);
                const float v = sigmoid(s->boxes[(size_t)r * n->reg_out + p * 3 + k] + vh_inverse_sigmoid(ref));
                s->points[(size_t)(r * P + p) * 3 + k] = v * (pc[3 + k] - pc[k]) + pc[k];
            }
    vh_petr_max_sigmoid(s->logits, rows, n->classes, s->scores);
}

static vh_status det_frame(step *t, const vh_petr_head *h, const vh_petr_heads_config *c, const vh_petr_frame *f,
                           float *tokens)
{
    vh_petr_head_state *s = t->s;
    const vh_petr_head_sizes *n = &h->n;
    const size_t D = n->embed, E = n->extra, rows = n->queries + n->propagated, NM = n->num_memory;
    /* C: memory_decoder_mq (the history queries against the scene memory), the decoder */
    decoder_inputs(t, h, c);
    give(t, h->hq, h->memory_query);
    give(t, h->hq_pos, s->zeros);
    give(t, h->scene_q, s->scene.query);
    vh_status st = run(t, h, 2);
    if (st || (st = read_rows(t, h->x, s->x, (E + rows) * D))) return st;
    nan_to_num(s->x, (E + rows) * D);
    memcpy(s->vlm, s->x, sizeof(float) * E * D);
    memcpy(s->obj, s->x + E * D, sizeof(float) * rows * D);
    /* D: the branches, memory_decoder_cq (the history tokens from the scene tokens) */
    give(t, h->obj, s->obj);
    give(t, h->vlm, s->vlm);
    if ((st = run(t, h, 3)) || (st = read_rows(t, h->logits, s->logits, rows * n->classes)) ||
        (st = read_rows(t, h->boxes, s->boxes, rows * n->reg_out)) || (st = read_rows(t, h->hq, s->history, NM * D)))
        return st;
    decode_points(h, c, s);
    /* E: the tokens, the can-bus token from the memory at use time */
    memcpy(s->out_in, s->vlm, sizeof(float) * E * D);
    memcpy(s->out_in + E * D, s->history, sizeof(float) * NM * D);
    vh_petr_canbus_input(&s->scene, &s->bank, f->can_bus, f->command, s->canbus);
    give(t, h->out_in, s->out_in);
    give(t, h->canbus, s->canbus);
    if ((st = run(t, h, 4)) || (st = read_rows(t, h->tokens, tokens, (E + NM) * n->out_dims)) ||
        (st = read_rows(t, h->can_token, tokens + (E + NM) * n->out_dims, n->out_dims)))
        return st;
    if ((st = vh_petr_bank_post_update(&s->bank, (uint32_t)rows, s->obj, s->scores, s->points, f->timestamp,
                                       f->ego_pose, s->last_topk, t->err)))
        return st;
    vh_petr_scene_post_update(&s->scene, f->timestamp, f->can_bus, f->command, s->history);
    return VH_OK;
}

static vh_status map_frame(step *t, const vh_petr_head *h, const vh_petr_heads_config *c, const vh_petr_frame *f,
                           float *tokens)
{
    vh_petr_head_state *s = t->s;
    const vh_petr_head_sizes *n = &h->n;
    const size_t D = n->embed, E = n->extra, rows = n->queries;
    decoder_inputs(t, h, c);
    vh_status st = run(t, h, 2);
    if (st || (st = read_rows(t, h->x, s->x, (E + rows) * D))) return st;
    memcpy(s->vlm, s->x, sizeof(float) * E * D); /* the released head takes it before nan_to_num */
    nan_to_num(s->x + E * D, rows * D);
    memcpy(s->obj, s->x + E * D, sizeof(float) * rows * D);
    give(t, h->obj, s->obj);
    give(t, h->vlm, s->vlm);
    if ((st = run(t, h, 3)) || (st = read_rows(t, h->logits, s->logits, rows * n->classes)) ||
        (st = read_rows(t, h->boxes, s->boxes, rows * n->reg_out)) ||
        (st = read_rows(t, h->tokens, tokens, E * n->out_dims)))
        return st;
    decode_points(h, c, s);
    return vh_petr_bank_post_update(&s->bank, (uint32_t)rows, s->obj, s->scores, s->points, f->timestamp, f->ego_pose,
                                    s->last_topk, t->err);
}

vh_status vh_petr_head_frame(const vh_petr_head *h, const vh_petr_heads_config *c, vh_petr_head_state *s,
                             const vh_petr_runner *r, const vh_petr_frame *f, const float *features,
                             const float *pos_embed, float *tokens, vh_error *err)
{
    if (!h || !c || !s || !s->inputs || !r || !f || !tokens)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_petr_head_frame: a NULL argument");
    step t = {r, s, err};
    const float x = vh_petr_bank_pre_update(&s->bank, f->timestamp, f->ego_pose_inv, f->same_episode);
    if (!h->map) vh_petr_scene_pre_update(&s->scene, f->timestamp, f->can_bus, x);
    vh_status st = positions(&t, h, c, features);
    if (st) return st;
    if (pos_embed) give(&t, h->pos_embed, pos_embed); /* the decoder's run reads it */
    return h->map ? map_frame(&t, h, c, f, tokens) : det_frame(&t, h, c, f, tokens);
}
