#include "pipeline/pass_batch.h"

#include <stdlib.h>
#include <string.h>

vh_status vh_pass_batch_init(vh_pass_batch *b, uint32_t max_requests, uint32_t max_segments, uint32_t max_rows,
                             uint32_t hidden_dim, vh_error *err)
{
    memset(b, 0, sizeof *b);
    b->max_requests = max_requests;
    b->max_segments = max_segments;
    b->max_rows = max_rows;
    b->hidden_dim = hidden_dim;
    b->requests = calloc(max_requests, sizeof *b->requests);
    b->first_segment = calloc(max_requests + 1, sizeof *b->first_segment);
    b->first_row = calloc(max_requests + 1, sizeof *b->first_row);
    b->segments = calloc(max_segments, sizeof *b->segments);
    b->adapters = calloc(max_segments, 1);
    b->segment_plans = calloc(max_segments, 1);
    b->tokens = calloc(max_rows, sizeof *b->tokens);
    b->out_tokens = calloc(max_segments, sizeof *b->out_tokens);
    if (!b->requests || !b->first_segment || !b->first_row || !b->segments || !b->adapters || !b->segment_plans ||
        !b->tokens || !b->out_tokens) {
        vh_pass_batch_free(b);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (pass batch)");
    }
    return VH_OK;
}

void vh_pass_batch_free(vh_pass_batch *b)
{
    free(b->requests);
    free(b->first_segment);
    free(b->first_row);
    free(b->segments);
    free(b->adapters);
    free(b->segment_plans);
    free(b->tokens);
    free(b->out_tokens);
    free(b->hidden_rows);
    free(b->out_hidden);
    free(b->plan_noise);
    free(b->out_plan);
    memset(b, 0, sizeof *b);
}

void vh_pass_batch_clear(vh_pass_batch *b)
{
    b->n = 0;
}

vh_status vh_pass_batch_add(vh_pass_batch *b, const vh_pass_request *req, uint32_t first_sequence, int32_t image,
                            vh_error *err)
{
    const uint32_t s0 = b->first_segment[b->n], row0 = b->first_row[b->n]; /* [0]: 0 */
    const uint32_t rows = vh_pass_request_rows(req);
    if (b->n == b->max_requests || req->n_segments == 0 || req->n_segments > VH_PASS_MAX_SEGMENTS ||
        s0 + req->n_segments > b->max_segments || row0 + rows > b->max_rows)
        return vh_error_set(err, VH_ERR_INTERNAL, "pass batch: request %u of %u segments, %u rows (at most %u "
                            "requests, %u segments, %u rows)", b->n, req->n_segments, rows, b->max_requests,
                            b->max_segments, b->max_rows);
    for (uint32_t k = 0; k < req->n_segments; k++) {
        const vh_pass_segment *g = &req->segments[k];
        b->segments[s0 + k] = (vh_segment){
            .sequence = first_sequence + g->slot, .n_rows = g->n_rows, .position = g->position,
            .image = req->kind == VH_PASS_PREFILL && !g->vision_rows ? image : -1, .rope_delta = g->rope_delta,
            .embeds = g->vision_rows};
        b->adapters[s0 + k] = (uint8_t)g->adapter_set;
        b->segment_plans[s0 + k] = (uint8_t)(g->plans != 0);
    }
    memcpy(b->tokens + row0, req->tokens, sizeof(int32_t) * rows);
    b->requests[b->n++] = req;
    b->first_segment[b->n] = s0 + req->n_segments;
    b->first_row[b->n] = row0 + rows;
    return VH_OK;
}

/* Grow *buf to hold n items of `size` bytes (a pass's gathered outputs: a few rows). */
static int reserve(void **buf, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap) return 1;
    void *grown = realloc(*buf, n * size);
    if (!grown) return 0;
    *buf = grown;
    *cap = n;
    return 1;
}

uint32_t vh_pass_batch_options(uint32_t uses)
{
    return ((uses & VH_PASS_USES_HIDDEN_ROWS) ? VH_BATCH_HIDDEN_ROWS : 0) |
           ((uses & VH_PASS_USES_VISION_ROWS) ? VH_BATCH_SEGMENT_EMBEDS : 0) |
           ((uses & VH_PASS_USES_PLANS) ? VH_BATCH_PLAN : 0) |
           ((uses & VH_PASS_USES_ADAPTER_SETS) ? VH_BATCH_SEGMENT_ADAPTERS : 0) |
           ((uses & VH_PASS_USES_PLAN_SEGMENTS) ? VH_BATCH_SEGMENT_PLANS : 0);
}

/* The batch options the added requests' segments need beyond rows of tokens. */
static uint32_t segment_options(const vh_pass_batch *b, int plans)
{
    uint32_t options = 0;
    for (uint32_t s = 0; s < b->first_segment[b->n]; s++) {
        if (b->segments[s].embeds) options |= VH_BATCH_SEGMENT_EMBEDS;
        if (b->adapters[s]) options |= VH_BATCH_SEGMENT_ADAPTERS;
        if (plans && !b->segment_plans[s]) options |= VH_BATCH_SEGMENT_PLANS;
    }
    return options;
}

vh_status vh_pass_batch_close(vh_pass_batch *b, vh_error *err)
{
    if (b->n == 0) return vh_error_set(err, VH_ERR_INTERNAL, "pass batch of no request");
    const vh_pass_request *r0 = b->requests[0];
    const int tokens = r0->out_tokens != NULL, hidden = r0->n_hidden_rows > 0, plans = r0->out_plan != NULL;
    uint32_t n_hidden = 0;
    for (uint32_t i = 0; i < b->n; i++) {
        const vh_pass_request *r = b->requests[i];
        if ((r->out_tokens != NULL) != tokens || (r->n_hidden_rows > 0) != hidden || (r->out_plan != NULL) != plans ||
            r->plan_noise_stride != r0->plan_noise_stride || r->plan_out_stride != r0->plan_out_stride)
            return vh_error_set(err, VH_ERR_INTERNAL, "pass batch: the frames ask for different outputs");
        n_hidden += r->n_hidden_rows;
    }
    const uint32_t S = b->first_segment[b->n];
    const size_t hidden_floats = (size_t)n_hidden * b->hidden_dim;
    if ((hidden && (!reserve((void **)&b->hidden_rows, &b->hidden_cap, n_hidden, sizeof *b->hidden_rows) ||
                    !reserve((void **)&b->out_hidden, &b->out_hidden_cap, hidden_floats, sizeof(float)))) ||
        (plans && (!reserve((void **)&b->plan_noise, &b->noise_cap, (size_t)S * r0->plan_noise_stride, sizeof(float)) ||
                   !reserve((void **)&b->out_plan, &b->plan_cap, (size_t)S * r0->plan_out_stride, sizeof(float)))))
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (pass batch)");
    for (uint32_t i = 0, h = 0; i < b->n; i++) {
        const vh_pass_request *r = b->requests[i];
        for (uint32_t k = 0; k < r->n_hidden_rows; k++) b->hidden_rows[h++] = b->first_row[i] + r->hidden_rows[k];
        if (plans)
            memcpy(b->plan_noise + (size_t)b->first_segment[i] * r->plan_noise_stride, r->plan_noise,
                   sizeof(float) * r->n_segments * r->plan_noise_stride);
    }
    const uint32_t options =
        segment_options(b, plans) | (hidden ? VH_BATCH_HIDDEN_ROWS : 0) | (plans ? VH_BATCH_PLAN : 0);
    b->batch = (vh_batch){.struct_size = sizeof(vh_batch), .options = options, .n_segments = S,
                          .segments = b->segments, .n_rows = b->first_row[b->n], .tokens = b->tokens,
                          .out_tokens = tokens ? b->out_tokens : NULL};
    if (hidden) {
        b->batch.n_hidden_rows = n_hidden;
        b->batch.hidden_rows = b->hidden_rows;
        b->batch.out_hidden = b->out_hidden;
    }
    if (plans) {
        b->batch.plan_noise = b->plan_noise;
        b->batch.plan_noise_stride = r0->plan_noise_stride;
        b->batch.out_plan = b->out_plan;
        b->batch.plan_out_stride = r0->plan_out_stride;
    }
    if (options & VH_BATCH_SEGMENT_ADAPTERS) b->batch.segment_adapters = b->adapters;
    if (options & VH_BATCH_SEGMENT_PLANS) b->batch.segment_plans = b->segment_plans;
    return VH_OK;
}

void vh_pass_batch_return(const vh_pass_batch *b)
{
    const vh_batch *batch = &b->batch;
    for (uint32_t i = 0, h = 0; i < b->n; i++) {
        const vh_pass_request *r = b->requests[i];
        const uint32_t s0 = b->first_segment[i];
        for (uint32_t k = 0; batch->out_tokens && k < r->n_segments; k++) r->out_tokens[k] = b->out_tokens[s0 + k];
        if (r->n_hidden_rows)
            memcpy(r->out_hidden, b->out_hidden + (size_t)h * b->hidden_dim,
                   sizeof(float) * r->n_hidden_rows * b->hidden_dim);
        h += r->n_hidden_rows;
        /* the plans of the segments planned; the others' rows are left as they are */
        for (uint32_t k = 0; batch->out_plan && k < r->n_segments; k++)
            if (vh_batch_plans_segment(batch, s0 + k))
                memcpy(r->out_plan + (size_t)k * r->plan_out_stride,
                       b->out_plan + (size_t)(s0 + k) * r->plan_out_stride, sizeof(float) * r->plan_out_stride);
    }
}

vh_batch vh_pass_batch_part(const vh_pass_batch *b, uint32_t first, uint32_t count)
{
    const uint32_t s0 = b->first_segment[first], s1 = b->first_segment[first + count];
    const uint32_t row0 = b->first_row[first];
    return (vh_batch){.struct_size = sizeof(vh_batch),
                      .options = b->batch.options & (VH_BATCH_SEGMENT_EMBEDS | VH_BATCH_SEGMENT_ADAPTERS),
                      .n_segments = s1 - s0, .segments = b->segments + s0, .n_rows = b->first_row[first + count] - row0,
                      .tokens = b->tokens + row0,
                      .segment_adapters = b->batch.segment_adapters ? b->batch.segment_adapters + s0 : NULL};
}
