/*
 * The stage pipeline's insides, shared by its two files: stage_pipeline.c (the intake thread, the
 * serial and pipelined drivers, start / stop / statistics) and packed_groups.c (the packed
 * passes' groups and threads). Not part of any interface beyond lib/pipeline.
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

/* A packed pass and the frames it carries from pass to pass. With two stages two groups
 * alternate, so stage 0 runs one group's pass while stage 1 finishes the other's. */
typedef struct pass_group {
    vh_packed_pass pass;
    uint32_t capacity;                 /* frames the group holds at most */
    vh_frame_job *active[MAX_JOBS];    /* frames between passes (at a decode step) */
    uint32_t n_active;
    vh_frame_job *in_pass[MAX_JOBS];   /* the current pass: new frames first, then active ones */
    uint32_t n_in_pass;
    vh_status failed;                  /* the current pass failed on a stage */
    vh_error err;
} pass_group;

struct vh_stage_pipeline {
    vh_pipeline_config cfg;
    uint32_t n_stages, n_jobs;
    int pipelined;
    int packed;                        /* packed passes (pass groups) */
    pass_group groups[2];              /* one doing every stage, or two alternating over two stages */
    uint32_t n_groups;
    pass_group *group_waiting[VH_MAX_STAGES][2]; /* per stage, oldest first */
    uint32_t n_group_waiting[VH_MAX_STAGES];
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

/* Packed mode (packed_groups.c): the groups' passes and the threads that run them. */
vh_status vh_packed_groups_init(vh_stage_pipeline *p, vh_error *err);
void vh_packed_groups_free(vh_stage_pipeline *p);
void *vh_packed_stage0_main(void *arg);
void *vh_packed_stage1_main(void *arg);

#endif
