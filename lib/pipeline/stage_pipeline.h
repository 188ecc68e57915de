/*
 * The session's frame driver: takes frames from the frame queue and runs them through the plan's
 * stages: serially, as a cross-frame pipeline, or in packed passes.
 *
 * Serial: one thread prepares a frame and runs each of its passes through every stage in turn.
 * Pipeline: an intake thread prepares frames (resize, normalise, tokenise) and chooses each one's
 * split; one thread per stage runs whatever pass is waiting at its stage and hands the job to the
 * next stage (or, after the last, back to the first for the next token). Up to frames_in_flight
 * jobs circulate, each on its own KV sequence, so while the CPU stage runs frame t's step the GPU
 * stage runs frame t+1's. Stage queues hold at most frames_in_flight jobs (bounded by
 * construction); at stage 0 a waiting token step goes before a new frame's prefill.
 *
 * Packed (pipeline/packed_pass.h, packed_rounds.c): passes that each carry the prefills of a few
 * new frames and one decode row of every other frame in flight (frames_in_flight jobs, each its
 * own KV slot); a frame leaves with its last token. With two stages stage 0 runs the next pass's
 * new frames while the last stage runs the current pass.
 *
 * Results go to the frame queue's records (in submission order for pollers, whatever order the
 * frames finish in). The pipeline's per-pass calls are those of the serial mode, so results are
 * identical; a packed pass computes the same rows in a larger batch.
 */
#ifndef VH_PIPELINE_STAGE_PIPELINE_H
#define VH_PIPELINE_STAGE_PIPELINE_H

#include "pipeline/frame_job.h"
#include "queue/frame_queue.h"

#define VH_MAX_FRAMES_IN_FLIGHT 32

typedef struct vh_stage_pipeline vh_stage_pipeline;

typedef struct vh_pipeline_config {
    const vh_job_context *ctx;
    vh_frame_queue *frames;
    vh_execution_mode mode;
    uint32_t frames_in_flight;         /* pipeline, packed: jobs circulating (the executors' KV sequences) */
    uint32_t action_tokens;
    /* a frame failed: err names it (the session records it as its last error) */
    void (*on_frame_error)(void *user, const vh_error *err);
    void *user;
} vh_pipeline_config;

vh_status vh_stage_pipeline_start(const vh_pipeline_config *cfg, vh_stage_pipeline **pipeline, vh_error *err);

/* Close the frame queue first: frames in flight finish, then the threads stop. */
void vh_stage_pipeline_stop(vh_stage_pipeline *p);

/* Fill the execution fields of *info (mode, stages, split, counters). */
void vh_stage_pipeline_stats(vh_stage_pipeline *p, vh_session_info *info);

/* Fill n_stages and stage_pass[] of *out: each stage's pass times. VH_ERR_OUT_OF_MEMORY or VH_OK. */
vh_status vh_stage_pipeline_pass_stats(vh_stage_pipeline *p, vh_session_stats *out);

/* Start the counters of vh_stage_pipeline_stats and the pass times afresh (after the warm-up, or
 * on a reset with VH_RESET_STATISTICS). */
void vh_stage_pipeline_clear_stats(vh_stage_pipeline *p);

#endif
