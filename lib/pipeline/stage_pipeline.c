#include "pipeline/stage_pipeline.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/packed_pass.h"
#include "pipeline/split_scheduler.h"
#include "util/clock.h"

#define MAX_JOBS VH_MAX_FRAMES_IN_FLIGHT

typedef struct stage_thread {
    vh_stage_pipeline *pipeline;
    uint32_t index;
    pthread_t thread;
} stage_thread;

/* A packed pass and the frames it carries from pass to pass. With two stages two groups
 * alternate, so stage 0 runs one group's pass while stage 1 finishes the other's. */
typedef struct pass_group {
    vh_packed_pass pass;
    uint32_t capacity;                 /* frames the group holds at most */
    vh_frame_job *active[MAX_JOBS];    /* frames between passes (at a decode step) */
    uint32_t n_active;
    vh_frame_job *in_pass[MAX_JOBS];   /* the current pass: new frames first, then active ones */
    uint32_t n_in_pass;
    vh_status failed;                  /* the current pass failed on a stage */
    vh_error err;
} pass_group;

struct vh_stage_pipeline {
    vh_pipeline_config cfg;
    uint32_t n_stages, n_jobs;
    int pipelined;
    int packed;                        /* packed passes (pass groups) */
    pass_group groups[2];              /* one doing every stage, or two alternating over two stages */
    uint32_t n_groups;
    pass_group *group_waiting[VH_MAX_STAGES][2]; /* per stage, oldest first */
    uint32_t n_group_waiting[VH_MAX_STAGES];
    int has_scheduler;
    vh_split_scheduler scheduler;
    vh_frame_job jobs[MAX_JOBS];
    uint32_t n_jobs_ready;             /* jobs initialised (freed at stop) */

    pthread_mutex_t lock;              /* guards everything below */
    pthread_cond_t changed;            /* a job freed, work queued, or stopping */
    vh_frame_job *free_jobs[MAX_JOBS];
    uint32_t n_free;
    vh_frame_job *waiting[VH_MAX_STAGES][MAX_JOBS]; /* per stage, oldest first */
    uint32_t n_waiting[VH_MAX_STAGES];
    int stopping;

    pthread_t intake;
    int intake_started;
    stage_thread stages[VH_MAX_STAGES];
    uint32_t n_stage_threads;

    /* statistics */
    uint64_t passes[VH_MAX_STAGES];
    int64_t busy_ns[VH_MAX_STAGES];
    int64_t handoff_ns[VH_MAX_STAGES];
    uint64_t frames_completed;
};

static void release_job(vh_stage_pipeline *p, vh_frame_job *job)
{
    pthread_mutex_lock(&p->lock);
    job->owner = NULL;
    p->free_jobs[p->n_free++] = job;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

static void enqueue(vh_stage_pipeline *p, uint32_t stage, vh_frame_job *job)
{
    pthread_mutex_lock(&p->lock);
    p->waiting[stage][p->n_waiting[stage]++] = job;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

/* The next job for `stage`, oldest first, but at stage 0 a token step before a new frame (it
 * frees its KV slot sooner). Lock held; the stage's queue is not empty. */
static vh_frame_job *pop_waiting(vh_stage_pipeline *p, uint32_t stage)
{
    uint32_t pick = 0;
    if (stage == 0)
        for (uint32_t i = 0; i < p->n_waiting[0]; i++)
            if (p->waiting[0][i]->pass == VH_PASS_DECODE) {
                pick = i;
                break;
            }
    vh_frame_job *job = p->waiting[stage][pick];
    memmove(&p->waiting[stage][pick], &p->waiting[stage][pick + 1],
            sizeof(vh_frame_job *) * (p->n_waiting[stage] - pick - 1));
    p->n_waiting[stage]--;
    return job;
}

/* The frame is over (an action, or a failure): answer its record, learn, free the job. */
static void complete(vh_stage_pipeline *p, vh_frame_job *job, vh_status st, vh_error *err)
{
    vh_frame_record *rec = job->owner;
    vh_action *a = &rec->result;
    a->status = st;
    if (st == VH_OK) {
        vh_frame_result out;
        vh_frame_job_result(job, &out);
        a->action_dim = out.action_dim;
        memcpy(a->values, out.values, sizeof out.values);
        memcpy(a->token_ids, out.token_ids, sizeof out.token_ids);
        a->vision_ns = out.vision_ns;
        a->prefill_ns = out.prefill_ns;
        a->decode_ns = out.decode_ns;
        if (p->has_scheduler) vh_split_scheduler_observe(&p->scheduler, job);
        pthread_mutex_lock(&p->lock);
        p->frames_completed++;
        for (uint32_t i = 0; i < p->n_stages; i++) p->handoff_ns[i] += job->handoff_ns[i];
        pthread_mutex_unlock(&p->lock);
    } else {
        vh_error_prefix(err, "frame %llu: ", (unsigned long long)a->frame_id);
        if (p->cfg.on_frame_error) p->cfg.on_frame_error(p->cfg.user, err);
    }
    vh_frame_queue_finish(p->cfg.frames, rec);
    release_job(p, job);
}

static vh_status run_stage(vh_stage_pipeline *p, vh_frame_job *job, uint32_t stage, vh_error *err)
{
    int64_t t0 = vh_now_ns();
    vh_status st = vh_frame_job_run_stage(job, stage, err);
    int64_t dt = vh_now_ns() - t0;
    pthread_mutex_lock(&p->lock);
    p->passes[stage]++;
    p->busy_ns[stage] += dt;
    pthread_mutex_unlock(&p->lock);
    return st;
}

/* Serial mode: every pass of the frame through every stage, in this thread. */
static void run_serially(vh_stage_pipeline *p, vh_frame_job *job)
{
    vh_error err;
    vh_error_clear(&err);
    vh_status st;
    do {
        st = VH_OK;
        for (uint32_t i = 0; i < p->n_stages && st == VH_OK; i++) st = run_stage(p, job, i, &err);
    } while (st == VH_OK && vh_frame_job_advance(job));
    complete(p, job, st, &err);
}

static void *stage_main(void *arg)
{
    stage_thread *self = arg;
    vh_stage_pipeline *p = self->pipeline;
    const uint32_t i = self->index;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (!p->stopping && p->n_waiting[i] == 0) pthread_cond_wait(&p->changed, &p->lock);
        if (p->n_waiting[i] == 0) {
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        vh_frame_job *job = pop_waiting(p, i);
        pthread_mutex_unlock(&p->lock);

        vh_error err;
        vh_error_clear(&err);
        vh_status st = run_stage(p, job, i, &err);
        if (st) complete(p, job, st, &err);
        else if (i + 1 < p->n_stages) enqueue(p, i + 1, job);
        else if (vh_frame_job_advance(job)) enqueue(p, 0, job);
        else complete(p, job, VH_OK, &err);
    }
}

/* Packed mode. Frames prepared by the intake thread wait at stage 0's queue; a pass takes the
 * prefills of up to max_images of them (their vision run here as one batch) beside a decode row
 * of every frame the group has in flight; a frame leaves with its last token. */

/* Count a group's pass on `stage` in the statistics: its time there since `before`. Lock held. */
static void account(vh_stage_pipeline *p, const pass_group *g, uint32_t stage, vh_rows_timing before)
{
    p->passes[stage]++;
    p->busy_ns[stage] += g->pass.stage_time[stage].busy_ns - before.busy_ns;
    p->handoff_ns[stage] += g->pass.stage_time[stage].handoff_ns - before.handoff_ns;
}

/* Stage 0 of a group's pass: admit new frames, run their vision, start the pass. Returns with
 * g->in_pass filled (possibly empty) and g->failed set. Lock held on entry and on return. */
static void start_group_pass(vh_stage_pipeline *p, pass_group *g)
{
    uint32_t n_fresh = 0, rows = g->n_active;
    while (n_fresh < g->pass.max_images && g->n_active + n_fresh < g->capacity && p->n_waiting[0] &&
           rows + p->waiting[0][0]->n_rows <= g->pass.max_rows) {
        vh_frame_job *job = pop_waiting(p, 0);
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
            complete(p, g->in_pass[i], g->failed, &each);
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
        if (g->failed) complete(p, g->in_pass[i], g->failed, &each);
        else if (vh_frame_job_advance(g->in_pass[i])) g->active[g->n_active++] = g->in_pass[i];
        else complete(p, g->in_pass[i], VH_OK, &each);
    }
    g->n_in_pass = 0;
}

/* The stage-0 thread: one group through every stage, or (two stages) each group's stage 0. */
static void *packed_stage0_main(void *arg)
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
static void *packed_stage1_main(void *arg)
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
        finish_group_pass(p, g);
        pthread_mutex_lock(&p->lock);
        account(p, g, 1, before);
        p->group_waiting[0][p->n_group_waiting[0]++] = g;
        pthread_cond_broadcast(&p->changed);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

static void *intake_main(void *arg)
{
    vh_stage_pipeline *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        while (p->n_free == 0) pthread_cond_wait(&p->changed, &p->lock);
        vh_frame_job *job = p->free_jobs[--p->n_free];
        pthread_mutex_unlock(&p->lock);

        vh_frame_record *rec = vh_frame_queue_take(p->cfg.frames);
        if (!rec) {
            release_job(p, job);
            break;
        }
        job->owner = rec;
        vh_error err;
        vh_error_clear(&err);
        int64_t t0 = vh_now_ns();
        vh_status st = vh_frame_job_prepare(job, rec->result.frame_id, rec->rgb, rec->width, rec->height,
                                            (size_t)rec->width * 3, rec->instruction, &err);
        if (p->cfg.ctx->trace) {
            char name[48];
            snprintf(name, sizeof name, "prepare f%llu", (unsigned long long)rec->result.frame_id);
            vh_trace_span(p->cfg.ctx->trace, p->n_stages, name, rec->result.frame_id, t0, vh_now_ns());
        }
        if (st) {
            complete(p, job, st, &err);
            continue;
        }
        if (p->has_scheduler) {
            uint32_t backlog[2];
            pthread_mutex_lock(&p->lock);
            backlog[0] = p->n_waiting[0];
            backlog[1] = p->n_waiting[1];
            pthread_mutex_unlock(&p->lock);
            vh_frame_job_set_split(job, vh_split_scheduler_choose(&p->scheduler, backlog));
        }
        if (p->pipelined || p->packed) enqueue(p, 0, job);
        else run_serially(p, job);
    }
    /* the queue is closed: let the frames in flight finish, then stop the stage threads */
    pthread_mutex_lock(&p->lock);
    while (p->n_free < p->n_jobs) pthread_cond_wait(&p->changed, &p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

vh_status vh_stage_pipeline_start(const vh_pipeline_config *cfg, vh_stage_pipeline **out, vh_error *err)
{
    *out = NULL;
    vh_stage_pipeline *p = calloc(1, sizeof *p);
    if (!p) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (pipeline)");
    const vh_plan *plan = cfg->ctx->plan;
    p->cfg = *cfg;
    p->n_stages = plan->n_stages;
    p->pipelined = cfg->mode == VH_EXECUTION_PIPELINE && plan->n_stages > 1;
    p->packed = cfg->mode == VH_EXECUTION_PACKED;
    p->n_jobs = p->pipelined || p->packed ? cfg->frames_in_flight : 1;
    if (p->n_jobs < 1) p->n_jobs = 1;
    if (p->n_jobs > MAX_JOBS) p->n_jobs = MAX_JOBS;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->changed, NULL);
    p->has_scheduler = plan->n_stages == 2 && !p->packed; /* a packed pass has one cut for all */
    if (p->has_scheduler) vh_split_scheduler_init(&p->scheduler, plan, cfg->action_tokens, cfg->ctx->trace);
    *out = p;

    for (uint32_t j = 0; j < p->n_jobs; j++) {
        vh_status st = vh_frame_job_init(&p->jobs[j], cfg->ctx, j, err);
        if (st) return st; /* the caller stops what started */
        p->n_jobs_ready++;
        p->free_jobs[p->n_free++] = &p->jobs[j];
    }
    if (p->packed) { /* two stages and room for two groups: they alternate over the stages */
        const uint32_t dim = cfg->action_tokens ? cfg->action_tokens : 1;
        p->n_groups = plan->n_stages == 2 && p->n_jobs >= 2 ? 2 : 1;
        for (uint32_t k = 0; k < p->n_groups; k++) {
            pass_group *g = &p->groups[k];
            g->capacity = p->n_jobs / p->n_groups + (k < p->n_jobs % p->n_groups);
            vh_status st = vh_packed_pass_init(&g->pass, cfg->ctx, g->capacity, (g->capacity + dim - 1) / dim, err);
            if (st) return st;
            p->group_waiting[0][p->n_group_waiting[0]++] = g;
        }
    }
    if (cfg->ctx->trace) {
        char name[64];
        for (uint32_t i = 0; i < plan->n_stages; i++) {
            snprintf(name, sizeof name, "stage %u: %s", i, plan->stages[i].plugin->iface->name);
            vh_trace_name_track(cfg->ctx->trace, i, name);
        }
        vh_trace_name_track(cfg->ctx->trace, plan->n_stages, "intake (resize, tokenise)");
    }
    for (uint32_t i = 0; p->packed && i < p->n_groups; i++) {
        p->stages[i] = (stage_thread){.pipeline = p, .index = i};
        if (pthread_create(&p->stages[i].thread, NULL, i ? packed_stage1_main : packed_stage0_main, &p->stages[i]))
            return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "cannot start the packed-pass threads");
        p->n_stage_threads++;
    }
    if (p->pipelined) {
        for (uint32_t i = 0; i < p->n_stages; i++) {
            p->stages[i] = (stage_thread){.pipeline = p, .index = i};
            if (pthread_create(&p->stages[i].thread, NULL, stage_main, &p->stages[i]) != 0)
                return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "cannot start the stage threads");
            p->n_stage_threads++;
        }
    }
    if (pthread_create(&p->intake, NULL, intake_main, p) != 0)
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "cannot start the intake thread");
    p->intake_started = 1;
    return VH_OK;
}

void vh_stage_pipeline_stop(vh_stage_pipeline *p)
{
    if (!p) return;
    if (p->intake_started) {
        pthread_join(p->intake, NULL);
    } else { /* start failed before the intake: nothing is in flight */
        pthread_mutex_lock(&p->lock);
        p->stopping = 1;
        pthread_cond_broadcast(&p->changed);
        pthread_mutex_unlock(&p->lock);
    }
    for (uint32_t i = 0; i < p->n_stage_threads; i++) pthread_join(p->stages[i].thread, NULL);
    for (uint32_t j = 0; j < p->n_jobs_ready; j++) vh_frame_job_free(&p->jobs[j]);
    for (uint32_t k = 0; k < p->n_groups; k++)
        if (p->groups[k].pass.ctx) vh_packed_pass_free(&p->groups[k].pass);
    if (p->has_scheduler) vh_split_scheduler_destroy(&p->scheduler);
    pthread_cond_destroy(&p->changed);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

void vh_stage_pipeline_stats(vh_stage_pipeline *p, vh_session_info *info)
{
    const vh_plan *plan = p->cfg.ctx->plan;
    int64_t prefill_block[2] = {0, 0}, decode_block[2] = {0, 0};
    uint32_t split = plan->llm_split, changes = 0;
    if (p->has_scheduler) vh_split_scheduler_read(&p->scheduler, &split, &changes, prefill_block, decode_block);
    info->execution_mode = p->packed ? VH_EXECUTION_PACKED : p->pipelined ? VH_EXECUTION_PIPELINE : VH_EXECUTION_SERIAL;
    info->frames_in_flight = p->n_jobs;
    info->n_stages = plan->n_stages;
    info->llm_split = plan->n_stages == 2 ? (int32_t)split : -1;
    info->split_min = plan->split_min;
    info->split_max = plan->split_max;
    info->split_changes = changes;
    pthread_mutex_lock(&p->lock);
    info->frames_completed = p->frames_completed;
    for (uint32_t i = 0; i < plan->n_stages && i < 4; i++) {
        vh_stage_stats *s = &info->stages[i];
        snprintf(s->backend, sizeof s->backend, "%s", plan->stages[i].plugin->iface->name);
        s->first_block = plan->stages[i].first_block;
        s->n_blocks = plan->stages[i].n_blocks;
        s->passes = p->passes[i];
        s->busy_ns = p->busy_ns[i];
        s->handoff_ns = p->handoff_ns[i];
        info->handoff_ns += p->handoff_ns[i];
        s->prefill_block_ns = i < 2 ? prefill_block[i] : 0;
        s->decode_block_ns = i < 2 ? decode_block[i] : 0;
    }
    pthread_mutex_unlock(&p->lock);
}
