/*
 * One frame's way through the model, cut into passes the stages run in turn.
 *
 * A frame is prepared once by its model family (lib/family/family.h: for OpenVLA the image resized
 * and normalised for each tower, the prompt tokenised), then makes passes through the plan's
 * stages: the prefill pass (stage 0 first runs the vision blocks), then one pass per further
 * token, for as long as the family's advance asks for one. Each pass visits stage 0, 1, ... in order;
 * between stages the LLM rows cross as fp32 hidden states through the job's host buffer (copied
 * in and out, or worked on in place by an executor that offers bind_hidden). After
 * the last stage of a pass, vh_frame_job_advance() takes the token and sets up the next pass.
 *
 * The serial runner drives a job's passes in one thread; the stage pipeline hands a job from stage
 * thread to stage thread, several jobs in flight, each on its own KV sequence. Both run exactly the
 * same calls on the same executors, so their results are identical.
 *
 * A job belongs to one thread at a time; jobs of one context may run concurrently on different
 * stages (an executor is only ever called by its stage's thread).
 */
#ifndef VH_PIPELINE_FRAME_JOB_H
#define VH_PIPELINE_FRAME_JOB_H

#include "family/family.h"
#include "plan/plan.h"
#include "util/trace.h"

/* What every job of a session shares; read-only while jobs run. */
typedef struct vh_job_context {
    const vh_model *model;
    const vh_plan *plan;
    const vh_family *family;           /* model->family */
    const vh_program *program;         /* the family's session state */
    uint32_t max_context;              /* KV positions: prompt rows + generated tokens must fit */
    vh_trace *trace;                   /* NULL: no timeline */
    int copy_hidden;                   /* 1: always copy rows between stages, never bind_hidden
                                          (tests of the copy path) */
    uint32_t segments_per_frame;       /* independent prompts a frame runs side by side, each a segment
                                          on its own KV slot of max_context positions: 1 (set by
                                          vh_job_context_init), or 2 (MindDrive's decision and action
                                          rounds) */
} vh_job_context;

#define VH_MAX_FRAME_SEGMENTS 2

/* The most LLM rows one frame's pass carries (its segments together). */
static inline uint32_t vh_job_context_frame_rows(const vh_job_context *ctx)
{
    return ctx->max_context * ctx->segments_per_frame;
}

typedef enum vh_pass_kind {
    VH_PASS_PREFILL = 0,               /* vision (stage 0) + the prompt rows */
    VH_PASS_DECODE = 1                 /* one generated token */
} vh_pass_kind;

typedef struct vh_frame_job {
    const vh_job_context *ctx;
    uint32_t sequence;                 /* its first KV slot on every executor: segment k of its
                                          passes is on slot sequence + k */
    uint64_t frame_id;                 /* for traces and messages */
    void *owner;                       /* the driver's record for this frame */
    void *family_job;                  /* the family's per-job state (job_init / job_free) */

    /* the frame's cut: stage i runs blocks [stage_end[i-1], stage_end[i]) of the LLM side
     * (stage 0 from the LLM embedding, after the vision blocks). Fixed for the frame's life: its
     * KV cache lives where its blocks ran. */
    uint32_t stage_end[VH_MAX_STAGES];
    uint32_t llm_split;                /* LLM blocks on stage 0 (what stage_end[0] means) */

    /* inputs, filled by the family's prepare */
    float *pixels[VH_MAX_TOWERS];      /* [3, S, S] per tower: the vision blocks' input */
    int32_t *tokens;                   /* [max_context] the prefill rows (VH_TOKEN_IMAGE: a patch) */
    uint32_t n_rows;                   /* prefill rows */
    float *hidden;                     /* [max_context, Dl] rows crossing between stages */
    float *step_logits;                /* NULL, or [VH_MAX_ACTION_DIM, vocab]: each pass's logits (tests) */

    /* progress */
    vh_pass_kind pass;
    uint32_t n_passes;                 /* passes finished */
    int vision_done;                   /* the patch embeddings of this frame are on stage 0 */
    int32_t next_token;                /* the head's output of the current pass */
    int32_t step_token;                /* the decode pass's input row */
    uint32_t n_segments;               /* the current pass's segments (1 unless the family asks more) */
    vh_segment segments[VH_MAX_FRAME_SEGMENTS];
    vh_batch batch;

    /* timing: wall clock of the phases, and each stage's busy time per pass kind */
    int64_t start_ns, vision_end_ns, prefill_end_ns, end_ns;
    int64_t stage_busy_ns[VH_MAX_STAGES][2];
    int64_t head_ns[2];                /* the LM head on the last stage, per pass kind (part of its busy time) */
    int64_t vision_ns;                 /* the vision blocks on stage 0 (part of its busy time) */
    int64_t handoff_ns[VH_MAX_STAGES]; /* each stage's read_hidden / write_hidden, all passes */
} vh_frame_job;

/* Buffers for one job on KV slot `sequence`, and the family's state for it; the hidden-state
 * buffer comes from the plan's host allocator (page-locked when a GPU stage offers it). */
vh_status vh_frame_job_init(vh_frame_job *job, const vh_job_context *ctx, uint32_t sequence, vh_error *err);
void vh_frame_job_free(vh_frame_job *job);

/* Start a frame: the family prepares its inputs and the prefill pass, on the plan's default cut.
 * VH_ERR_BAD_FRAME when the inputs cannot make a frame. */
vh_status vh_frame_job_prepare(vh_frame_job *job, uint64_t frame_id, const vh_frame_input *in, vh_error *err);

/* For the family's prepare: the prefill pass over job->tokens[0..n_rows), at position 0. */
void vh_frame_job_begin_prefill(vh_frame_job *job);
/* The same as n independent prompts side by side (n <= the context's segments_per_frame): segment
 * k is the next rows[k] of job->tokens, at position 0 of the job's KV slot sequence + k. */
void vh_frame_job_begin_prefill_segments(vh_frame_job *job, uint32_t n, const uint32_t *rows);
/* For the family's advance: a decode pass of one row, `token` at KV position `position` (RoPE
 * position + rope_delta). */
void vh_frame_job_begin_step(vh_frame_job *job, int32_t token, uint32_t position, int32_t rope_delta);

/* Move the frame's cut: llm_split LLM blocks on stage 0 (two stages; before the first pass). The
 * plan's executors must hold the blocks (vh_plan_split_range). */
void vh_frame_job_set_split(vh_frame_job *job, uint32_t llm_split);

/* The vision blocks for the job's image, on stage 0 (the prefill pass runs them first unless they
 * ran already; the packed pass runs them before packing). */
vh_status vh_frame_job_run_vision(vh_frame_job *job, vh_error *err);

/* Run the current pass's part on stage `stage`. */
vh_status vh_frame_job_run_stage(vh_frame_job *job, uint32_t stage, vh_error *err);

/* After the last stage: 1 when another pass is needed (set up), 0 when done. */
int vh_frame_job_advance(vh_frame_job *job);

/* The action of a finished job, with its phase times. */
void vh_frame_job_result(const vh_frame_job *job, vh_frame_result *out);

#endif
