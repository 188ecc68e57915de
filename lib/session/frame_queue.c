#include "session/frame_queue.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"

void vh_frame_record_free(vh_frame_record *rec)
{
    if (!rec) return;
    free(rec->rgb);
    free(rec->instruction);
    free(rec);
}

vh_status vh_frame_queue_init(vh_frame_queue *q, uint32_t capacity, vh_queue_policy policy, vh_error *err)
{
    memset(q, 0, sizeof *q);
    q->capacity = capacity;
    q->policy = policy;
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "pthread_condattr_init");
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* timeouts immune to wall-clock changes */
    int failed = pthread_mutex_init(&q->lock, NULL) != 0;
    failed |= pthread_cond_init(&q->has_pending, &attr) != 0;
    failed |= pthread_cond_init(&q->has_space, &attr) != 0;
    failed |= pthread_cond_init(&q->has_result, &attr) != 0;
    pthread_condattr_destroy(&attr);
    if (failed) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "cannot create the queue's lock");
    return VH_OK;
}

void vh_frame_queue_destroy(vh_frame_queue *q)
{
    vh_frame_record *r = q->head;
    while (r) {
        vh_frame_record *next = r->next;
        vh_frame_record_free(r);
        r = next;
    }
    pthread_cond_destroy(&q->has_pending);
    pthread_cond_destroy(&q->has_space);
    pthread_cond_destroy(&q->has_result);
    pthread_mutex_destroy(&q->lock);
}

/* The record's result is final: release its inputs and wake the pollers. Lock held. */
static void mark_done(vh_frame_queue *q, vh_frame_record *rec)
{
    rec->state = VH_RECORD_DONE;
    rec->result.finished_ns = vh_now_ns();
    free(rec->rgb);
    rec->rgb = NULL;
    free(rec->instruction);
    rec->instruction = NULL;
    pthread_cond_broadcast(&q->has_result);
}

/* Answer a record without computing it (dropped, cancelled). Lock held. */
static void answer_without_running(vh_frame_queue *q, vh_frame_record *rec, vh_status status)
{
    rec->result.status = status;
    mark_done(q, rec);
}

/* Remove the oldest pending record from the pending tail. Lock held. */
static vh_frame_record *pop_pending(vh_frame_queue *q)
{
    vh_frame_record *rec = q->first_pending;
    q->first_pending = rec->next;
    q->n_pending--;
    return rec;
}

vh_status vh_frame_queue_submit(vh_frame_queue *q, vh_frame_record *rec, uint64_t *frame_id, vh_error *err)
{
    pthread_mutex_lock(&q->lock);
    while (!q->closed && q->n_pending >= q->capacity) {
        if (q->policy == VH_QUEUE_REJECT) {
            pthread_mutex_unlock(&q->lock);
            return vh_error_set(err, VH_ERR_BUSY, "the submit queue is full (%u frames waiting)", q->capacity);
        }
        if (q->policy == VH_QUEUE_DROP_OLDEST) {
            answer_without_running(q, pop_pending(q), VH_ERR_DROPPED);
            continue;
        }
        pthread_cond_wait(&q->has_space, &q->lock);
    }
    if (q->closed) {
        pthread_mutex_unlock(&q->lock);
        return vh_error_set(err, VH_ERR_CANCELLED, "the session is shutting down");
    }
    rec->next = NULL;
    rec->state = VH_RECORD_PENDING;
    rec->result.frame_id = ++q->last_id;
    *frame_id = rec->result.frame_id;
    if (q->tail) q->tail->next = rec;
    else q->head = rec;
    q->tail = rec;
    if (!q->first_pending) q->first_pending = rec;
    q->n_pending++;
    pthread_cond_signal(&q->has_pending);
    pthread_mutex_unlock(&q->lock);
    return VH_OK;
}

/* Start the oldest pending record, if any and the queue is open. Lock held. */
static vh_frame_record *start_oldest(vh_frame_queue *q)
{
    if (q->closed || !q->first_pending) return NULL;
    vh_frame_record *rec = pop_pending(q);
    rec->state = VH_RECORD_RUNNING;
    rec->result.started_ns = vh_now_ns();
    pthread_cond_signal(&q->has_space);
    return rec;
}

vh_frame_record *vh_frame_queue_take(vh_frame_queue *q)
{
    pthread_mutex_lock(&q->lock);
    while (!q->closed && !q->first_pending) pthread_cond_wait(&q->has_pending, &q->lock);
    vh_frame_record *rec = start_oldest(q);
    pthread_mutex_unlock(&q->lock);
    return rec;
}

vh_frame_record *vh_frame_queue_try_take(vh_frame_queue *q, int *closed)
{
    pthread_mutex_lock(&q->lock);
    vh_frame_record *rec = start_oldest(q);
    *closed = q->closed;
    pthread_mutex_unlock(&q->lock);
    return rec;
}

void vh_frame_queue_finish(vh_frame_queue *q, vh_frame_record *rec)
{
    pthread_mutex_lock(&q->lock);
    mark_done(q, rec);
    pthread_mutex_unlock(&q->lock);
}

static struct timespec deadline_after_ms(int32_t timeout_ms)
{
    int64_t at = vh_now_ns() + (int64_t)timeout_ms * 1000000;
    return (struct timespec){.tv_sec = at / 1000000000, .tv_nsec = at % 1000000000};
}

vh_status vh_frame_queue_poll(vh_frame_queue *q, vh_action *out, int32_t timeout_ms)
{
    struct timespec deadline = deadline_after_ms(timeout_ms > 0 ? timeout_ms : 0);
    pthread_mutex_lock(&q->lock);
    while (!(q->head && q->head->state == VH_RECORD_DONE)) {
        if (timeout_ms == 0 || (q->closed && !q->head)) {
            pthread_mutex_unlock(&q->lock);
            return VH_ERR_TIMEOUT;
        }
        if (timeout_ms < 0) {
            pthread_cond_wait(&q->has_result, &q->lock);
        } else if (pthread_cond_timedwait(&q->has_result, &q->lock, &deadline) == ETIMEDOUT) {
            if (q->head && q->head->state == VH_RECORD_DONE) break;
            pthread_mutex_unlock(&q->lock);
            return VH_ERR_TIMEOUT;
        }
    }
    vh_frame_record *rec = q->head;
    q->head = rec->next;
    if (!q->head) q->tail = NULL;
    pthread_mutex_unlock(&q->lock);

    size_t n = out->struct_size < sizeof rec->result ? out->struct_size : sizeof rec->result;
    size_t caller_size = out->struct_size;
    memcpy(out, &rec->result, n);
    out->struct_size = caller_size;
    vh_frame_record_free(rec);
    return VH_OK;
}

void vh_frame_queue_close(vh_frame_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->closed = 1;
    while (q->first_pending) answer_without_running(q, pop_pending(q), VH_ERR_CANCELLED);
    pthread_cond_broadcast(&q->has_pending);
    pthread_cond_broadcast(&q->has_space);
    pthread_cond_broadcast(&q->has_result);
    pthread_mutex_unlock(&q->lock);
}
