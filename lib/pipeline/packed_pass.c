#include "pipeline/packed_pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"

vh_status vh_packed_pass_init(vh_packed_pass *p, const vh_job_context *ctx, uint32_t max_jobs, uint32_t max_images,
                              vh_error *err)
{
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->max_jobs = max_jobs;
    p->max_images = max_images ? max_images : 1;
    p->max_rows = vh_job_context_frame_rows(ctx) * p->max_images;
    const uint32_t Dl = ctx->model->desc.llm.hidden;
    vh_status st = vh_pass_batch_init(&p->batch, max_jobs, max_jobs * ctx->segments_per_frame, p->max_rows, Dl, err);
    if (st) return st;
    p->planes = calloc((size_t)p->max_images * ctx->model->desc.n_towers, sizeof *p->planes);
    p->jobs = calloc(max_jobs, sizeof *p->jobs);
    p->hidden = vh_plan_host_alloc(ctx->plan, sizeof(float) * p->max_rows * Dl);
    if (!p->planes || !p->jobs || !p->hidden) {
        vh_packed_pass_free(p);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (packed pass)");
    }
    return VH_OK;
}

void vh_packed_pass_free(vh_packed_pass *p)
{
    vh_pass_batch_free(&p->batch);
    free(p->planes);
    free(p->jobs);
    if (p->hidden) vh_plan_host_free(p->ctx->plan, p->hidden);
    memset(p, 0, sizeof *p);
}

uint32_t vh_packed_pass_rows(vh_frame_job *const *jobs, uint32_t n)
{
    uint32_t rows = 0;
    for (uint32_t i = 0; i < n; i++) rows += vh_frame_job_rows(jobs[i]);
    return rows;
}

vh_status vh_packed_pass_run_vision(vh_packed_pass *p, vh_frame_job *const *jobs, uint32_t n, vh_error *err)
{
    const vh_model *m = p->ctx->model;
    const uint32_t towers = m->desc.n_towers;
    if (p->ctx->family->run_vision) { /* the family's runs, frame by frame in order */
        for (uint32_t i = 0; i < n; i++) {
            vh_status st = vh_frame_job_run_vision(jobs[i], err);
            if (st) return st;
            p->stage_time[0].busy_ns += jobs[i]->vision_ns;
        }
        return VH_OK;
    }
    if (n == 0 || n > p->max_images)
        return vh_error_set(err, VH_ERR_INTERNAL, "vision batch of %u images (at most %u)", n, p->max_images);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t t = 0; t < towers; t++) p->planes[i * towers + t] = jobs[i]->frame.pixels[t];
    vh_batch vision = {.struct_size = sizeof(vh_batch), .n_images = n, .pixels = p->planes};
    int64_t t0 = vh_now_ns();
    vh_status st = vh_stage_run_range(&p->ctx->plan->stages[0], &vision, 0, m->llm_embed_block, err);
    if (st) return st;
    int64_t t1 = vh_now_ns();
    for (uint32_t i = 0; i < n; i++) {
        jobs[i]->vision_ns = t1 - t0;
        jobs[i]->vision_end_ns = t1;
        jobs[i]->vision_done = 1;
        jobs[i]->packed_image = (int32_t)i; /* its patch embeddings in this batch */
    }
    if (p->ctx->trace) {
        char name[48];
        snprintf(name, sizeof name, "vision of %u frames", n);
        vh_trace_span(p->ctx->trace, 0, name, jobs[0]->frame_id, t0, t1);
    }
    p->stage_time[0].busy_ns += t1 - t0;
    return VH_OK;
}

vh_status vh_packed_pass_begin(vh_packed_pass *p, vh_frame_job *const *jobs, uint32_t n, vh_error *err)
{
    uint32_t prefills = 0;
    for (uint32_t i = 0; i < n; i++) prefills += vh_frame_job_pass(jobs[i]) == VH_PASS_PREFILL;
    /* the prefills' patch embeddings are those of stage 0's last vision batch (each its packed_image) */
    if (n == 0 || n > p->max_jobs || prefills > p->max_images || vh_packed_pass_rows(jobs, n) > p->max_rows)
        return vh_error_set(err, VH_ERR_INTERNAL, "packed pass of %u frames (%u prefills), %u rows (at most %u, %u, "
                            "%u)", n, prefills, vh_packed_pass_rows(jobs, n), p->max_jobs, p->max_images, p->max_rows);
    /* the frames' requests, in order */
    vh_pass_batch_clear(&p->batch);
    for (uint32_t i = 0; i < n; i++) {
        p->jobs[i] = jobs[i];
        const vh_frame_job *job = jobs[i];
        vh_status st = vh_pass_batch_add(&p->batch, &job->frame.pass, job->sequence, job->packed_image, err);
        if (st) return st;
    }
    p->n = n;
    vh_status st = vh_pass_batch_close(&p->batch, err);
    if (st) return st;
    snprintf(p->name, sizeof p->name, "pass %llu: %u prefill + %u steps", (unsigned long long)p->count, prefills,
             n - prefills);
    return VH_OK;
}

/* The pass's rows job (trace name, the frame id of its first job) and a stage's LLM blocks: every
 * frame of a pass has the plan's cut (the packed mode does not move it). */
static vh_rows_job rows_job(const vh_packed_pass *p, const char *name, uint32_t first_job)
{
    const vh_job_context *ctx = p->ctx;
    return (vh_rows_job){.plan = ctx->plan, .model = ctx->model, .copy_hidden = ctx->copy_hidden, .trace = ctx->trace,
                         .name = name, .frame_id = p->jobs[first_job]->frame_id};
}

static void stage_blocks(const vh_packed_pass *p, uint32_t stage, uint32_t *begin, uint32_t *end)
{
    const uint32_t *cut = p->jobs[0]->stage_end;
    *begin = stage == 0 ? p->ctx->model->llm_embed_block : cut[stage - 1];
    *end = cut[stage];
}

vh_status vh_packed_pass_stage(vh_packed_pass *p, uint32_t stage, vh_error *err)
{
    const vh_rows_job r = rows_job(p, p->name, 0);
    uint32_t begin, end;
    stage_blocks(p, stage, &begin, &end);
    return vh_stage_run_rows(&r, stage, &p->batch.batch, p->hidden, begin, end, &p->stage_time[stage], err);
}

vh_status vh_packed_pass_stage_part(vh_packed_pass *p, uint32_t stage, uint32_t first, uint32_t count, vh_error *err)
{
    const vh_job_context *ctx = p->ctx;
    if (count == 0 || first + count > p->n || stage + 1 >= ctx->plan->n_stages)
        return vh_error_set(err, VH_ERR_INTERNAL, "packed pass: segments %u..%u of %u on stage %u of %u", first,
                            first + count, p->n, stage, ctx->plan->n_stages);
    uint32_t prefills = 0;
    for (uint32_t i = first; i < first + count; i++) prefills += vh_frame_job_pass(p->jobs[i]) == VH_PASS_PREFILL;
    char name[64];
    snprintf(name, sizeof name, "pass %llu part: %u prefill + %u steps", (unsigned long long)p->count, prefills,
             count - prefills);
    /* the part's own segments and rows */
    const vh_batch part = vh_pass_batch_part(&p->batch, first, count);
    const size_t row0 = p->batch.first_row[first];
    const vh_rows_job r = rows_job(p, name, first);
    uint32_t begin, end;
    stage_blocks(p, stage, &begin, &end);
    return vh_stage_run_rows(&r, stage, &part, p->hidden + row0 * ctx->model->desc.llm.hidden, begin, end,
                             &p->stage_time[stage], err);
}

void vh_packed_pass_end(vh_packed_pass *p)
{
    vh_pass_batch_return(&p->batch);
    p->count++;
}
