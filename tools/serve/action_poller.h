/* The one thread that polls the session and hands each answer to the network loop.
 *
 * The library answers frames in submission order through vh_poll_action, whichever client sent
 * them; every frame's vh_frame.tag names its client. The poller copies each answer into a mailbox
 * and calls `wake` (libwebsockets' lws_cancel_service, the one call that is safe from another
 * thread); the loop then takes the mailbox's contents and routes each answer by its tag. The
 * poller never touches a connection, so a client may disconnect at any moment: its answer just
 * finds nobody and is dropped.
 */
#ifndef VH_SERVE_ACTION_POLLER_H
#define VH_SERVE_ACTION_POLLER_H

#include <stdint.h>

#include "vlahybrid/vlahybrid.h"

/* One answered frame, what the loop needs of a vh_action. */
typedef struct vh_serve_answer {
    struct vh_serve_answer *next;
    uint64_t tag;              /* the client's id */
    uint64_t frame_id;
    vh_status status;          /* VH_OK: values are set */
    uint32_t action_dim;
    double values[VH_MAX_ACTION_DIM];
    int64_t submitted_ns, started_ns, finished_ns;
    char error[256];           /* status != VH_OK: the session's message */
} vh_serve_answer;

typedef struct vh_serve_poller vh_serve_poller;

/* Start polling `session`; wake(user) is called (from the poller thread) after each answer is
 * posted. Returns NULL when the thread cannot be started. */
vh_serve_poller *vh_serve_poller_start(vh_session *session, void (*wake)(void *user), void *user);

/* Everything posted so far, oldest first, as a list the caller owns (free each with free()); NULL
 * when there is nothing. Thread-safe. */
vh_serve_answer *vh_serve_poller_take(vh_serve_poller *poller);

/* Stop and join the thread; answers never taken are freed. NULL is accepted. */
void vh_serve_poller_stop(vh_serve_poller *poller);

#endif
