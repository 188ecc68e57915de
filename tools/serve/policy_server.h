/* The openpi websocket policy server on libwebsockets: one event loop (the calling thread) for every
 * connection, HTTP GET /healthz and the websocket on one port, every client's frames through one
 * vh_session (doc/serving.md).
 */
#ifndef VH_SERVE_POLICY_SERVER_H
#define VH_SERVE_POLICY_SERVER_H

#include <stdint.h>

#include "openpi_message.h"
#include "vlahybrid/vlahybrid.h"

typedef struct vh_serve_config {
    const char *host;              /* address to bind; NULL: every interface */
    int port;                      /* 0: the kernel picks one (vh_policy_server_port says which) */
    uint64_t max_message_bytes;    /* larger observations are refused (error text, close 1011) */
    uint32_t max_clients;          /* connections served at once; more are refused */
    uint32_t write_timeout_s;      /* a client whose answer cannot be written for this long is dropped */
    int socket_send_buffer;        /* SO_SNDBUF of each connection in bytes; 0: the system's (autotuned) */
    vh_openpi_keys keys;
    int actions_float32;           /* "actions" as <f4 instead of <f8 */
    int verbose;                   /* a line on stderr per connection */
} vh_serve_config;

/* What the server serves, known once the session is made. */
typedef struct vh_serve_policy {
    vh_session *session;
    const char *unnorm_key;        /* the session's dataset: what a request without its own uses */
    const vh_openpi_buffer *metadata; /* sent to every client on connect (headroom LWS_PRE) */
} vh_serve_policy;

typedef struct vh_policy_server vh_policy_server;

/* Bind and listen, before the model is loaded, so that a port in use fails in a moment rather than
 * after minutes of loading; clients that connect meanwhile wait in the kernel's backlog. Returns
 * NULL with a message on stderr when the port cannot be opened. */
vh_policy_server *vh_policy_server_create(const vh_serve_config *config);

/* The port listened on (the kernel's choice when config->port was 0). */
int vh_policy_server_port(const vh_policy_server *server);

/* Serve `policy` until vh_policy_server_stop; returns 0, or -1 when the event loop or the poller
 * thread failed. The session must outlive the server. */
int vh_policy_server_run(vh_policy_server *server, const vh_serve_policy *policy);

/* Make vh_policy_server_run return soon. Safe from any thread (a signal-handling thread). */
void vh_policy_server_stop(vh_policy_server *server);

/* Close every connection (frames in flight are cancelled or their answers dropped) and free the
 * server. NULL is accepted. */
void vh_policy_server_destroy(vh_policy_server *server);

#endif
