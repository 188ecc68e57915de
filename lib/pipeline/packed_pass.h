/*
 * The packed pass (cross-request packing, as ActionFlow): the LLM rows of several frames in one
 * batch, so the weights are read once for all of them. A pass carries the prefills of the new
 * frames (at most max_images; their vision ran as one batch just before, image i = the i-th
 * prefill) and one decode row of every other frame in flight; each frame is a segment on its own
 * KV slot (the executors' per-sequence caches: nothing is copied between passes), and the head
 * gives one token per segment (only each segment's last row goes through the final norm and the
 * LM head). Frames of any prompt length mix.
 *
 * The pass knows no family: it lays the frames' pass requests side by side (pass_batch.h).
 *
 * A pass runs in steps (begin / each stage / end), so two passes, each with its own buffers, can
 * overlap across two stages in different threads (packed_rounds.c); a stage before the last may
 * run the pass's segments in parts (the new frames' prefills early, the decode rows once their
 * tokens exist), each part's rows landing in their place in the pass's buffer.
 */
#ifndef VH_PIPELINE_PACKED_PASS_H
#define VH_PIPELINE_PACKED_PASS_H

#include "pipeline/frame_job.h"
#include "pipeline/stage_rows.h"

typedef struct vh_packed_pass {
    const vh_job_context *ctx;
    uint32_t max_jobs, max_images, max_rows;
    const float **planes;              /* [max_images * towers] a vision batch's pixels, image-major */
    float *hidden;                     /* [max_rows, Dl] the packed rows between stages */
    vh_frame_job **jobs;               /* [max_jobs] the current pass's frames */
    uint32_t n;
    vh_pass_batch batch;               /* the current pass: the frames' requests side by side */
    char name[48];                     /* its name in the trace */
    uint64_t count;                    /* passes run */
    vh_rows_timing stage_time[VH_MAX_STAGES]; /* all passes */
} vh_packed_pass;

/* max_images new frames a pass at most; max_rows: the executors' (max_context per image). */
vh_status vh_packed_pass_init(vh_packed_pass *p, const vh_job_context *ctx, uint32_t max_jobs, uint32_t max_images,
                              vh_error *err);
void vh_packed_pass_free(vh_packed_pass *p);

/* The rows jobs[0..n) would add to a pass. */
uint32_t vh_packed_pass_rows(vh_frame_job *const *jobs, uint32_t n);

/* The vision towers and projector of new frames jobs[0..n) as one batch on stage 0 (n <=
 * max_images); they then go first in the next pass, in this order. */
vh_status vh_packed_pass_run_vision(vh_packed_pass *p, vh_frame_job *const *jobs, uint32_t n, vh_error *err);

/* One pass over jobs[0..n), in steps (the stages may run in different threads): begin builds the
 * batch (first the new frames of the last vision batch, prefills in its order, then frames at a
 * decode step; the rows must fit: vh_packed_pass_rows <= max_rows), each stage in order runs it
 * (the rows cross through the pass's own buffer), end hands every frame its request's outputs;
 * then call vh_frame_job_advance on each. */
vh_status vh_packed_pass_begin(vh_packed_pass *p, vh_frame_job *const *jobs, uint32_t n, vh_error *err);
vh_status vh_packed_pass_stage(vh_packed_pass *p, uint32_t stage, vh_error *err);
/* Segments [first, first + count) of the pass (their rows only) on a stage before the last; the
 * parts of a stage, run in any order, compute what vh_packed_pass_stage computes there. */
vh_status vh_packed_pass_stage_part(vh_packed_pass *p, uint32_t stage, uint32_t first, uint32_t count, vh_error *err);
void vh_packed_pass_end(vh_packed_pass *p);

#endif
