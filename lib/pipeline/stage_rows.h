/*
 * One pass's LLM rows on one stage: take the rows from the previous stage, run the stage's blocks
 * of the pass, hand the rows on. Shared by the frame job (one frame's pass) and the packed pass
 * (several frames' rows in one batch).
 *
 * The rows cross through the caller's host buffer: copied in and out (write_hidden /
 * read_hidden), or worked on in place by an executor that offers bind_hidden.
 */
#ifndef VH_PIPELINE_STAGE_ROWS_H
#define VH_PIPELINE_STAGE_ROWS_H

#include "plan/plan.h"
#include "util/trace.h"

/* What running rows on a stage cost; the run adds to it. */
typedef struct vh_rows_timing {
    int64_t busy_ns;                   /* the stage's executor runs (the head included) */
    int64_t head_ns;                   /* ... of which the LM head (last stage of several) */
    int64_t handoff_ns;                /* rows in and out */
} vh_rows_timing;

typedef struct vh_rows_job {
    const vh_plan *plan;
    const vh_model *model;
    int copy_hidden;                   /* 1: never bind_hidden (tests of the copy path) */
    vh_trace *trace;                   /* NULL: no spans */
    const char *name;                  /* the span's name ("step 3 f12") */
    uint64_t frame_id;                 /* the span's frame */
} vh_rows_job;

/* Blocks [first, end) of stage `stage` (LLM embedding, LLM blocks, head) on `batch`, whose rows
 * cross through `hidden` ([max_context, Dl] fp32 host memory). */
vh_status vh_stage_run_rows(const vh_rows_job *r, uint32_t stage, const vh_batch *batch, float *hidden,
                            uint32_t first, uint32_t end, vh_rows_timing *t, vh_error *err);

/* Blocks [first, end) of a stage on a batch: the executor call with a message naming them; an
 * empty range does nothing. */
vh_status vh_stage_run_range(const vh_stage *s, const vh_batch *batch, uint32_t first, uint32_t end, vh_error *err);

#endif
