/*
 * Packed mode's passes (stage_pipeline.h): frames prepared by the intake thread wait at stage 0's
 * queue; a pass carries the prefills of up to max_new of them (their vision run as one batch)
 * beside a decode row of every frame in flight; a frame leaves with its last token.
 *
 * One stage: one thread runs pass after pass. Two stages: every pass carries every frame in
 * flight, so the last stage (the CPU) reads its weights once a pass for all of them, and stage 0
 * (the GPU) builds the next pass while the last stage runs the current one: a new frame needs
 * nothing from the pass before, so its vision and its stage-0 prefill run early ("staged"); only
 * the stage-0 decode rows of the frames in flight wait for the current pass's tokens, a short run,
 * after which the next pass goes to the last stage at once. Two frames' groups alternating instead
 * would keep both stages busy too, but read the last stage's weights twice a round
 * (doc/architecture.md has the arithmetic).
 */
#include "pipeline/stage_pipeline_internal.h"

#include <string.h>

vh_status vh_packed_rounds_init(vh_stage_pipeline *p, vh_error *err)
{
    const uint32_t dim = p->cfg.action_tokens ? p->cfg.action_tokens : 1;
    p->n_rounds = p->n_stages == 2 ? 2 : 1;
    /* a frame takes dim passes, and with two stages waits staged one pass before them: frames in
     * flight admit that fraction of themselves a pass */
    const uint32_t passes = dim + (p->n_rounds == 2);
    p->max_new = (p->n_jobs + passes - 1) / passes;
    for (uint32_t k = 0; k < p->n_rounds; k++) {
        vh_status st = vh_packed_pass_init(&p->rounds[k].pass, p->cfg.ctx, p->n_jobs, p->max_new, err);
        if (st) return st;
    }
    return VH_OK;
}

void vh_packed_rounds_free(vh_stage_pipeline *p)
{
    for (uint32_t k = 0; k < p->n_rounds; k++)
        if (p->rounds[k].pass.ctx) vh_packed_pass_free(&p->rounds[k].pass);
}

/* Count a pass on `stage` in the statistics: its time there since `before`. Lock held. */
static void account(vh_stage_pipeline *p, const packed_round *r, uint32_t stage, vh_rows_timing before)
{
    const int64_t busy = r->pass.stage_time[stage].busy_ns - before.busy_ns;
    p->passes[stage]++;
    p->busy_ns[stage] += busy;
    vh_latency_window_add(&p->pass_ns[stage], busy);
    p->handoff_ns[stage] += r->pass.stage_time[stage].handoff_ns - before.handoff_ns;
}

/* The next waiting frame may join r's pass beside the n_new taken already (rows: theirs and the
 * staged frames'): a new frame's place is free, and its rows fit with a decode row of every job
 * that may be at a decode step when the pass starts (none waits or is new now). Lock held. */
static int can_admit(const vh_stage_pipeline *p, const packed_round *r, uint32_t n_new, uint32_t rows)
{
    if (!p->n_waiting[0] || r->n_staged + n_new >= p->max_new) return 0;
    const uint32_t decode_rows = p->cfg.action_tokens > 1 ? p->n_jobs - r->n_staged - n_new - p->n_waiting[0] : 0;
    return rows + vh_frame_job_rows(p->waiting[0][0]) + decode_rows <= r->pass.max_rows;
}

/* Take the waiting frames that may join r's pass into r->in_pass after those there, and run their
 * vision as one batch. Returns how many are ready (a failed vision answers its frames). Lock held
 * on entry and on return, released meanwhile. */
static uint32_t take_new_frames(vh_stage_pipeline *p, packed_round *r)
{
    const uint32_t first = r->n_in_pass;
    uint32_t n_new = 0, rows = vh_packed_pass_rows(r->in_pass, first);
    while (can_admit(p, r, n_new, rows)) {
        vh_frame_job *job = vh_pipeline_pop_waiting(p, 0);
        r->in_pass[first + n_new++] = job;
        rows += vh_frame_job_rows(job);
    }
    if (!n_new) return 0;
    pthread_mutex_unlock(&p->lock);
    vh_error err;
    vh_error_clear(&err);
    vh_status st = vh_packed_pass_run_vision(&r->pass, r->in_pass + first, n_new, &err);
    if (st) {
        for (uint32_t i = 0; i < n_new; i++) {
            vh_error each = err;
            vh_pipeline_complete(p, r->in_pass[first + i], st, &each);
        }
        n_new = 0;
    }
    pthread_mutex_lock(&p->lock);
    return n_new;
}

/* After the last stage: every frame of the pass takes its token and stays in flight, or is
 * answered. Lock not held. */
static void finish_pass(vh_stage_pipeline *p, packed_round *r)
{
    if (!r->failed) vh_packed_pass_end(&r->pass);
    vh_frame_job *going_on[MAX_JOBS];
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->n_in_pass; i++) { /* a failed pass fails every frame in it */
        vh_error each = r->err;
        if (r->failed) vh_pipeline_complete(p, r->in_pass[i], r->failed, &each);
        else if (vh_frame_job_advance(r->in_pass[i])) going_on[n++] = r->in_pass[i];
        else vh_pipeline_complete(p, r->in_pass[i], VH_OK, &each);
    }
    pthread_mutex_lock(&p->lock);
    memcpy(p->active + p->n_active, going_on, sizeof *going_on * n);
    p->n_active += n;
    r->n_in_pass = r->n_staged = 0;
    pthread_mutex_unlock(&p->lock);
}

/* One stage: each pass admits new frames, runs their vision, then every stage in turn. */
static void run_alone(vh_stage_pipeline *p)
{
    packed_round *r = &p->rounds[0];
    pthread_mutex_lock(&p->lock);
    for (;;) {
        if (!p->n_active && !can_admit(p, r, 0, 0)) {
            if (p->stopping) break;
            pthread_cond_wait(&p->changed, &p->lock);
            continue;
        }
        const vh_rows_timing before = r->pass.stage_time[0];
        r->n_in_pass = take_new_frames(p, r);
        memcpy(r->in_pass + r->n_in_pass, p->active, sizeof *p->active * p->n_active);
        r->n_in_pass += p->n_active;
        p->n_active = 0;
        pthread_mutex_unlock(&p->lock);
        vh_error_clear(&r->err);
        r->failed = r->n_in_pass ? vh_packed_pass_begin(&r->pass, r->in_pass, r->n_in_pass, &r->err) : VH_OK;
        for (uint32_t s = 0; s < p->n_stages && r->n_in_pass; s++) {
            const vh_rows_timing was = s ? r->pass.stage_time[s] : before;
            if (!r->failed) r->failed = vh_packed_pass_stage(&r->pass, s, &r->err);
            pthread_mutex_lock(&p->lock);
            account(p, r, s, was); /* before the frames are answered: a caller's info then counts it */
            pthread_mutex_unlock(&p->lock);
        }
        finish_pass(p, r);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
}

/* Two stages, stage 0: stage new frames into r's pass (vision, then their prefill rows on stage
 * 0, in their place in the pass's buffer). Lock held on entry and on return. */
static void stage_new_frames(vh_stage_pipeline *p, packed_round *r)
{
    const uint32_t first = r->n_in_pass, n_new = take_new_frames(p, r);
    if (!n_new) return;
    pthread_mutex_unlock(&p->lock);
    vh_error err;
    vh_error_clear(&err);
    vh_status st = vh_packed_pass_begin(&r->pass, r->in_pass, first + n_new, &err);
    if (!st) st = vh_packed_pass_stage_part(&r->pass, 0, first, n_new, &err);
    if (st)
        for (uint32_t i = 0; i < n_new; i++) {
            vh_error each = err;
            vh_pipeline_complete(p, r->in_pass[first + i], st, &each);
        }
    pthread_mutex_lock(&p->lock);
    if (!st) r->n_in_pass = r->n_staged = first + n_new;
}

/* Two stages, stage 0, once the last stage is free: the pass is the staged frames and a decode
 * row of every frame in flight, whose stage-0 rows run now; then it goes to the last stage. Lock
 * held on entry and on return. */
static void close_pass(vh_stage_pipeline *p, packed_round *r)
{
    memcpy(r->in_pass + r->n_in_pass, p->active, sizeof *p->active * p->n_active);
    r->n_in_pass += p->n_active;
    p->n_active = 0;
    pthread_mutex_unlock(&p->lock);
    vh_error_clear(&r->err);
    r->failed = vh_packed_pass_begin(&r->pass, r->in_pass, r->n_in_pass, &r->err);
    if (!r->failed && r->n_in_pass > r->n_staged)
        r->failed = vh_packed_pass_stage_part(&r->pass, 0, r->n_staged, r->n_in_pass - r->n_staged, &r->err);
    pthread_mutex_lock(&p->lock);
    account(p, r, 0, r->before); /* its staging and its decode rows */
    r->before = r->pass.stage_time[0];
    p->on_last_stage = r;
    pthread_cond_broadcast(&p->changed);
}

/* The stage-0 thread: every stage with one, stage 0's share with two. */
void *vh_packed_stage0_main(void *arg)
{
    vh_stage_pipeline *p = ((stage_thread *)arg)->pipeline;
    if (p->n_rounds == 1) {
        run_alone(p);
        return NULL;
    }
    packed_round *r = &p->rounds[0]; /* the pass being built; the other one is free or on stage 1 */
    pthread_mutex_lock(&p->lock);
    for (;;) {
        /* the last stage waits for nothing but this: close the pass first (frames that arrive
         * meanwhile are staged into the next one while it runs) */
        if (!p->on_last_stage && (p->n_active || r->n_staged)) {
            close_pass(p, r);
            r = r == &p->rounds[0] ? &p->rounds[1] : &p->rounds[0];
        } else if (can_admit(p, r, 0, vh_packed_pass_rows(r->in_pass, r->n_in_pass))) {
            stage_new_frames(p, r);
        } else if (p->stopping) {
            break;
        } else {
            pthread_cond_wait(&p->changed, &p->lock);
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* The stage-1 thread of two stages: the pass's last stage, its tokens, then the next pass. */
void *vh_packed_stage1_main(void *arg)
{
    vh_stage_pipeline *p = ((stage_thread *)arg)->pipeline;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        packed_round *r = p->on_last_stage;
        if (!r) {
            if (p->stopping) break;
            pthread_cond_wait(&p->changed, &p->lock);
            continue;
        }
        pthread_mutex_unlock(&p->lock);
        const vh_rows_timing before = r->pass.stage_time[1];
        if (!r->failed) r->failed = vh_packed_pass_stage(&r->pass, 1, &r->err);
        pthread_mutex_lock(&p->lock);
        account(p, r, 1, before); /* before the frames are answered: a caller's info then counts it */
        pthread_mutex_unlock(&p->lock);
        finish_pass(p, r);
        pthread_mutex_lock(&p->lock);
        p->on_last_stage = NULL;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}
