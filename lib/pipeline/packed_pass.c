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
    p->max_segments = max_jobs * ctx->segments_per_frame;
    p->segments = calloc(p->max_segments, sizeof *p->segments);
    p->first_segment = calloc(max_jobs + 1, sizeof *p->first_segment);
    p->segment_adapters = calloc(p->max_segments, 1);
    p->plan_segments = calloc(p->max_segments, 1);
    p->planes = calloc((size_t)p->max_images * ctx->model->desc.n_towers, sizeof *p->planes);
    p->jobs = calloc(max_jobs, sizeof *p->jobs);
    p->tokens = calloc(p->max_rows, sizeof *p->tokens);
    p->out_tokens = calloc(p->max_segments, sizeof *p->out_tokens);
    p->hidden = vh_plan_host_alloc(ctx->plan, sizeof(float) * p->max_rows * ctx->model->desc.llm.hidden);
    if (!p->segments || !p->first_segment || !p->segment_adapters || !p->plan_segments || !p->planes || !p->jobs ||
        !p->tokens || !p->out_tokens || !p->hidden) {
        vh_packed_pass_free(p);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (packed pass)");
    }
    return VH_OK;
}

void vh_packed_pass_free(vh_packed_pass *p)
{
    free(p->segments);
    free(p->first_segment);
    free(p->segment_adapters);
    free(p->plan_segments);
    free(p->planes);
    free(p->jobs);
    free(p->tokens);
    free(p->out_tokens);
    free(p->hidden_rows);
    free(p->out_hidden);
    free(p->plan_noise);
    free(p->out_plan);
    if (p->hidden) vh_plan_host_free(p->ctx->plan, p->hidden);
    memset(p, 0, sizeof *p);
}

uint32_t vh_packed_pass_rows(vh_frame_job *const *jobs, uint32_t n)
{
    uint32_t rows = 0;
    for (uint32_t i = 0; i < n; i++) rows += jobs[i]->batch.n_rows;
    return rows;
}

vh_status vh_packed_pass_run_vision(vh_packed_pass *p, vh_frame_job *const *jobs, uint32_t n, vh_error *err)
{
    const vh_model *m = p->ctx->model;
    const uint32_t towers = m->desc.n_towers;
    if (n == 0 || n > p->max_images)
        return vh_error_set(err, VH_ERR_INTERNAL, "vision batch of %u images (at most %u)", n, p->max_images);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t t = 0; t < towers; t++) p->planes[i * towers + t] = jobs[i]->pixels[t];
    vh_batch vision = {.struct_size = sizeof(vh_batch), .n_images = n, .pixels = p->planes};
    int64_t t0 = vh_now_ns();
    vh_status st = vh_stage_run_range(&p->ctx->plan->stages[0], &vision, 0, m->llm_embed_block, err);
    if (st) return st;
    int64_t t1 = vh_now_ns();
    for (uint32_t i = 0; i < n; i++) {
        jobs[i]->vision_ns = t1 - t0;
        jobs[i]->vision_end_ns = t1;
        jobs[i]->vision_done = 1;
        for (uint32_t k = 0; k < jobs[i]->n_segments; k++)
            jobs[i]->segments[k].image = (int32_t)i; /* its patch embeddings in this batch */
    }
    if (p->ctx->trace) {
        char name[48];
        snprintf(name, sizeof name, "vision of %u frames", n);
        vh_trace_span(p->ctx->trace, 0, name, jobs[0]->frame_id, t0, t1);
    }
    p->stage_time[0].busy_ns += t1 - t0;
    return VH_OK;
}

/* Grow *buf to hold n items of `size` bytes (the pass's gathered outputs: a few rows). */
static int reserve(void **buf, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap) return 1;
    void *grown = realloc(*buf, n * size);
    if (!grown) return 0;
    *buf = grown;
    *cap = n;
    return 1;
}

/* The frames' hidden rows and plans (their batches' options beyond tokens): one list for the pass,
 * each frame's rows offset to where its segment starts; vh_packed_pass_end hands them back. Every
 * frame of a session asks the same of a pass. */
static vh_status gather_outputs(vh_packed_pass *p, vh_frame_job *const *jobs, uint32_t n, vh_error *err)
{
    const vh_batch *b0 = &jobs[0]->batch;
    const uint32_t k = b0->n_hidden_rows, Dl = p->ctx->model->desc.llm.hidden, S = p->batch.n_segments;
    p->batch.options = b0->options;
    for (uint32_t i = 1; i < n; i++) {
        const vh_batch *b = &jobs[i]->batch;
        if (b->options != b0->options || b->n_hidden_rows != k || b->plan_noise_stride != b0->plan_noise_stride ||
            b->plan_out_stride != b0->plan_out_stride || b->n_segments != b0->n_segments)
            return vh_error_set(err, VH_ERR_INTERNAL, "packed pass: frames ask for different outputs");
    }
    /* per segment: each frame's LoRA sets and where its planners run */
    if (b0->options & VH_BATCH_SEGMENT_ADAPTERS) {
        for (uint32_t i = 0; i < n; i++)
            memcpy(p->segment_adapters + p->first_segment[i], jobs[i]->batch.segment_adapters, jobs[i]->batch.n_segments);
        p->batch.segment_adapters = p->segment_adapters;
    }
    if (b0->options & VH_BATCH_PLAN_SEGMENTS) {
        for (uint32_t i = 0; i < n; i++)
            memcpy(p->plan_segments + p->first_segment[i], jobs[i]->batch.plan_segments, jobs[i]->batch.n_segments);
        p->batch.plan_segments = p->plan_segments;
    }
    if ((b0->options & VH_BATCH_HIDDEN_ROWS) &&
        (!reserve((void **)&p->hidden_rows, &p->hidden_cap, (size_t)n * k, sizeof *p->hidden_rows) ||
         !reserve((void **)&p->out_hidden, &p->out_hidden_cap, (size_t)n * k * Dl, sizeof(float))))
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (packed pass)");
    if ((b0->options & VH_BATCH_PLAN) &&
        (!reserve((void **)&p->plan_noise, &p->noise_cap, (size_t)S * b0->plan_noise_stride, sizeof(float)) ||
         !reserve((void **)&p->out_plan, &p->plan_cap, (size_t)S * b0->plan_out_stride, sizeof(float))))
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (packed pass)");
    uint32_t row0 = 0;
    for (uint32_t i = 0; i < n; i++) {
        const vh_batch *b = &jobs[i]->batch;
        if (b->options & VH_BATCH_HIDDEN_ROWS)
            for (uint32_t r = 0; r < k; r++) p->hidden_rows[i * k + r] = row0 + b->hidden_rows[r];
        if (b->options & VH_BATCH_PLAN)
            memcpy(p->plan_noise + (size_t)p->first_segment[i] * b->plan_noise_stride, b->plan_noise,
                   sizeof(float) * b->n_segments * b->plan_noise_stride);
        row0 += b->n_rows;
    }
    if (b0->options & VH_BATCH_HIDDEN_ROWS) {
        p->batch.n_hidden_rows = n * k;
        p->batch.hidden_rows = p->hidden_rows;
        p->batch.out_hidden = p->out_hidden;
    }
    if (b0->options & VH_BATCH_PLAN) {
        p->batch.plan_noise = p->plan_noise;
        p->batch.plan_noise_stride = b0->plan_noise_stride;
        p->batch.out_plan = p->out_plan;
        p->batch.plan_out_stride = b0->plan_out_stride;
    }
    return VH_OK;
}

vh_status vh_packed_pass_begin(vh_packed_pass *p, vh_frame_job *const *jobs, uint32_t n, vh_error *err)
{
    uint32_t prefills = 0;
    for (uint32_t i = 0; i < n; i++) prefills += jobs[i]->pass == VH_PASS_PREFILL;
    /* the prefills' patch embeddings are those of stage 0's last vision batch (image i, i-th prefill) */
    if (n == 0 || n > p->max_jobs || prefills > p->max_images || vh_packed_pass_rows(jobs, n) > p->max_rows)
        return vh_error_set(err, VH_ERR_INTERNAL, "packed pass of %u frames (%u prefills), %u rows (at most %u, %u, "
                            "%u)", n, prefills, vh_packed_pass_rows(jobs, n), p->max_jobs, p->max_images, p->max_rows);
    /* the frames' segments and rows, in order */
    uint32_t rows = 0, segments = 0;
    for (uint32_t i = 0; i < n; i++) {
        const vh_batch *b = &jobs[i]->batch;
        if (segments + b->n_segments > p->max_segments)
            return vh_error_set(err, VH_ERR_INTERNAL, "packed pass: more than %u segments", p->max_segments);
        p->jobs[i] = jobs[i];
        p->first_segment[i] = segments;
        memcpy(p->segments + segments, b->segments, sizeof(vh_segment) * b->n_segments);
        segments += b->n_segments;
        memcpy(p->tokens + rows, b->tokens, sizeof(int32_t) * b->n_rows);
        rows += b->n_rows;
    }
    p->first_segment[n] = segments;
    p->n = n;
    p->batch = (vh_batch){.struct_size = sizeof(vh_batch), .n_segments = segments, .segments = p->segments,
                          .n_rows = rows, .tokens = p->tokens,
                          .out_tokens = jobs[0]->batch.out_tokens ? p->out_tokens : NULL};
    vh_status st = gather_outputs(p, jobs, n, err);
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
    return vh_stage_run_rows(&r, stage, &p->batch, p->hidden, begin, end, &p->stage_time[stage], err);
}

vh_status vh_packed_pass_stage_part(vh_packed_pass *p, uint32_t stage, uint32_t first, uint32_t count, vh_error *err)
{
    const vh_job_context *ctx = p->ctx;
    if (count == 0 || first + count > p->n || stage + 1 >= ctx->plan->n_stages)
        return vh_error_set(err, VH_ERR_INTERNAL, "packed pass: segments %u..%u of %u on stage %u of %u", first,
                            first + count, p->n, stage, ctx->plan->n_stages);
    uint32_t row0 = 0, rows = 0, prefills = 0;
    const uint32_t seg_begin = p->first_segment[first], seg_end = p->first_segment[first + count];
    for (uint32_t s = 0; s < seg_begin; s++) row0 += p->segments[s].n_rows;
    for (uint32_t s = seg_begin; s < seg_end; s++) rows += p->segments[s].n_rows;
    for (uint32_t i = first; i < first + count; i++) prefills += p->jobs[i]->pass == VH_PASS_PREFILL;
    char name[64];
    snprintf(name, sizeof name, "pass %llu part: %u prefill + %u steps", (unsigned long long)p->count, prefills,
             count - prefills);
    /* the part's own segments and rows; the head's outputs are the last stage's, never a part's */
    vh_batch part = {.struct_size = sizeof(vh_batch),
                     .options = p->batch.options & (VH_BATCH_SEGMENT_EMBEDS | VH_BATCH_SEGMENT_ADAPTERS),
                     .n_segments = seg_end - seg_begin, .segments = p->segments + seg_begin, .n_rows = rows,
                     .tokens = p->tokens + row0,
                     .segment_adapters = p->batch.segment_adapters ? p->batch.segment_adapters + seg_begin : NULL};
    const vh_rows_job r = rows_job(p, name, first);
    uint32_t begin, end;
    stage_blocks(p, stage, &begin, &end);
    return vh_stage_run_rows(&r, stage, &part, p->hidden + (size_t)row0 * ctx->model->desc.llm.hidden, begin, end,
                             &p->stage_time[stage], err);
}

void vh_packed_pass_end(vh_packed_pass *p)
{
    const uint32_t Dl = p->ctx->model->desc.llm.hidden;
    for (uint32_t i = 0; i < p->n; i++) {
        vh_batch *b = &p->jobs[i]->batch;
        if (p->batch.out_tokens) p->jobs[i]->next_token = p->out_tokens[p->first_segment[i + 1] - 1];
        if (p->batch.options & VH_BATCH_HIDDEN_ROWS)
            memcpy(b->out_hidden, p->out_hidden + (size_t)i * b->n_hidden_rows * Dl,
                   sizeof(float) * b->n_hidden_rows * Dl);
        if (p->batch.options & VH_BATCH_PLAN)
            memcpy(b->out_plan, p->out_plan + (size_t)p->first_segment[i] * b->plan_out_stride,
                   sizeof(float) * b->n_segments * b->plan_out_stride);
    }
    p->count++;
}
