/*
 * What a family asks of one pass of a frame through the LLM rows, in the family's terms: the
 * segments (independent prompts side by side, each on one of the frame's KV slots), their rows,
 * and the outputs it wants. The family sets the request in prepare and advance (family.h); the
 * pipeline turns it into the backends' batch, alone or beside other frames' requests in one
 * packed pass (lib/pipeline/pass_batch.h), and writes the outputs where the request says.
 */
#ifndef VH_FAMILY_PASS_REQUEST_H
#define VH_FAMILY_PASS_REQUEST_H

#include <stdint.h>

#define VH_PASS_MAX_SEGMENTS 2

/* What a family's passes ask beyond rows of token ids and each segment's chosen id
 * (vh_program_shape.pass_uses): the session refuses a backend that cannot give it. */
#define VH_PASS_USES_HIDDEN_ROWS (1u << 0)  /* out_hidden: chosen rows, final-normed */
#define VH_PASS_USES_VISION_ROWS (1u << 1)  /* segments' vision_rows: vision rows given by the family */
#define VH_PASS_USES_PLANS (1u << 2)        /* plan_noise / out_plan: the planners */
#define VH_PASS_USES_ADAPTER_SETS (1u << 3) /* segments on LoRA sets other than the first */
#define VH_PASS_USES_PLAN_SEGMENTS (1u << 4) /* plans on some segments only (vh_pass_segment.plans) */

typedef enum vh_pass_kind {
    VH_PASS_PREFILL = 0,               /* prompt rows (the frame's image rows among them) */
    VH_PASS_DECODE = 1                 /* generated rows */
} vh_pass_kind;

typedef struct vh_pass_segment {
    uint32_t slot;                     /* the frame's KV slot: 0 .. segments_per_frame - 1 */
    uint32_t n_rows;                   /* its rows: the request's next n_rows tokens */
    uint32_t position;                 /* KV position of its first row */
    int32_t rope_delta;                /* RoPE position of row i: position + i + rope_delta */
    const float *vision_rows;          /* [image rows, hidden]: its VH_TOKEN_IMAGE rows, given; NULL: the
                                          frame's image's patch embeddings (a prefill) */
    uint32_t adapter_set;              /* the LoRA set its LLM blocks run with (0: the first) */
    int plans;                         /* 1: the planners run on it (when the request asks for plans) */
} vh_pass_segment;

typedef struct vh_pass_request {
    vh_pass_kind kind;
    uint32_t n_segments;               /* 1 .. VH_PASS_MAX_SEGMENTS */
    vh_pass_segment segments[VH_PASS_MAX_SEGMENTS];
    const int32_t *tokens;             /* [the segments' rows]: ids, or VH_TOKEN_IMAGE */
    /* outputs; each NULL (0) when not wanted */
    int32_t *out_tokens;               /* [n_segments]: the chosen id of each segment's last row */
    uint32_t n_hidden_rows;
    const uint32_t *hidden_rows;       /* [n_hidden_rows] rows of the request, counted over its segments
                                          (with plans: the same number per segment, in segment order) */
    float *out_hidden;                 /* [n_hidden_rows, hidden]: those rows, final-normed */
    const float *plan_noise;           /* [n_segments, plan_noise_stride]: the planners' noise */
    uint32_t plan_noise_stride;
    float *out_plan;                   /* [n_segments, plan_out_stride]: the planners' outputs */
    uint32_t plan_out_stride;
} vh_pass_request;

/* The rows of a request (its segments'). */
static inline uint32_t vh_pass_request_rows(const vh_pass_request *r)
{
    uint32_t rows = 0;
    for (uint32_t k = 0; k < r->n_segments; k++) rows += r->segments[k].n_rows;
    return rows;
}

#endif
