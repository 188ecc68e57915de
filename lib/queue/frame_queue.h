/*
 * The session's frames, from submission to poll, in submission order.
 *
 * Every accepted frame gets a record that stays in one FIFO until its result is polled, so results
 * come out in submission order whatever happens to each frame (computed, dropped by policy,
 * expired, cancelled). The records not yet started ("pending") are the FIFO's last records; a
 * cancelled or expired one among them is answered in place. Only the pending records are bounded
 * by the capacity, and the policy says what a submit does when they fill it.
 *
 * Deadlines: a pending record whose deadline has passed is answered VH_ERR_EXPIRED instead of
 * being started, at the latest when the worker would take it or a poller waits for it.
 *
 * Every answer is counted in the queue's statistics (queue/frame_stats.h).
 *
 * Thread-safety: every function may be called from any thread; one lock guards the FIFO.
 */
#ifndef VH_QUEUE_FRAME_QUEUE_H
#define VH_QUEUE_FRAME_QUEUE_H

#include <pthread.h>

#include "queue/frame_io.h"
#include "queue/frame_stats.h"
#include "util/error.h"

typedef enum vh_record_state {
    VH_RECORD_PENDING = 0,
    VH_RECORD_RUNNING = 1,
    VH_RECORD_DONE = 2
} vh_record_state;

typedef struct vh_frame_record {
    struct vh_frame_record *next;
    vh_record_state state;
    uint8_t *rgb;                      /* the frame's pixels, tightly packed; freed once answered */
    uint32_t width, height;
    char *instruction;
    char *unnorm_key;                  /* the frame's own unnorm_key (vh_frame 0.4.0), or NULL */
    vh_frame_input driving;            /* the driving fields (vh_frame 0.3.0), pointing into `owned` */
    void *owned;                       /* one allocation holding the driving fields' copies */
    vh_action result;                  /* frame_id, tag, sequence, times, deadline_ns and, when
                                          DONE, the outcome */
} vh_frame_record;

typedef struct vh_frame_queue {
    pthread_mutex_t lock;
    pthread_cond_t has_pending;        /* the worker waits here */
    pthread_cond_t has_space;          /* VH_QUEUE_BLOCK submitters wait here */
    pthread_cond_t has_result;         /* pollers (and vh_frame_queue_reset) wait here */
    vh_frame_record *head, *tail;      /* every record not yet polled */
    vh_frame_record *first_pending;    /* the oldest record not yet started, or NULL */
    uint32_t n_pending, n_running, n_done, capacity;
    vh_queue_policy policy;
    uint64_t last_id;
    uint64_t episode;
    int closed;
    int shut;                          /* closed by vh_frame_queue_shutdown: callers get VH_ERR_SHUTDOWN */
    vh_frame_stats stats;
} vh_frame_queue;

vh_status vh_frame_queue_init(vh_frame_queue *q, uint32_t capacity, vh_queue_policy policy, vh_error *err);
/* Frees every record. No thread may use the queue any more. */
void vh_frame_queue_destroy(vh_frame_queue *q);

/* Accept `rec` (allocated by the caller, with pixels, instruction, tag, sequence, deadline and
 * submission time set); the queue owns it from VH_OK on (the caller must not touch it again: it
 * may be computed and polled before this returns) and *frame_id receives its id. VH_ERR_BUSY
 * (REJECT policy, full), VH_ERR_SHUTDOWN (shut down, also while waiting for room under BLOCK) and
 * VH_ERR_CANCELLED (closed) leave it with the caller. */
vh_status vh_frame_queue_submit(vh_frame_queue *q, vh_frame_record *rec, uint64_t *frame_id, vh_error *err);

/* The worker's side: wait for the oldest pending record whose deadline has not passed and mark
 * it RUNNING (those past their deadline are answered EXPIRED on the way); NULL once closed. */
vh_frame_record *vh_frame_queue_take(vh_frame_queue *q);
/* The worker's side: rec->result is filled in; make it visible to pollers. */
void vh_frame_queue_finish(vh_frame_queue *q, vh_frame_record *rec);
/* The worker's side: answer a RUNNING record with `status` and, when VH_OK, the frame's result. */
void vh_frame_queue_answer(vh_frame_queue *q, vh_frame_record *rec, vh_status status, const vh_frame_result *res);
/* The inputs of a RUNNING record (views into it, valid until it is answered). */
vh_frame_input vh_frame_record_input(const vh_frame_record *rec);

/* Copy the oldest result into *out (at most out_size bytes; the caller fixes struct_size) and
 * forget its record. timeout_ms < 0 waits without limit. VH_ERR_TIMEOUT when none is ready in
 * time; VH_ERR_SHUTDOWN once the queue is shut down (at once, or waking a waiting poll). */
vh_status vh_frame_queue_poll(vh_frame_queue *q, vh_action *out, size_t out_size, int32_t timeout_ms);

/* Answer the pending record `frame_id` VH_ERR_CANCELLED. VH_ERR_BUSY when it has started or been
 * answered, VH_ERR_INVALID_ARGUMENT when no such id was given. */
vh_status vh_frame_queue_cancel(vh_frame_queue *q, uint64_t frame_id, vh_error *err);
/* Answer every pending record VH_ERR_CANCELLED; returns how many. */
uint32_t vh_frame_queue_cancel_pending(vh_frame_queue *q);

/* A new episode: cancel every pending record, wait until every record started so far is
 * answered, then number later submissions with the next episode, which is returned. clear_stats:
 * start the statistics afresh. clear_ids: also restart frame ids and episodes (only when nothing
 * is unpolled: the session's warm-up, before anyone else sees the session). */
uint64_t vh_frame_queue_reset(vh_frame_queue *q, int clear_stats, int clear_ids);

/* A snapshot of the statistics and the current counts (any pointer may be NULL). */
void vh_frame_queue_stats(vh_frame_queue *q, vh_frame_stats *stats, uint32_t *pending, uint32_t *running,
                          uint32_t *unpolled, uint64_t *episode);

/* Change the policy (the session's warm-up submits under VH_QUEUE_BLOCK). */
void vh_frame_queue_set_policy(vh_frame_queue *q, vh_queue_policy policy);

/* Stop: pending records are answered VH_ERR_CANCELLED, waiters wake, take() returns NULL. */
void vh_frame_queue_close(vh_frame_queue *q);

/* Close for good while callers may still be inside (vh_session_shutdown): as close, and blocked
 * or later submits and polls return VH_ERR_SHUTDOWN; then wait until every RUNNING record is
 * answered (the worker finishes the frames it has started). Idempotent; any thread. */
void vh_frame_queue_shutdown(vh_frame_queue *q);

void vh_frame_record_free(vh_frame_record *rec);

#endif
