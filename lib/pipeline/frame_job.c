#include "pipeline/frame_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/stage_rows.h"
#include "util/clock.h"

vh_status vh_frame_job_init(vh_frame_job *job, const vh_job_context *ctx, uint32_t sequence, vh_error *err)
{
    memset(job, 0, sizeof *job);
    job->ctx = ctx;
    job->sequence = sequence;
    const vh_model *m = ctx->model;
    for (uint32_t t = 0; t < m->desc.n_towers; t++) {
        size_t s = m->desc.towers[t].image_size;
        job->pixels[t] = malloc(sizeof(float) * 3 * s * s);
        if (!job->pixels[t]) goto oom;
    }
    const size_t rows = vh_job_context_frame_rows(ctx);
    job->tokens = malloc(sizeof *job->tokens * rows);
    job->hidden = vh_plan_host_alloc(ctx->plan, sizeof(float) * rows * m->desc.llm.hidden);
    if (!job->tokens || !job->hidden) goto oom;
    vh_status st = ctx->family->job_init(ctx->program, job, err);
    if (st) {
        vh_frame_job_free(job);
        return st;
    }
    return VH_OK;
oom:
    vh_frame_job_free(job);
    return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (frame buffers)");
}

void vh_frame_job_free(vh_frame_job *job)
{
    if (job->family_job) job->ctx->family->job_free(job);
    for (uint32_t t = 0; t < VH_MAX_TOWERS; t++) free(job->pixels[t]);
    free(job->tokens);
    if (job->hidden) vh_plan_host_free(job->ctx->plan, job->hidden);
    memset(job, 0, sizeof *job);
}

void vh_frame_job_set_split(vh_frame_job *job, uint32_t llm_split)
{
    const vh_plan *plan = job->ctx->plan;
    job->llm_split = llm_split;
    for (uint32_t i = 0; i < plan->n_stages; i++) job->stage_end[i] = plan->stages[i].first_block + plan->stages[i].n_blocks;
    if (plan->n_stages == 2) job->stage_end[0] = plan->llm_first_block + llm_split;
}

vh_status vh_frame_job_prepare(vh_frame_job *job, uint64_t frame_id, const vh_frame_input *in, vh_error *err)
{
    job->frame_id = frame_id;
    job->start_ns = vh_now_ns();
    job->vision_end_ns = job->prefill_end_ns = job->end_ns = 0;
    memset(job->stage_busy_ns, 0, sizeof job->stage_busy_ns);
    memset(job->head_ns, 0, sizeof job->head_ns);
    memset(job->handoff_ns, 0, sizeof job->handoff_ns);
    job->vision_ns = 0;
    job->n_passes = 0;
    job->vision_done = 0;
    vh_status st = job->ctx->family->prepare(job, in, err);
    if (st) return st;
    vh_frame_job_set_split(job, job->ctx->plan->llm_split);
    return VH_OK;
}

void vh_frame_job_begin_prefill(vh_frame_job *job)
{
    vh_frame_job_begin_prefill_segments(job, 1, &job->n_rows);
}

void vh_frame_job_begin_prefill_segments(vh_frame_job *job, uint32_t n, const uint32_t *rows)
{
    job->pass = VH_PASS_PREFILL;
    job->next_token = -1;
    job->n_segments = n;
    uint32_t total = 0;
    for (uint32_t k = 0; k < n; k++) {
        job->segments[k] = (vh_segment){.sequence = job->sequence + k, .n_rows = rows[k], .position = 0, .image = 0};
        total += rows[k];
    }
    job->n_rows = total;
    job->batch = (vh_batch){.struct_size = sizeof(vh_batch), .n_segments = n, .segments = job->segments, .n_rows = total,
                            .tokens = job->tokens, .out_tokens = &job->next_token, .out_logits = job->step_logits};
}

void vh_frame_job_begin_step(vh_frame_job *job, int32_t token, uint32_t position, int32_t rope_delta)
{
    job->pass = VH_PASS_DECODE;
    job->step_token = token;
    job->n_segments = 1;
    job->segments[0] = (vh_segment){.sequence = job->sequence, .n_rows = 1, .position = position, .image = -1,
                                    .rope_delta = rope_delta};
    job->batch = (vh_batch){.struct_size = sizeof(vh_batch), .n_segments = 1, .segments = job->segments, .n_rows = 1, .tokens = &job->step_token,
                            .out_tokens = &job->next_token,
                            .out_logits = job->step_logits ? job->step_logits + (size_t)job->n_passes *
                                                                 job->ctx->model->desc.llm.vocab : NULL};
}

/* The span name of the current pass: "prefill f12", "step 3 f12". */
static void pass_name(const vh_frame_job *job, char *name, size_t size)
{
    const unsigned long long id = (unsigned long long)job->frame_id;
    if (job->pass == VH_PASS_PREFILL) snprintf(name, size, "prefill f%llu", id);
    else snprintf(name, size, "step %u f%llu", job->n_passes, id);
}

vh_status vh_frame_job_run_vision(vh_frame_job *job, vh_error *err)
{
    const vh_model *m = job->ctx->model;
    const float *planes[VH_MAX_TOWERS];
    for (uint32_t t = 0; t < m->desc.n_towers; t++) planes[t] = job->pixels[t];
    vh_batch vision = {.struct_size = sizeof(vh_batch), .n_images = 1, .pixels = planes};
    int64_t t0 = vh_now_ns();
    vh_status st = vh_stage_run_range(&job->ctx->plan->stages[0], &vision, 0, m->llm_embed_block, err);
    if (st) return st;
    int64_t t1 = vh_now_ns();
    job->vision_ns = t1 - t0;
    job->vision_end_ns = t1;
    job->vision_done = 1;
    if (job->ctx->trace) {
        char name[48];
        snprintf(name, sizeof name, "vision f%llu", (unsigned long long)job->frame_id);
        vh_trace_span(job->ctx->trace, 0, name, job->frame_id, t0, t1);
    }
    return VH_OK;
}

vh_status vh_frame_job_run_stage(vh_frame_job *job, uint32_t stage, vh_error *err)
{
    const vh_job_context *ctx = job->ctx;
    vh_status st;
    if (stage == 0 && job->pass == VH_PASS_PREFILL && !job->vision_done && (st = vh_frame_job_run_vision(job, err)))
        return st;
    char name[48];
    pass_name(job, name, sizeof name);
    const vh_rows_job rows = {.plan = ctx->plan, .model = ctx->model, .copy_hidden = ctx->copy_hidden,
                              .trace = ctx->trace, .name = name, .frame_id = job->frame_id};
    const uint32_t first = stage == 0 ? ctx->model->llm_embed_block : job->stage_end[stage - 1];
    vh_rows_timing t = {0};
    st = vh_stage_run_rows(&rows, stage, &job->batch, job->hidden, first, job->stage_end[stage], &t, err);
    job->stage_busy_ns[stage][job->pass] += t.busy_ns + (job->pass == VH_PASS_PREFILL && stage == 0 ? job->vision_ns : 0);
    job->head_ns[job->pass] += t.head_ns;
    job->handoff_ns[stage] += t.handoff_ns;
    return st;
}

int vh_frame_job_advance(vh_frame_job *job)
{
    const int64_t now = vh_now_ns();
    if (job->pass == VH_PASS_PREFILL) job->prefill_end_ns = now;
    job->n_passes++;
    if (job->ctx->family->advance(job)) return 1;
    job->end_ns = now;
    return 0;
}

void vh_frame_job_result(const vh_frame_job *job, vh_frame_result *out)
{
    memset(out, 0, sizeof *out);
    job->ctx->family->result(job, out);
    out->vision_ns = job->vision_end_ns - job->start_ns;
    out->prefill_ns = job->prefill_end_ns - job->vision_end_ns;
    out->decode_ns = job->end_ns - job->prefill_end_ns;
}
