/*
 * The packed pass (cross-request packing, as ActionFlow): the LLM rows of several frames in one
 * batch, so the weights are read once for all of them. A pass carries at most one new frame's
 * prefill and one decode row of every other frame in flight; each frame is a segment on its own
 * KV slot (the executors' per-sequence caches: nothing is copied between passes), and the head
 * gives one token per segment (only each segment's last row goes through the final norm and the
 * LM head). Frames of any prompt length mix.
 *
 * The pass runs every stage in turn in the calling thread.
 */
#ifndef VH_PIPELINE_PACKED_PASS_H
#define VH_PIPELINE_PACKED_PASS_H

#include "pipeline/frame_job.h"
#include "pipeline/stage_rows.h"

typedef struct vh_packed_pass {
    const vh_job_context *ctx;
    uint32_t max_jobs;
    vh_segment *segments;              /* [max_jobs] */
    int32_t *tokens;                   /* [max_context] the packed rows' tokens */
    int32_t *out_tokens;               /* [max_jobs] */
    float *hidden;                     /* [max_context, Dl] the packed rows between stages */
    uint64_t count;                    /* passes run */
    vh_rows_timing stage_time[VH_MAX_STAGES]; /* all passes */
} vh_packed_pass;

vh_status vh_packed_pass_init(vh_packed_pass *p, const vh_job_context *ctx, uint32_t max_jobs, vh_error *err);
void vh_packed_pass_free(vh_packed_pass *p);

/* The rows jobs[0..n) would add to a pass. */
uint32_t vh_packed_pass_rows(vh_frame_job *const *jobs, uint32_t n);

/* One pass over jobs[0..n), each at its current pass (a prefill whose vision has run, or a decode
 * step): every job's next_token is set; then call vh_frame_job_advance on each. The rows must fit
 * the context (vh_packed_pass_rows <= max_context). */
vh_status vh_packed_pass_run(vh_packed_pass *p, vh_frame_job *const *jobs, uint32_t n, vh_error *err);

#endif
