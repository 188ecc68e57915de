/* The poller thread: vh_poll_action in a loop, answers into a mailbox, a wake-up per answer. */
#include "action_poller.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How long one vh_poll_action waits: the thread checks for stop this often. */
#define POLL_SLICE_MS 100

struct vh_serve_poller {
    vh_session *session;
    void (*wake)(void *user);
    void *user;
    pthread_t thread;
    atomic_bool stop;
    pthread_mutex_t lock;
    vh_serve_answer *head, *tail; /* posted, not taken */
};

static void post(vh_serve_poller *p, vh_serve_answer *a)
{
    pthread_mutex_lock(&p->lock);
    if (p->tail) p->tail->next = a;
    else p->head = a;
    p->tail = a;
    pthread_mutex_unlock(&p->lock);
    p->wake(p->user);
}

static void *poll_loop(void *arg)
{
    vh_serve_poller *p = arg;
    vh_action action;
    while (!atomic_load(&p->stop)) {
        vh_action_init(&action);
        vh_status st = vh_poll_action(p->session, &action, POLL_SLICE_MS);
        if (st == VH_ERR_TIMEOUT) continue;
        if (st != VH_OK) { /* cannot happen with a valid session; do not spin if it does */
            fprintf(stderr, "vh-serve: vh_poll_action: %s\n", vh_status_string(st));
            continue;
        }
        vh_serve_answer *a = calloc(1, sizeof *a);
        if (!a) {
            /* the client waits until it times out; nothing else can be done without memory */
            fprintf(stderr, "vh-serve: out of memory: the answer to frame %llu is lost\n",
                    (unsigned long long)action.frame_id);
            continue;
        }
        a->tag = action.tag;
        a->frame_id = action.frame_id;
        a->status = action.status;
        a->action_dim = action.action_dim <= VH_MAX_ACTION_DIM ? action.action_dim : VH_MAX_ACTION_DIM;
        memcpy(a->values, action.values, sizeof a->values);
        a->submitted_ns = action.submitted_ns;
        a->started_ns = action.started_ns;
        a->finished_ns = action.finished_ns;
        if (action.status != VH_OK)
            snprintf(a->error, sizeof a->error, "%s: %s", vh_status_string(action.status),
                     vh_session_last_error(p->session));
        post(p, a);
    }
    return NULL;
}

vh_serve_poller *vh_serve_poller_start(vh_session *session, void (*wake)(void *user), void *user)
{
    vh_serve_poller *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->session = session;
    p->wake = wake;
    p->user = user;
    atomic_init(&p->stop, false);
    pthread_mutex_init(&p->lock, NULL);
    if (pthread_create(&p->thread, NULL, poll_loop, p)) {
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
    }
    return p;
}

vh_serve_answer *vh_serve_poller_take(vh_serve_poller *p)
{
    pthread_mutex_lock(&p->lock);
    vh_serve_answer *list = p->head;
    p->head = p->tail = NULL;
    pthread_mutex_unlock(&p->lock);
    return list;
}

void vh_serve_poller_stop(vh_serve_poller *p)
{
    if (!p) return;
    atomic_store(&p->stop, true);
    pthread_join(p->thread, NULL);
    for (vh_serve_answer *a = vh_serve_poller_take(p), *next; a; a = next) {
        next = a->next;
        free(a);
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}
