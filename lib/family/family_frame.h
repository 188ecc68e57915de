/*
 * A frame as its family sees it in the pipeline: the buffers its prepare fills, its own state, and
 * the request for the frame's next pass (pass_request.h). The pipeline's job (lib/pipeline/
 * frame_job.h) holds one; the family never sees the job, its batches or its stages.
 */
#ifndef VH_FAMILY_FAMILY_FRAME_H
#define VH_FAMILY_FAMILY_FRAME_H

#include "family/pass_request.h"
#include "vlahybrid/backend.h"

typedef struct vh_family_frame {
    const struct vh_program *program;  /* the family's session state (family.h), read-only here */
    void *state;                       /* the family's per-job state (job_init / job_free) */
    float *pixels[VH_MAX_TOWERS];      /* [3, S, S] per tower: the vision blocks' input (prepare fills) */
    int32_t *tokens;                   /* [max_context * segments_per_frame]: room for prefill rows */
    vh_pass_request pass;              /* the next pass (prepare, then advance set it) */
} vh_family_frame;

#endif
