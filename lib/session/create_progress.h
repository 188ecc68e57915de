/*
 * vh_session_create's progress callback (vh_session_params.progress_fn): the fractions the load
 * steps report, kept non-decreasing and within [0, 1], and the caller's wish to stop turned into
 * VH_ERR_CANCELLED.
 */
#ifndef VH_SESSION_CREATE_PROGRESS_H
#define VH_SESSION_CREATE_PROGRESS_H

#include "util/error.h"
#include "vlahybrid/vlahybrid.h"

/* The share of the create each step starts at (coarse: the steps' usual costs on a 7B model). */
#define VH_PROGRESS_WEIGHTS 0.0     /* mapping and checking the checkpoint */
#define VH_PROGRESS_PROGRAM 0.15    /* the model family's program (tokenizer, norm stats) */
#define VH_PROGRESS_BACKENDS 0.2    /* plugins, the split; then each stage's executor: weights made resident */
#define VH_PROGRESS_STAGES 0.8      /* queue and stage threads */
#define VH_PROGRESS_WARMUP 0.82     /* warm-up frames, up to 1 */

typedef struct vh_create_progress {
    vh_progress_fn fn;          /* NULL: nothing reported, never cancelled */
    void *user;
    double last;                /* the last fraction reported */
} vh_create_progress;

void vh_create_progress_init(vh_create_progress *p, vh_progress_fn fn, void *user);

/* Report `stage` at `fraction` (raised to the last one reported if lower, capped at 1). VH_OK, or
 * VH_ERR_CANCELLED with err set when the callback returned nonzero. */
vh_status vh_create_progress_report(vh_create_progress *p, const char *stage, double fraction, vh_error *err);

#endif
