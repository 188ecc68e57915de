/*
 * The split scheduler: where the next frame's cut between two stages goes, inside the plan's
 * dynamic zone [split_min, split_max] (blocks both executors hold).
 *
 * It keeps smoothed (EWMA) costs per stage from the frames that finished: the fixed work (stage
 * 0's vision towers, stage 1's LM head) and one LLM block's time in a prefill pass and in a decode
 * pass, each phase apart. A frame's cut serves its prefill and all its decode passes (its KV cache
 * lives where its blocks ran), so the choice weighs both phases by the frame's passes: the cut
 * that minimises the slower stage's predicted time per frame,
 *     max(F0 + s (P0 + k D0), F1 + (n - s) (P1 + k D1)),  k = decode passes per frame.
 * The measured times include whatever else loads the devices, so a busy CPU moves blocks to the
 * GPU. The cut moves only when the prediction improves by more than 3% (no flapping); when the
 * predictions tie, a backlog of frames waiting at one stage moves one block to the other.
 *
 * Thread-safe.
 */
#ifndef VH_PIPELINE_SPLIT_SCHEDULER_H
#define VH_PIPELINE_SPLIT_SCHEDULER_H

#include <pthread.h>

#include "pipeline/frame_job.h"

typedef struct vh_split_scheduler {
    pthread_mutex_t lock;
    uint32_t n_layers, lo, hi, split;
    double fixed_ns[2];                /* EWMA: vision (stage 0), head (stage 1), per frame */
    double prefill_block_ns[2];        /* EWMA: one LLM block, one prefill pass */
    double decode_block_ns[2];         /* EWMA: one LLM block, one decode pass */
    double decode_passes;              /* EWMA: decode passes per frame */
    int observed[2];                   /* a frame ran LLM blocks there: the seeds are replaced */
    uint32_t changes;
    vh_trace *trace;
} vh_split_scheduler;

void vh_split_scheduler_init(vh_split_scheduler *s, const vh_plan *plan, uint32_t action_tokens, vh_trace *trace);
void vh_split_scheduler_destroy(vh_split_scheduler *s);

/* The cut for a frame starting now; backlog[i]: frames waiting at stage i. */
uint32_t vh_split_scheduler_choose(vh_split_scheduler *s, const uint32_t backlog[2]);

/* Learn from a finished frame (its cut, its stages' busy times). */
void vh_split_scheduler_observe(vh_split_scheduler *s, const vh_frame_job *job);

/* The current cut and the smoothed per-block costs (ns) for the statistics. */
void vh_split_scheduler_read(vh_split_scheduler *s, uint32_t *split, uint32_t *changes, int64_t prefill_block_ns[2],
                             int64_t decode_block_ns[2]);

#endif
