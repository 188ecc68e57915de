/*
 * One frame's way through the model, cut into passes the stages run in turn.
 *
 * A frame is prepared once by its model family (lib/family/family.h: for OpenVLA the image resized
 * and normalised for each tower, the prompt tokenised), then makes passes through the plan's
 * stages: the prefill pass (stage 0 first runs the vision blocks), then one pass per further
 * token, for as long as the family's advance asks for one. The family sees the job's frame only
 * (job->frame, lib/family/family_frame.h) and says in a request what each pass is; stage 0 turns
 * the request into the pass's batch (pass_batch.h). Each pass visits stage 0, 1, ... in order;
 * between stages the LLM rows cross as fp32 hidden states through the job's host buffer (copied
 * in and out, or worked on in place by an executor that offers bind_hidden). The last stage hands
 * the pass's outputs to the request; then vh_frame_job_advance() lets the family set up the next.
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
#include "pipeline/pass_batch.h"
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
                                          vh_job_context_init) .. VH_PASS_MAX_SEGMENTS (MindDrive's
                                          decision and action rounds) */
    vh_vision_tokens_fn vision_tokens_fn; /* the session's, NULL: none (vh_session_params) */
    void *vision_tokens_user;
} vh_job_context;

/* The most LLM rows one frame's pass carries (its segments together). */
static inline uint32_t vh_job_context_frame_rows(const vh_job_context *ctx)
{
    return ctx->max_context * ctx->segments_per_frame;
}

typedef struct vh_frame_job {
    const vh_job_context *ctx;
    uint32_t sequence;                 /* its first KV slot on every executor: segment k of its
                                          passes is on slot sequence + k */
    uint64_t frame_id;                 /* for traces and messages */
    void *owner;                       /* the driver's record for this frame */
    vh_family_frame frame;             /* what the family sees: its buffers, its state, the pass request */

    /* the frame's cut: stage i runs blocks [stage_end[i-1], stage_end[i]) of the LLM side
     * (stage 0 from the LLM embedding, after the vision blocks). Fixed for the frame's life: its
     * KV cache lives where its blocks ran. */
    uint32_t stage_end[VH_MAX_STAGES];
    uint32_t llm_split;                /* LLM blocks on stage 0 (what stage_end[0] means) */

    float *hidden;                     /* [frame rows, Dl] rows crossing between stages */
    float *step_logits;                /* NULL, or [VH_MAX_ACTION_DIM, vocab]: each pass's logits (tests) */
    vh_pass_batch batch;               /* the current pass's request as a batch (made on stage 0) */

    /* progress */
    uint32_t n_passes;                 /* passes finished */
    int vision_done;                   /* the patch embeddings of this frame are on stage 0 */
    int32_t packed_image;              /* its image in stage 0's last vision batch of the packed pass */

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

/* Start a frame: the family prepares its inputs and the prefill pass's request, on the plan's
 * default cut. VH_ERR_BAD_FRAME when the inputs cannot make a frame. */
vh_status vh_frame_job_prepare(vh_frame_job *job, uint64_t frame_id, const vh_frame_input *in, vh_error *err);

/* The kind and the rows of the job's current pass (its family's request). */
static inline vh_pass_kind vh_frame_job_pass(const vh_frame_job *job) { return job->frame.pass.kind; }
static inline uint32_t vh_frame_job_rows(const vh_frame_job *job) { return vh_pass_request_rows(&job->frame.pass); }

/* Move the frame's cut: llm_split LLM blocks on stage 0 (two stages; before the first pass). The
 * plan's executors must hold the blocks (vh_plan_split_range). */
void vh_frame_job_set_split(vh_frame_job *job, uint32_t llm_split);

/* The vision blocks for the job's image, on stage 0 (the prefill pass runs them first unless they
 * ran already; the packed pass runs them before packing). */
vh_status vh_frame_job_run_vision(vh_frame_job *job, vh_error *err);

/* Run the current pass's part on stage `stage` (stage 0: first its batch; the last: then its
 * outputs to the request). */
vh_status vh_frame_job_run_stage(vh_frame_job *job, uint32_t stage, vh_error *err);

/* After the last stage: the family's advance; 1 when another pass is needed (its request set
 * up), 0 when done. */
int vh_frame_job_advance(vh_frame_job *job);

/* The action of a finished job, with its phase times. */
void vh_frame_job_result(const vh_frame_job *job, vh_frame_result *out);

#endif
