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
    job->frame.program = ctx->program;
    const vh_model *m = ctx->model;
    for (uint32_t t = 0; t < m->desc.n_towers; t++) {
        size_t s = m->desc.towers[t].image_size;
        job->frame.pixels[t] = malloc(sizeof(float) * 3 * s * s);
        if (!job->frame.pixels[t]) goto oom;
    }
    const uint32_t rows = vh_job_context_frame_rows(ctx);
    job->frame.tokens = malloc(sizeof *job->frame.tokens * rows);
    job->hidden = vh_plan_host_alloc(ctx->plan, sizeof(float) * rows * m->desc.llm.hidden);
    if (!job->frame.tokens || !job->hidden) goto oom;
    vh_status st = vh_pass_batch_init(&job->batch, 1, ctx->segments_per_frame, rows, m->desc.llm.hidden, err);
    if (!st) st = ctx->family->job_init(ctx->program, &job->frame, err);
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
    if (job->frame.state) job->ctx->family->job_free(&job->frame);
    for (uint32_t t = 0; t < VH_MAX_TOWERS; t++) free(job->frame.pixels[t]);
    free(job->frame.tokens);
    if (job->hidden) vh_plan_host_free(job->ctx->plan, job->hidden);
    vh_pass_batch_free(&job->batch);
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
    job->packed_image = 0;
    vh_status st = job->ctx->family->prepare(&job->frame, in, err);
    if (st) return st;
    vh_frame_job_set_split(job, job->ctx->plan->llm_split);
    return VH_OK;
}

/* The span name of the current pass: "prefill f12", "step 3 f12". */
static void pass_name(const vh_frame_job *job, char *name, size_t size)
{
    const unsigned long long id = (unsigned long long)job->frame_id;
    if (vh_frame_job_pass(job) == VH_PASS_PREFILL) snprintf(name, size, "prefill f%llu", id);
    else snprintf(name, size, "step %u f%llu", job->n_passes, id);
}

/* The family's runs of the vision side on the first stage (vh_vision_runner). */
static vh_status stage0_run(void *user, const vh_batch *batch, uint32_t first, uint32_t n, vh_error *err)
{
    const vh_job_context *ctx = user;
    if (first + n > ctx->model->llm_embed_block)
        return vh_error_set(err, VH_ERR_INTERNAL, "a vision run of blocks %u..%u past the vision side (%u blocks)", first,
                            first + n - 1, ctx->model->llm_embed_block);
    const int64_t t0 = vh_now_ns();
    const vh_status st = vh_stage_run_range(&ctx->plan->stages[0], batch, first, first + n, err);
    if (ctx->trace) { /* the front end's steps on the timeline: which run or read holds a frame up */
        char name[48];
        snprintf(name, sizeof name, "vision run %u..%u", first, first + n - 1);
        vh_trace_span(ctx->trace, 0, name, 0, t0, vh_now_ns());
    }
    return st;
}

static vh_status stage0_read(void *user, uint32_t slot, uint32_t index, float *dst, size_t n, vh_error *err)
{
    const vh_job_context *ctx = user;
    const vh_stage *s = &ctx->plan->stages[0];
    const vh_backend_iface *be = s->plugin->iface;
    if (!be->read_slot)
        return vh_error_set(err, VH_ERR_UNSUPPORTED, "backend '%s' cannot hand a front end's outputs back (no "
                            "read_slot): run this model's vision side on a CPU backend", be->name);
    char why[512] = "";
    const int64_t t0 = vh_now_ns();
    vh_status st = be->read_slot(s->executor, slot, index, dst, n, why, sizeof why);
    if (ctx->trace) {
        char name[48];
        snprintf(name, sizeof name, "vision read slot %u", slot);
        vh_trace_span(ctx->trace, 0, name, 0, t0, vh_now_ns());
    }
    return st ? vh_error_set(err, st, "backend '%s': %s", be->name, why) : VH_OK;
}

vh_status vh_frame_job_run_vision(vh_frame_job *job, vh_error *err)
{
    const vh_model *m = job->ctx->model;
    const float *planes[VH_MAX_TOWERS];
    for (uint32_t t = 0; t < m->desc.n_towers; t++) planes[t] = job->frame.pixels[t];
    vh_batch vision = {.struct_size = sizeof(vh_batch), .n_images = 1, .pixels = planes};
    int64_t t0 = vh_now_ns();
    vh_status st;
    if (job->ctx->family->run_vision) {
        const vh_vision_runner runner = {.user = (void *)job->ctx, .run = stage0_run, .read_slot = stage0_read};
        st = job->ctx->family->run_vision(&job->frame, &runner, err);
        uint32_t rows = 0, width = 0;
        const float *tokens = !st && job->ctx->vision_tokens_fn && job->ctx->family->vision_tokens
                                  ? job->ctx->family->vision_tokens(&job->frame, &rows, &width)
                                  : NULL;
        if (tokens) job->ctx->vision_tokens_fn(job->ctx->vision_tokens_user, job->frame_id, tokens, rows, width);
    } else {
        st = vh_stage_run_range(&job->ctx->plan->stages[0], &vision, 0, m->llm_embed_block, err);
    }
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
    const vh_pass_kind kind = vh_frame_job_pass(job);
    vh_status st;
    if (stage == 0 && kind == VH_PASS_PREFILL && !job->vision_done && (st = vh_frame_job_run_vision(job, err)))
        return st;
    if (stage == 0) { /* the pass's batch: the frame's request alone, its image the only one */
        vh_pass_batch_clear(&job->batch);
        if ((st = vh_pass_batch_add(&job->batch, &job->frame.pass, job->sequence, 0, err)) ||
            (st = vh_pass_batch_close(&job->batch, err)))
            return st;
        job->batch.batch.out_logits =
            job->step_logits ? job->step_logits + (size_t)job->n_passes * ctx->model->desc.llm.vocab : NULL;
    }
    char name[48];
    pass_name(job, name, sizeof name);
    const vh_rows_job rows = {.plan = ctx->plan, .model = ctx->model, .copy_hidden = ctx->copy_hidden,
                              .trace = ctx->trace, .name = name, .frame_id = job->frame_id};
    const uint32_t first = stage == 0 ? ctx->model->llm_embed_block : job->stage_end[stage - 1];
    vh_rows_timing t = {0};
    st = vh_stage_run_rows(&rows, stage, &job->batch.batch, job->hidden, first, job->stage_end[stage], &t, err);
    job->stage_busy_ns[stage][kind] += t.busy_ns + (kind == VH_PASS_PREFILL && stage == 0 ? job->vision_ns : 0);
    job->head_ns[kind] += t.head_ns;
    job->handoff_ns[stage] += t.handoff_ns;
    if (!st && stage + 1 == ctx->plan->n_stages) vh_pass_batch_return(&job->batch);
    return st;
}

int vh_frame_job_advance(vh_frame_job *job)
{
    const int64_t now = vh_now_ns();
    if (vh_frame_job_pass(job) == VH_PASS_PREFILL) job->prefill_end_ns = now;
    job->n_passes++;
    if (job->ctx->family->advance(&job->frame)) return 1;
    job->end_ns = now;
    return 0;
}

void vh_frame_job_result(const vh_frame_job *job, vh_frame_result *out)
{
    memset(out, 0, sizeof *out);
    job->ctx->family->result(&job->frame, out);
    out->vision_ns = job->vision_end_ns - job->start_ns;
    out->prefill_ns = job->prefill_end_ns - job->vision_end_ns;
    out->decode_ns = job->end_ns - job->prefill_end_ns;
}
