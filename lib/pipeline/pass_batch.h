/*
 * Pass requests (lib/family/pass_request.h) as the backends' batch: one frame's request, or
 * several frames' side by side (the packed pass). Each request's segments go on its frame's KV
 * slots, in order; its rows, hidden rows (counted from where its rows start) and planner noise
 * are gathered into the batch's arrays; after the run its outputs go back where it asked. The
 * batch options follow from what the requests ask: given vision rows, LoRA sets other than the
 * first, hidden rows, plans, plans on some segments only.
 */
#ifndef VH_PIPELINE_PASS_BATCH_H
#define VH_PIPELINE_PASS_BATCH_H

#include "family/pass_request.h"
#include "util/error.h"
#include "vlahybrid/backend.h"

/* The VH_BATCH_* options passes that ask `pass_uses` (VH_PASS_USES_*) may need. */
uint32_t vh_pass_batch_options(uint32_t pass_uses);

typedef struct vh_pass_batch {
    uint32_t max_requests, max_segments, max_rows;
    uint32_t hidden_dim;               /* the LLM's width */
    uint32_t n;                        /* requests added */
    const vh_pass_request **requests;  /* [max_requests] */
    uint32_t *first_segment;           /* [max_requests + 1] request i's segments: [first_segment[i], [i + 1]) */
    uint32_t *first_row;               /* [max_requests + 1] likewise its rows */
    vh_segment *segments;              /* [max_segments] */
    uint8_t *adapters, *segment_plans; /* [max_segments] */
    int32_t *tokens;                   /* [max_rows] */
    int32_t *out_tokens;               /* [max_segments] */
    /* the requests' hidden rows, noise and plans; grown on first use */
    uint32_t *hidden_rows;
    float *out_hidden, *plan_noise, *out_plan;
    size_t hidden_cap, out_hidden_cap, noise_cap, plan_cap;
    vh_batch batch;                    /* the requests' batch, once closed */
} vh_pass_batch;

/* Room for max_requests requests of max_segments segments and max_rows rows in all, of an LLM of
 * width `hidden_dim`. */
vh_status vh_pass_batch_init(vh_pass_batch *b, uint32_t max_requests, uint32_t max_segments, uint32_t max_rows,
                             uint32_t hidden_dim, vh_error *err);
void vh_pass_batch_free(vh_pass_batch *b);

/* Start an empty batch. */
void vh_pass_batch_clear(vh_pass_batch *b);
/* Append a request (alive until vh_pass_batch_return): its segment on slot k goes on KV sequence
 * first_sequence + k; its prefill segments without given vision rows read image `image` of the
 * stage's last vision batch. */
vh_status vh_pass_batch_add(vh_pass_batch *b, const vh_pass_request *req, uint32_t first_sequence, int32_t image,
                            vh_error *err);
/* The batch of the requests added (b->batch); VH_ERR_INTERNAL when they ask for outputs that
 * cannot share a batch (some with plans or hidden rows, others without, or other strides). */
vh_status vh_pass_batch_close(vh_pass_batch *b, vh_error *err);
/* After the run: every request's outputs where it asked. */
void vh_pass_batch_return(const vh_pass_batch *b);

/* The input side of requests [first, first + count) alone (their rows, at their place in the
 * batch's rows), for a stage before the last: the head's outputs are never a part's. */
vh_batch vh_pass_batch_part(const vh_pass_batch *b, uint32_t first, uint32_t count);

#endif
