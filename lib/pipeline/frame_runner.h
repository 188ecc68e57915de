/*
 * One frame through the model, synchronously, in the calling thread: a frame job (frame_job.h)
 * prepared and driven through all its passes on every stage. The session uses the stage pipeline
 * (stage_pipeline.h) instead; this is the direct path for tests and tools that inspect a frame's
 * buffers (preprocessed pixels, every pass's logits).
 *
 * Not thread-safe: one runner serves one thread.
 */
#ifndef VH_PIPELINE_FRAME_RUNNER_H
#define VH_PIPELINE_FRAME_RUNNER_H

#include "pipeline/frame_job.h"

typedef struct vh_frame_runner {
    vh_job_context ctx;
    vh_frame_job job;                  /* job.frame.pixels, job.step_logits: the last frame's */
} vh_frame_runner;

/* A runner for `program` (the model's family's, made for these frames), its frames of one segment. */
vh_status vh_frame_runner_init(vh_frame_runner *r, const vh_model *model, const vh_plan *plan,
                               const vh_program *program, uint32_t max_context, vh_error *err);
/* The same for a program whose frames run `segments` prompts side by side (vh_program_shape); the
 * plan's executors need that many KV slots. */
vh_status vh_frame_runner_init_segments(vh_frame_runner *r, const vh_model *model, const vh_plan *plan,
                                        const vh_program *program, uint32_t max_context, uint32_t segments,
                                        vh_error *err);
void vh_frame_runner_free(vh_frame_runner *r);

/* rgb: [height rows of `stride` bytes, 0: width * 3] RGB8. VH_ERR_BAD_FRAME when the frame cannot
 * be made (e.g. the prompt does not fit). */
vh_status vh_frame_runner_run(vh_frame_runner *r, const uint8_t *rgb, uint32_t width, uint32_t height,
                              size_t stride, const char *instruction, vh_frame_result *out, vh_error *err);

/* The context fields every driver fills the same way. */
void vh_job_context_init(vh_job_context *ctx, const vh_model *model, const vh_plan *plan, const vh_program *program,
                         uint32_t max_context);

#endif
