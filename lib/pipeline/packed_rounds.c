/*
 * Packed mode's passes (stage_pipeline.h): frames prepared by the intake thread wait at stage 0's
 * queue; a pass takes the prefills of up to max_images of them (their vision run as one batch)
 * beside a decode row of every frame its group has in flight; a frame leaves with its last token.
 * One group runs every stage in one thread; with two stages two groups alternate, the stage-0
 * thread on one group's pass while the stage-1 thread finishes the other's.
 */
#include "pipeline/stage_pipeline_internal.h"

#include <string.h>

vh_status vh_packed_groups_init(vh_stage_pipeline *p, vh_error *err)
{
    const uint32_t dim = p->cfg.action_tokens ? p->cfg.action_tokens : 1;
    p->n_groups = p->n_stages == 2 && p->n_jobs >= 2 ? 2 : 1; /* two stages: two groups alternate */
    for (uint32_t k = 0; k < p->n_groups; k++) {
        pass_group *g = &p->groups[k];
        g->capacity = p->n_jobs / p->n_groups + (k < p->n_jobs % p->n_groups);
        vh_status st = vh_packed_pass_init(&g->pass, p->cfg.ctx, g->capacity, (g->capacity + dim - 1) / dim, err);
        if (st) return st;
        p->group_waiting[0][p->n_group_waiting[0]++] = g;
    }
    return VH_OK;
}

void vh_packed_groups_free(vh_stage_pipeline *p)
{
    for (uint32_t k = 0; k < p->n_groups; k++)
        if (p->groups[k].pass.ctx) vh_packed_pass_free(&p->groups[k].pass);
}

/* Count a group's pass on `stage` in the statistics: its time there since `before`. Lock held. */
static void account(vh_stage_pipeline *p, const pass_group *g, uint32_t stage, vh_rows_timing before)
{
    const int64_t busy = g->pass.stage_time[stage].busy_ns - before.busy_ns;
    p->passes[stage]++;
    p->busy_ns[stage] += busy;
    vh_latency_window_add(&p->pass_ns[stage], busy);
    p->handoff_ns[stage] += g->pass.stage_time[stage].handoff_ns - before.handoff_ns;
}

/* Stage 0 of a group's pass: admit new frames, run their vision, start the pass. Returns with
 * g->in_pass filled (possibly empty) and g->failed set. Lock held on entry and on return. */
static void start_group_pass(vh_stage_pipeline *p, pass_group *g)
{
    uint32_t n_fresh = 0, rows = g->n_active;
    while (n_fresh < g->pass.max_images && g->n_active + n_fresh < g->capacity && p->n_waiting[0] &&
           rows + p->waiting[0][0]->n_rows <= g->pass.max_rows) {
        vh_frame_job *job = vh_pipeline_pop_waiting(p, 0);
        g->in_pass[n_fresh++] = job;
        rows += job->n_rows;
    }
    pthread_mutex_unlock(&p->lock);

    vh_error_clear(&g->err);
    g->failed = VH_OK;
    const vh_rows_timing before = g->pass.stage_time[0];
    if (n_fresh && (g->failed = vh_packed_pass_run_vision(&g->pass, g->in_pass, n_fresh, &g->err))) {
        for (uint32_t i = 0; i < n_fresh; i++) {
            vh_error each = g->err;
            vh_pipeline_complete(p, g->in_pass[i], g->failed, &each);
        }
        n_fresh = 0;
        g->failed = VH_OK;
    }
    g->n_in_pass = n_fresh;
    for (uint32_t i = 0; i < g->n_active; i++) g->in_pass[g->n_in_pass++] = g->active[i];
    g->n_active = 0;
    if (g->n_in_pass && !(g->failed = vh_packed_pass_begin(&g->pass, g->in_pass, g->n_in_pass, &g->err)))
        g->failed = vh_packed_pass_stage(&g->pass, 0, &g->err);
    pthread_mutex_lock(&p->lock);
    if (g->n_in_pass) account(p, g, 0, before);
}

/* After the last stage: every frame of the pass takes its token and goes on, or is answered. */
static void finish_group_pass(vh_stage_pipeline *p, pass_group *g)
{
    if (!g->failed) vh_packed_pass_end(&g->pass);
    for (uint32_t i = 0; i < g->n_in_pass; i++) { /* a failed pass fails every frame in it */
        vh_error each = g->err;
        if (g->failed) vh_pipeline_complete(p, g->in_pass[i], g->failed, &each);
        else if (vh_frame_job_advance(g->in_pass[i])) g->active[g->n_active++] = g->in_pass[i];
        else vh_pipeline_complete(p, g->in_pass[i], VH_OK, &each);
    }
    g->n_in_pass = 0;
}

/* The stage-0 thread: one group through every stage, or (two stages) each group's stage 0. */
void *vh_packed_stage0_main(void *arg)
{
    vh_stage_pipeline *p = ((stage_thread *)arg)->pipeline;
    const int alone = p->n_groups == 1;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        /* a group at stage 0 with work: frames in flight, or room for a waiting frame */
        pass_group *g = NULL;
        for (uint32_t k = 0; k < p->n_group_waiting[0] && !g; k++) {
            pass_group *c = p->group_waiting[0][k];
            if (c->n_active || (p->n_waiting[0] && c->n_active < c->capacity)) {
                g = c;
                memmove(&p->group_waiting[0][k], &p->group_waiting[0][k + 1],
                        sizeof(pass_group *) * (p->n_group_waiting[0] - k - 1));
                p->n_group_waiting[0]--;
            }
        }
        if (!g) {
            if (p->stopping) break;
            pthread_cond_wait(&p->changed, &p->lock);
            continue;
        }
        start_group_pass(p, g);
        if (alone) { /* the other stages here too */
            pthread_mutex_unlock(&p->lock);
            for (uint32_t s = 1; s < p->n_stages && g->n_in_pass && !g->failed; s++) {
                const vh_rows_timing before = g->pass.stage_time[s];
                g->failed = vh_packed_pass_stage(&g->pass, s, &g->err);
                pthread_mutex_lock(&p->lock);
                account(p, g, s, before);
                pthread_mutex_unlock(&p->lock);
            }
            finish_group_pass(p, g);
            pthread_mutex_lock(&p->lock);
            p->group_waiting[0][p->n_group_waiting[0]++] = g;
        } else if (g->n_in_pass) {
            p->group_waiting[1][p->n_group_waiting[1]++] = g;
            pthread_cond_broadcast(&p->changed);
        } else {
            p->group_waiting[0][p->n_group_waiting[0]++] = g;
        }
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

/* The stage-1 thread of two pipelined groups: the pass's second half, then back to stage 0. */
void *vh_packed_stage1_main(void *arg)
{
    vh_stage_pipeline *p = ((stage_thread *)arg)->pipeline;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        if (!p->n_group_waiting[1]) {
            if (p->stopping) break;
            pthread_cond_wait(&p->changed, &p->lock);
            continue;
        }
        pass_group *g = p->group_waiting[1][0];
        memmove(&p->group_waiting[1][0], &p->group_waiting[1][1], sizeof(pass_group *) * (p->n_group_waiting[1] - 1));
        p->n_group_waiting[1]--;
        pthread_mutex_unlock(&p->lock);
        const vh_rows_timing before = g->pass.stage_time[1];
        if (!g->failed) g->failed = vh_packed_pass_stage(&g->pass, 1, &g->err);
        pthread_mutex_lock(&p->lock);
        account(p, g, 1, before); /* before the frames are answered: a caller's info then counts it */
        pthread_mutex_unlock(&p->lock);
        finish_group_pass(p, g);
        pthread_mutex_lock(&p->lock);
        p->group_waiting[0][p->n_group_waiting[0]++] = g;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}
