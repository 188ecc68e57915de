#include "queue/frame_queue.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"

void vh_frame_record_free(vh_frame_record *rec)
{
    if (!rec) return;
    free(rec->rgb);
    free(rec->instruction);
    free(rec->unnorm_key);
    free(rec->owned);
    free(rec);
}

float *vh_frame_result_add_extra(vh_frame_result *r, const char *name, uint32_t count)
{
    uint32_t used = 0;
    for (uint32_t i = 0; i < r->n_extras; i++) used = r->extra_info[i].offset + r->extra_info[i].count;
    if (r->n_extras >= VH_MAX_ACTION_EXTRAS || count > VH_MAX_ACTION_EXTRA_FLOATS - used) return NULL;
    vh_action_extra_info *e = &r->extra_info[r->n_extras++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->offset = used;
    e->count = count;
    return r->extras + used;
}

vh_frame_input vh_frame_record_input(const vh_frame_record *rec)
{
    vh_frame_input in = rec->driving;
    in.rgb = rec->rgb;
    in.width = rec->width;
    in.height = rec->height;
    in.stride = (size_t)rec->width * 3;
    in.instruction = rec->instruction;
    in.unnorm_key = rec->unnorm_key;
    in.episode = rec->result.episode;
    in.sequence = rec->result.sequence;
    return in;
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

/* The record's result is final: release its inputs, count it, wake the pollers. Lock held. */
static void mark_done(vh_frame_queue *q, vh_frame_record *rec)
{
    rec->state = VH_RECORD_DONE;
    rec->result.finished_ns = vh_now_ns();
    free(rec->rgb);
    rec->rgb = NULL;
    free(rec->instruction);
    rec->instruction = NULL;
    free(rec->unnorm_key);
    rec->unnorm_key = NULL;
    free(rec->owned);
    rec->owned = NULL;
    memset(&rec->driving, 0, sizeof rec->driving);
    q->n_done++;
    vh_frame_stats_answered(&q->stats, &rec->result);
    pthread_cond_broadcast(&q->has_result);
}

/* Take `rec` out of the pending records. Lock held; rec is PENDING. */
static void leave_pending(vh_frame_queue *q, vh_frame_record *rec)
{
    rec->state = VH_RECORD_RUNNING; /* no longer PENDING: the scan below passes it */
    if (q->first_pending == rec) {
        vh_frame_record *next = rec->next;
        while (next && next->state != VH_RECORD_PENDING) next = next->next; /* cancelled, expired */
        q->first_pending = next;
    }
    q->n_pending--;
    pthread_cond_signal(&q->has_space);
}

/* Answer a pending record without computing it (dropped, expired, cancelled). Lock held. */
static void answer_without_running(vh_frame_queue *q, vh_frame_record *rec, vh_status status)
{
    leave_pending(q, rec);
    rec->result.status = status;
    mark_done(q, rec);
}

static int past_deadline(const vh_frame_record *rec, int64_t now)
{
    return rec->result.deadline_ns && now > rec->result.deadline_ns;
}

/* Answer EXPIRED the oldest pending records whose deadline has passed at `now`. Lock held. */
static void expire_due_at(vh_frame_queue *q, int64_t now)
{
    while (q->first_pending && past_deadline(q->first_pending, now))
        answer_without_running(q, q->first_pending, VH_ERR_EXPIRED);
}

static void expire_due(vh_frame_queue *q)
{
    expire_due_at(q, vh_now_ns());
}

vh_status vh_frame_queue_submit(vh_frame_queue *q, vh_frame_record *rec, uint64_t *frame_id, vh_error *err)
{
    pthread_mutex_lock(&q->lock);
    expire_due(q);
    while (!q->closed && q->n_pending >= q->capacity) {
        if (q->policy == VH_QUEUE_REJECT) {
            q->stats.rejected++;
            pthread_mutex_unlock(&q->lock);
            return vh_error_set(err, VH_ERR_BUSY, "the submit queue is full (%u frames waiting)", q->capacity);
        }
        if (q->policy == VH_QUEUE_DROP_OLDEST) {
            answer_without_running(q, q->first_pending, VH_ERR_DROPPED);
            continue;
        }
        pthread_cond_wait(&q->has_space, &q->lock);
        expire_due(q);
    }
    if (q->closed) {
        const int shut = q->shut;
        pthread_mutex_unlock(&q->lock);
        if (shut) return vh_error_set(err, VH_ERR_SHUTDOWN, "the session was shut down (vh_session_shutdown)");
        return vh_error_set(err, VH_ERR_CANCELLED, "the session is shutting down");
    }
    rec->next = NULL;
    rec->state = VH_RECORD_PENDING;
    rec->result.frame_id = ++q->last_id;
    rec->result.episode = q->episode;
    *frame_id = rec->result.frame_id;
    if (q->tail) q->tail->next = rec;
    else q->head = rec;
    q->tail = rec;
    if (!q->first_pending) q->first_pending = rec;
    q->n_pending++;
    q->stats.submitted++;
    pthread_cond_signal(&q->has_pending);
    pthread_mutex_unlock(&q->lock);
    return VH_OK;
}

vh_frame_record *vh_frame_queue_take(vh_frame_queue *q)
{
    pthread_mutex_lock(&q->lock);
    vh_frame_record *rec = NULL;
    while (!q->closed && !rec) {
        const int64_t now = vh_now_ns(); /* one reading: a frame that starts does so by its deadline */
        expire_due_at(q, now);
        if (!q->first_pending) {
            pthread_cond_wait(&q->has_pending, &q->lock);
            continue;
        }
        rec = q->first_pending;
        leave_pending(q, rec); /* now RUNNING */
        rec->result.started_ns = now;
        q->n_running++;
    }
    pthread_mutex_unlock(&q->lock);
    return rec;
}

void vh_frame_queue_finish(vh_frame_queue *q, vh_frame_record *rec)
{
    pthread_mutex_lock(&q->lock);
    q->n_running--;
    mark_done(q, rec);
    pthread_mutex_unlock(&q->lock);
}

void vh_frame_queue_answer(vh_frame_queue *q, vh_frame_record *rec, vh_status status, const vh_frame_result *res)
{
    vh_action *a = &rec->result; /* the worker holds a RUNNING record alone: no lock needed to fill it */
    a->status = status;
    if (status == VH_OK && res) {
        a->kind = res->kind;
        a->action_dim = res->action_dim;
        memcpy(a->values, res->values, sizeof res->values);
        memcpy(a->token_ids, res->token_ids, sizeof res->token_ids);
        a->n_points = res->n_points;
        memcpy(a->trajectory, res->trajectory, sizeof res->trajectory);
        a->n_extras = res->n_extras;
        memcpy(a->extra_info, res->extra_info, sizeof res->extra_info);
        memcpy(a->extras, res->extras, sizeof res->extras);
        a->vision_ns = res->vision_ns;
        a->prefill_ns = res->prefill_ns;
        a->decode_ns = res->decode_ns;
    }
    vh_frame_queue_finish(q, rec);
}

static struct timespec timespec_at(int64_t ns)
{
    return (struct timespec){.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
}

vh_status vh_frame_queue_poll(vh_frame_queue *q, vh_action *out, size_t out_size, int32_t timeout_ms)
{
    const int64_t give_up = vh_now_ns() + (int64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        if (q->shut) {
            pthread_mutex_unlock(&q->lock);
            return VH_ERR_SHUTDOWN;
        }
        expire_due(q);
        if (q->head && q->head->state == VH_RECORD_DONE) break;
        if (timeout_ms == 0 || (q->closed && !q->head)) {
            pthread_mutex_unlock(&q->lock);
            return VH_ERR_TIMEOUT;
        }
        /* the next result may be an expiry: wake at the head's deadline to answer it then */
        int64_t wake = timeout_ms < 0 ? INT64_MAX : give_up;
        const int64_t head_deadline = q->head && q->head->state == VH_RECORD_PENDING ? q->head->result.deadline_ns : 0;
        if (head_deadline && head_deadline < wake - 1) wake = head_deadline + 1; /* just past it */
        if (wake == INT64_MAX) {
            pthread_cond_wait(&q->has_result, &q->lock);
            continue;
        }
        struct timespec at = timespec_at(wake);
        if (pthread_cond_timedwait(&q->has_result, &q->lock, &at) == ETIMEDOUT && timeout_ms > 0 &&
            vh_now_ns() >= give_up) {
            expire_due(q);
            if (!q->shut && q->head && q->head->state == VH_RECORD_DONE) break;
            const int shut = q->shut;
            pthread_mutex_unlock(&q->lock);
            return shut ? VH_ERR_SHUTDOWN : VH_ERR_TIMEOUT;
        }
    }
    vh_frame_record *rec = q->head;
    q->head = rec->next;
    if (!q->head) q->tail = NULL;
    q->n_done--;
    pthread_mutex_unlock(&q->lock);

    memcpy(out, &rec->result, out_size < sizeof rec->result ? out_size : sizeof rec->result);
    vh_frame_record_free(rec);
    return VH_OK;
}

vh_status vh_frame_queue_cancel(vh_frame_queue *q, uint64_t frame_id, vh_error *err)
{
    pthread_mutex_lock(&q->lock);
    vh_frame_record *rec = q->first_pending;
    while (rec && rec->result.frame_id < frame_id) rec = rec->next; /* ids ascend along the FIFO */
    const int found = rec && rec->result.frame_id == frame_id && rec->state == VH_RECORD_PENDING;
    if (found) answer_without_running(q, rec, VH_ERR_CANCELLED);
    const uint64_t last_id = q->last_id;
    pthread_mutex_unlock(&q->lock);
    if (found) return VH_OK;
    if (frame_id == 0 || frame_id > last_id)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "no frame has id %llu", (unsigned long long)frame_id);
    return vh_error_set(err, VH_ERR_BUSY, "frame %llu has already started or been answered",
                        (unsigned long long)frame_id);
}

/* Lock held. */
static uint32_t cancel_all_pending(vh_frame_queue *q)
{
    uint32_t n = 0;
    for (; q->first_pending; n++) answer_without_running(q, q->first_pending, VH_ERR_CANCELLED);
    return n;
}

uint32_t vh_frame_queue_cancel_pending(vh_frame_queue *q)
{
    pthread_mutex_lock(&q->lock);
    uint32_t n = cancel_all_pending(q);
    pthread_mutex_unlock(&q->lock);
    return n;
}

uint64_t vh_frame_queue_reset(vh_frame_queue *q, int clear_stats, int clear_ids)
{
    pthread_mutex_lock(&q->lock);
    cancel_all_pending(q);
    const uint64_t ending = q->episode++;
    /* frames of the ending episode that started are answered in their turn (records of one
     * episode precede the next's in the FIFO) */
    for (;;) {
        vh_frame_record *r = q->head;
        while (r && r->result.episode <= ending && r->state == VH_RECORD_DONE) r = r->next;
        if (!r || r->result.episode > ending || q->closed) break;
        pthread_cond_wait(&q->has_result, &q->lock);
    }
    if (clear_stats) memset(&q->stats, 0, sizeof q->stats);
    if (clear_ids && !q->head) {
        q->last_id = 0;
        q->episode = 0;
    }
    const uint64_t episode = q->episode;
    pthread_mutex_unlock(&q->lock);
    return episode;
}

void vh_frame_queue_stats(vh_frame_queue *q, vh_frame_stats *stats, uint32_t *pending, uint32_t *running,
                          uint32_t *unpolled, uint64_t *episode)
{
    pthread_mutex_lock(&q->lock);
    expire_due(q);
    if (stats) *stats = q->stats;
    if (pending) *pending = q->n_pending;
    if (running) *running = q->n_running;
    if (unpolled) *unpolled = q->n_done;
    if (episode) *episode = q->episode;
    pthread_mutex_unlock(&q->lock);
}

void vh_frame_queue_set_policy(vh_frame_queue *q, vh_queue_policy policy)
{
    pthread_mutex_lock(&q->lock);
    q->policy = policy;
    pthread_cond_broadcast(&q->has_space);
    pthread_mutex_unlock(&q->lock);
}

/* Lock held. */
static void close_locked(vh_frame_queue *q)
{
    q->closed = 1;
    cancel_all_pending(q);
    pthread_cond_broadcast(&q->has_pending);
    pthread_cond_broadcast(&q->has_space);
    pthread_cond_broadcast(&q->has_result);
}

void vh_frame_queue_close(vh_frame_queue *q)
{
    pthread_mutex_lock(&q->lock);
    close_locked(q);
    pthread_mutex_unlock(&q->lock);
}

void vh_frame_queue_shutdown(vh_frame_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->shut = 1; /* with the close, under one lock: no submit is accepted after this */
    close_locked(q); /* wakes submitters and pollers: they see `shut` */
    while (q->n_running > 0) pthread_cond_wait(&q->has_result, &q->lock); /* mark_done broadcasts */
    pthread_mutex_unlock(&q->lock);
}
