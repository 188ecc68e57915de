#include "pipeline/stage_pipeline_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/thread_start.h"

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
vh_frame_job *vh_pipeline_pop_waiting(vh_stage_pipeline *p, uint32_t stage)
{
    uint32_t pick = 0;
    if (stage == 0)
        for (uint32_t i = 0; i < p->n_waiting[0]; i++)
            if (vh_frame_job_pass(p->waiting[0][i]) == VH_PASS_DECODE) {
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
void vh_pipeline_complete(vh_stage_pipeline *p, vh_frame_job *job, vh_status st, vh_error *err)
{
    vh_frame_record *rec = job->owner;
    vh_frame_result out;
    if (st == VH_OK) {
        vh_frame_job_result(job, &out);
        if (p->has_scheduler) vh_split_scheduler_observe(&p->scheduler, job);
        pthread_mutex_lock(&p->lock);
        p->frames_completed++;
        for (uint32_t i = 0; i < p->n_stages; i++) p->handoff_ns[i] += job->handoff_ns[i];
        pthread_mutex_unlock(&p->lock);
    } else {
        vh_error_prefix(err, "frame %llu: ", (unsigned long long)job->frame_id);
        if (p->cfg.on_frame_error) p->cfg.on_frame_error(p->cfg.user, err);
        /* the action carries its own frame's failure message (vh_action.message), never another's;
         * none for the everyday outcomes */
        if (st != VH_ERR_DROPPED && st != VH_ERR_CANCELLED && st != VH_ERR_EXPIRED) {
            const size_t n = strnlen(err->message, sizeof rec->result.message - 1); /* cut if longer */
            memcpy(rec->result.message, err->message, n);
            rec->result.message[n] = '\0';
        }
    }
    vh_frame_queue_answer(p->cfg.frames, rec, st, st == VH_OK ? &out : NULL);
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
    vh_latency_window_add(&p->pass_ns[stage], dt);
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
    vh_pipeline_complete(p, job, st, &err);
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
        vh_frame_job *job = vh_pipeline_pop_waiting(p, i);
        pthread_mutex_unlock(&p->lock);

        vh_error err;
        vh_error_clear(&err);
        vh_status st = run_stage(p, job, i, &err);
        if (st) vh_pipeline_complete(p, job, st, &err);
        else if (i + 1 < p->n_stages) enqueue(p, i + 1, job);
        else if (vh_frame_job_advance(job)) enqueue(p, 0, job);
        else vh_pipeline_complete(p, job, VH_OK, &err);
    }
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
        const vh_frame_input in = vh_frame_record_input(rec);
        vh_status st = vh_frame_job_prepare(job, rec->result.frame_id, &in, &err);
        if (p->cfg.ctx->trace) {
            char name[48];
            snprintf(name, sizeof name, "prepare f%llu", (unsigned long long)rec->result.frame_id);
            vh_trace_span(p->cfg.ctx->trace, p->n_stages, name, rec->result.frame_id, t0, vh_now_ns());
        }
        if (st) {
            vh_pipeline_complete(p, job, st, &err);
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
        vh_status st = vh_frame_job_init(&p->jobs[j], cfg->ctx, j * cfg->ctx->segments_per_frame, err);
        if (st) return st; /* the caller stops what started */
        p->n_jobs_ready++;
        p->free_jobs[p->n_free++] = &p->jobs[j];
    }
    if (p->packed) {
        vh_status st = vh_packed_rounds_init(p, err);
        if (st) return st;
    }
    if (cfg->ctx->trace) {
        char name[64];
        for (uint32_t i = 0; i < plan->n_stages; i++) {
            snprintf(name, sizeof name, "stage %u: %s", i, plan->stages[i].plugin->iface->name);
            vh_trace_name_track(cfg->ctx->trace, i, name);
        }
        vh_trace_name_track(cfg->ctx->trace, plan->n_stages, "intake (resize, tokenise)");
    }
    for (uint32_t i = 0; p->packed && i < p->n_rounds; i++) {
        p->stages[i] = (stage_thread){.pipeline = p, .index = i};
        if (vh_thread_start(&p->stages[i].thread, NULL, i ? vh_packed_stage1_main : vh_packed_stage0_main,
                            &p->stages[i], i ? "vh-packed1" : "vh-packed0"))
            return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "cannot start the packed-pass threads");
        p->n_stage_threads++;
    }
    if (p->pipelined) {
        for (uint32_t i = 0; i < p->n_stages; i++) {
            p->stages[i] = (stage_thread){.pipeline = p, .index = i};
            if (vh_thread_start(&p->stages[i].thread, NULL, stage_main, &p->stages[i], i ? "vh-stage1" : "vh-stage0") != 0)
                return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "cannot start the stage threads");
            p->n_stage_threads++;
        }
    }
    if (vh_thread_start(&p->intake, NULL, intake_main, p, "vh-intake") != 0)
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
    vh_packed_rounds_free(p);
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

vh_status vh_stage_pipeline_pass_stats(vh_stage_pipeline *p, vh_session_stats *out)
{
    vh_latency_window *copy = malloc(sizeof *copy); /* summarised outside the lock, off the stack */
    if (!copy) return VH_ERR_OUT_OF_MEMORY;
    out->n_stages = p->n_stages;
    for (uint32_t i = 0; i < p->n_stages && i < 4; i++) {
        pthread_mutex_lock(&p->lock);
        *copy = p->pass_ns[i];
        pthread_mutex_unlock(&p->lock);
        vh_latency_window_summary(copy, &out->stage_pass[i]);
    }
    free(copy);
    return VH_OK;
}

void vh_stage_pipeline_clear_stats(vh_stage_pipeline *p)
{
    pthread_mutex_lock(&p->lock);
    memset(p->passes, 0, sizeof p->passes);
    memset(p->busy_ns, 0, sizeof p->busy_ns);
    memset(p->handoff_ns, 0, sizeof p->handoff_ns);
    memset(p->pass_ns, 0, sizeof p->pass_ns);
    p->frames_completed = 0;
    pthread_mutex_unlock(&p->lock);
}
