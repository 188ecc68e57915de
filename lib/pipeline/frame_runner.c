#include "pipeline/frame_runner.h"

#include <string.h>

void vh_job_context_init(vh_job_context *ctx, const vh_model *model, const vh_plan *plan, const vh_program *program,
                         uint32_t max_context)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->model = model;
    ctx->plan = plan;
    ctx->family = model->family;
    ctx->program = program;
    ctx->max_context = max_context;
    ctx->segments_per_frame = 1;
}

vh_status vh_frame_runner_init(vh_frame_runner *r, const vh_model *model, const vh_plan *plan,
                               const vh_program *program, uint32_t max_context, vh_error *err)
{
    return vh_frame_runner_init_segments(r, model, plan, program, max_context, 1, err);
}

vh_status vh_frame_runner_init_segments(vh_frame_runner *r, const vh_model *model, const vh_plan *plan,
                                        const vh_program *program, uint32_t max_context, uint32_t segments,
                                        vh_error *err)
{
    memset(r, 0, sizeof *r);
    vh_job_context_init(&r->ctx, model, plan, program, max_context);
    r->ctx.segments_per_frame = segments ? segments : 1;
    return vh_frame_job_init(&r->job, &r->ctx, 0, err);
}

void vh_frame_runner_free(vh_frame_runner *r)
{
    if (r->job.ctx) vh_frame_job_free(&r->job);
    memset(r, 0, sizeof *r);
}

vh_status vh_frame_runner_run(vh_frame_runner *r, const uint8_t *rgb, uint32_t width, uint32_t height,
                              size_t stride, const char *instruction, vh_frame_result *out, vh_error *err)
{
    memset(out, 0, sizeof *out);
    const vh_frame_input in = {.rgb = rgb, .width = width, .height = height,
                               .stride = stride ? stride : (size_t)width * 3, .instruction = instruction};
    vh_status st = vh_frame_job_prepare(&r->job, 0, &in, err);
    if (st) return st;
    do {
        for (uint32_t i = 0; i < r->ctx.plan->n_stages; i++)
            if ((st = vh_frame_job_run_stage(&r->job, i, err))) return st;
    } while (vh_frame_job_advance(&r->job));
    vh_frame_job_result(&r->job, out);
    return VH_OK;
}
