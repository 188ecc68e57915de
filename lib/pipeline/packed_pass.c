#include "pipeline/packed_pass.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vh_status vh_packed_pass_init(vh_packed_pass *p, const vh_job_context *ctx, uint32_t max_jobs, vh_error *err)
{
    memset(p, 0, sizeof *p);
    p->ctx = ctx;
    p->max_jobs = max_jobs;
    p->segments = calloc(max_jobs, sizeof *p->segments);
    p->tokens = calloc(ctx->max_context, sizeof *p->tokens);
    p->out_tokens = calloc(max_jobs, sizeof *p->out_tokens);
    p->hidden = vh_plan_host_alloc(ctx->plan, sizeof(float) * ctx->max_context * ctx->model->desc.llm.hidden);
    if (!p->segments || !p->tokens || !p->out_tokens || !p->hidden) {
        vh_packed_pass_free(p);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (packed pass)");
    }
    return VH_OK;
}

void vh_packed_pass_free(vh_packed_pass *p)
{
    free(p->segments);
    free(p->tokens);
    free(p->out_tokens);
    if (p->hidden) vh_plan_host_free(p->ctx->plan, p->hidden);
    memset(p, 0, sizeof *p);
}

uint32_t vh_packed_pass_rows(vh_frame_job *const *jobs, uint32_t n)
{
    uint32_t rows = 0;
    for (uint32_t i = 0; i < n; i++) rows += jobs[i]->batch.n_rows;
    return rows;
}

vh_status vh_packed_pass_run(vh_packed_pass *p, vh_frame_job *const *jobs, uint32_t n, vh_error *err)
{
    const vh_job_context *ctx = p->ctx;
    const vh_plan *plan = ctx->plan;
    uint32_t prefills = 0;
    for (uint32_t i = 0; i < n; i++) prefills += jobs[i]->pass == VH_PASS_PREFILL;
    /* one prefill at most: its patch embeddings are the ones stage 0 computed last (image 0) */
    if (n == 0 || n > p->max_jobs || prefills > 1 || vh_packed_pass_rows(jobs, n) > ctx->max_context)
        return vh_error_set(err, VH_ERR_INTERNAL, "packed pass of %u frames (%u prefills), %u rows (at most %u, 1, "
                            "%u)", n, prefills, vh_packed_pass_rows(jobs, n), p->max_jobs, ctx->max_context);
    /* the frames' segments and rows, in order */
    uint32_t rows = 0;
    for (uint32_t i = 0; i < n; i++) {
        const vh_batch *b = &jobs[i]->batch;
        p->segments[i] = jobs[i]->segment;
        memcpy(p->tokens + rows, b->tokens, sizeof(int32_t) * b->n_rows);
        rows += b->n_rows;
    }
    vh_batch batch = {.n_segments = n, .segments = p->segments, .n_rows = rows, .tokens = p->tokens,
                      .out_tokens = p->out_tokens};
    char name[48];
    snprintf(name, sizeof name, "pass %llu: %u prefill + %u steps", (unsigned long long)p->count, prefills,
             n - prefills);
    const vh_rows_job r = {.plan = plan, .model = ctx->model, .copy_hidden = ctx->copy_hidden, .trace = ctx->trace,
                           .name = name, .frame_id = jobs[0]->frame_id};
    /* every frame of a pass has the plan's cut (the packed mode does not move it) */
    for (uint32_t s = 0; s < plan->n_stages; s++) {
        const uint32_t first = s == 0 ? ctx->model->llm_embed_block : jobs[0]->stage_end[s - 1];
        vh_status st = vh_stage_run_rows(&r, s, &batch, p->hidden, first, jobs[0]->stage_end[s], &p->stage_time[s], err);
        if (st) return st;
    }
    for (uint32_t i = 0; i < n; i++) jobs[i]->next_token = p->out_tokens[i];
    p->count++;
    return VH_OK;
}
