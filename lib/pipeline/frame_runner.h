/*
 * One frame through the model, serially: preprocess the image for each vision tower, run the
 * vision blocks and the projector, prefill the LLM on [BOS | patch embeddings | prompt], then
 * decode the action tokens one at a time, and de-tokenise them. Works over any plan: the LLM rows
 * cross from stage to stage as fp32 hidden states.
 *
 * Not thread-safe: one runner serves one worker thread.
 */
#ifndef VH_PIPELINE_FRAME_RUNNER_H
#define VH_PIPELINE_FRAME_RUNNER_H

#include "action/action_decoder.h"
#include "plan/plan.h"
#include "text/bpe_tokenizer.h"

typedef struct vh_frame_runner {
    const vh_model *model;
    const vh_plan *plan;
    const vh_tokenizer *tokenizer;
    const vh_action_decoder *decoder;
    int32_t bos_id, eos_id;
    uint32_t max_context;              /* KV positions: prompt rows + action tokens must fit */
    vh_decode_positions decode_positions;
    float *step_logits;                /* NULL, or [VH_MAX_ACTION_DIM, vocab]: each step's logits (tests) */

    uint8_t *resized[VH_MAX_TOWERS];   /* [S, S, 3] per tower */
    float *pixels[VH_MAX_TOWERS];      /* [3, S, S] per tower */
    int32_t *tokens;                   /* [max_context] the LLM rows of the prefill */
    float *hidden;                     /* [max_context, Dl] rows crossing between stages */
} vh_frame_runner;

/* What one frame produced. */
typedef struct vh_frame_result {
    uint32_t action_dim;
    int32_t token_ids[VH_MAX_ACTION_DIM];
    double values[VH_MAX_ACTION_DIM];
    int64_t vision_ns, prefill_ns, decode_ns;
} vh_frame_result;

vh_status vh_frame_runner_init(vh_frame_runner *r, const vh_model *model, const vh_plan *plan,
                               const vh_tokenizer *tokenizer, const vh_action_decoder *decoder,
                               uint32_t max_context, vh_error *err);
void vh_frame_runner_free(vh_frame_runner *r);

/* rgb: [height rows of `stride` bytes] RGB8. VH_ERR_BAD_FRAME when the prompt does not fit. */
vh_status vh_frame_runner_run(vh_frame_runner *r, const uint8_t *rgb, uint32_t width, uint32_t height,
                              size_t stride, const char *instruction, vh_frame_result *out, vh_error *err);

#endif
