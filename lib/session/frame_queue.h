/*
 * The session's frames, from submission to poll, in submission order.
 *
 * Every accepted frame gets a record that stays in one FIFO until its result is polled, so results
 * come out in submission order whatever happens to each frame (computed, dropped by policy,
 * cancelled). The records not yet started are a contiguous tail of the FIFO ("pending"); only
 * their number is bounded by the capacity, and the policy says what a submit does when it is full.
 *
 * Thread-safety: every function may be called from any thread; one lock guards the FIFO.
 */
#ifndef VH_SESSION_FRAME_QUEUE_H
#define VH_SESSION_FRAME_QUEUE_H

#include <pthread.h>

#include "util/error.h"

typedef enum vh_record_state {
    VH_RECORD_PENDING = 0,
    VH_RECORD_RUNNING = 1,
    VH_RECORD_DONE = 2
} vh_record_state;

typedef struct vh_frame_record {
    struct vh_frame_record *next;
    vh_record_state state;
    uint8_t *rgb;                      /* the frame's pixels, tightly packed; freed once started */
    uint32_t width, height;
    char *instruction;
    vh_action result;                  /* frame_id, tag, timestamps and, when DONE, the outcome */
} vh_frame_record;

typedef struct vh_frame_queue {
    pthread_mutex_t lock;
    pthread_cond_t has_pending;        /* the worker waits here */
    pthread_cond_t has_space;          /* VH_QUEUE_BLOCK submitters wait here */
    pthread_cond_t has_result;         /* pollers wait here */
    vh_frame_record *head, *tail;      /* every record not yet polled */
    vh_frame_record *first_pending;    /* the oldest record not yet started, or NULL */
    uint32_t n_pending, capacity;
    vh_queue_policy policy;
    uint64_t last_id;
    int closed;
} vh_frame_queue;

vh_status vh_frame_queue_init(vh_frame_queue *q, uint32_t capacity, vh_queue_policy policy, vh_error *err);
/* Frees every record. No thread may use the queue any more. */
void vh_frame_queue_destroy(vh_frame_queue *q);

/* Accept `rec` (allocated by the caller, with pixels, instruction, tag and timestamps set); the
 * queue owns it from VH_OK on (the caller must not touch it again: it may be computed and polled
 * before this returns) and *frame_id receives its id. VH_ERR_BUSY (REJECT policy, full) leaves
 * it with the caller. */
vh_status vh_frame_queue_submit(vh_frame_queue *q, vh_frame_record *rec, uint64_t *frame_id, vh_error *err);

/* The worker's side: wait for the oldest pending record and mark it RUNNING; NULL once closed. */
vh_frame_record *vh_frame_queue_take(vh_frame_queue *q);
/* The same without waiting: the oldest pending record, or NULL when none is pending (*closed
 * tells whether the queue is closed, after which no record comes any more). */
vh_frame_record *vh_frame_queue_try_take(vh_frame_queue *q, int *closed);
/* The worker's side: rec->result is filled in; make it visible to pollers. */
void vh_frame_queue_finish(vh_frame_queue *q, vh_frame_record *rec);

/* Copy the oldest result into *out (at most out->struct_size bytes) and forget its record.
 * timeout_ms < 0 waits without limit. VH_ERR_TIMEOUT when none is ready in time. */
vh_status vh_frame_queue_poll(vh_frame_queue *q, vh_action *out, int32_t timeout_ms);

/* Stop: pending records are answered VH_ERR_CANCELLED, waiters wake, take() returns NULL. */
void vh_frame_queue_close(vh_frame_queue *q);

void vh_frame_record_free(vh_frame_record *rec);

#endif
