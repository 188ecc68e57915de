/*
 * The stage pipeline's insides, shared by its two files: stage_pipeline.c (the intake thread, the
 * serial and pipelined drivers, start / stop / statistics) and packed_rounds.c (the packed
 * passes and their threads). Not part of any interface beyond lib/pipeline.
 */
#ifndef VH_PIPELINE_STAGE_PIPELINE_INTERNAL_H
#define VH_PIPELINE_STAGE_PIPELINE_INTERNAL_H

#include <pthread.h>

#include "pipeline/packed_pass.h"
#include "pipeline/split_scheduler.h"
#include "pipeline/stage_pipeline.h"
#include "util/latency_window.h"

#define MAX_JOBS VH_MAX_FRAMES_IN_FLIGHT

typedef struct stage_thread {
    vh_stage_pipeline *pipeline;
    uint32_t index;
    pthread_t thread;
} stage_thread;

/* One packed pass's buffers and frames: being built on stage 0, or run by the last stage. */
typedef struct packed_round {
    vh_packed_pass pass;
    vh_frame_job *in_pass[MAX_JOBS];   /* the pass: new frames first, then frames at a decode step */
    uint32_t n_in_pass;
    uint32_t n_staged;                 /* two stages: the new frames whose stage 0 already ran */
    vh_rows_timing before;             /* the pass's stage-0 time when the previous pass was counted */
    vh_status failed;                  /* the pass failed on a stage */
    vh_error err;
} packed_round;

struct vh_stage_pipeline {
    vh_pipeline_config cfg;
    uint32_t n_stages, n_jobs;
    int pipelined;
    int packed;                        /* packed passes (packed_rounds.c) */
    packed_round rounds[2];            /* one stage: one; two: one built on stage 0 while the other runs
                                          on stage 1 */
    uint32_t n_rounds;                 /* also the packed mode's threads */
    uint32_t max_new;                  /* new frames a pass at most */
    int has_scheduler;
    vh_split_scheduler scheduler;
    vh_frame_job jobs[MAX_JOBS];
    uint32_t n_jobs_ready;             /* jobs initialised (freed at stop) */

    pthread_mutex_t lock;              /* guards everything below */
    pthread_cond_t changed;            /* a job freed, work queued, or stopping */
    vh_frame_job *free_jobs[MAX_JOBS];
    uint32_t n_free;
    vh_frame_job *waiting[VH_MAX_STAGES][MAX_JOBS]; /* per stage, oldest first */
    uint32_t n_waiting[VH_MAX_STAGES];
    vh_frame_job *active[MAX_JOBS];    /* packed: frames between passes (at a decode step) */
    uint32_t n_active;
    packed_round *on_last_stage;       /* packed, two stages: the pass the last stage runs; NULL: none */
    int stopping;

    pthread_t intake;
    int intake_started;
    stage_thread stages[VH_MAX_STAGES];
    uint32_t n_stage_threads;

    /* statistics */
    uint64_t passes[VH_MAX_STAGES];
    int64_t busy_ns[VH_MAX_STAGES];
    int64_t handoff_ns[VH_MAX_STAGES];
    vh_latency_window pass_ns[VH_MAX_STAGES]; /* each pass's time on the stage */
    uint64_t frames_completed;
};

/* The frame is over (an action, or a failure): answer its record, learn, free the job. Lock not
 * held. */
void vh_pipeline_complete(vh_stage_pipeline *p, vh_frame_job *job, vh_status st, vh_error *err);
/* The next job waiting at `stage`. Lock held; the stage's queue is not empty. */
vh_frame_job *vh_pipeline_pop_waiting(vh_stage_pipeline *p, uint32_t stage);

/* Packed mode (packed_rounds.c): the passes and the threads that run them. */
vh_status vh_packed_rounds_init(vh_stage_pipeline *p, vh_error *err);
void vh_packed_rounds_free(vh_stage_pipeline *p);
void *vh_packed_stage0_main(void *arg);
void *vh_packed_stage1_main(void *arg);

#endif
