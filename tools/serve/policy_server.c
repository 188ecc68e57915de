/* The openpi websocket protocol on libwebsockets (openpi's src/openpi/serving/websocket_policy_server.py
 * is the reference; doc/serving.md describes what is implemented):
 *
 *   connect      -> the server sends the metadata dict (msgpack, binary)
 *   observation  -> the action dict (msgpack, binary)
 *   any failure  -> a text message saying what went wrong, then close code 1011, this client only
 *   GET /healthz -> 200 "OK\n"
 *
 * Everything here runs on the event loop's thread, except the poller (action_poller.c), which only
 * posts answers and wakes the loop. Each client has at most one observation in the session: its
 * socket is not read (rx flow control) from the moment a frame is submitted until the answer has
 * left for the kernel, so a client that stops reading stops costing anything and, after
 * write_timeout_s with its answer stuck, is dropped. Many clients still fill the session: one
 * frame each, packed or pipelined as the session's mode says.
 */
#include "policy_server.h"

#include <libwebsockets.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include "action_poller.h"

/* Messages a client may have waiting to be written: the metadata, one answer, an error. More
 * means something is wrong with it; it is dropped. */
#define MAX_QUEUED_MESSAGES 4
/* A receive buffer larger than this is released after its message. */
#define KEEP_RX_BYTES ((size_t)4 << 20)
/* libwebsockets hands received data over in pieces of this size. */
#define RX_CHUNK_BYTES 65536

typedef struct out_message {
    struct out_message *next;
    uint8_t *buf;         /* LWS_PRE bytes of headroom, then the payload */
    size_t len;           /* payload bytes */
    int text;             /* a text message (errors), else binary */
    int answer;           /* an action: its writing ends the request's round trip */
} out_message;

/* One websocket connection: libwebsockets' per-session data (zeroed by it). */
typedef struct client {
    struct client *prev, *next;  /* the server's list of clients */
    struct lws *wsi;
    uint64_t id;                 /* the tag of its frames; never reused */
    int registered;
    char peer[64];
    /* the message being received */
    uint8_t *rx;
    size_t rx_len, rx_cap;
    int rx_text;                 /* it started as a text message */
    int rx_complete;             /* a whole observation waits for the previous answer */
    int64_t request_start_ns;    /* its first byte */
    /* the frame in the session */
    int in_flight;
    uint64_t frame_id;
    double prev_total_ms;        /* the previous request's round trip; < 0: none yet */
    int64_t answered_start_ns;   /* the answered request's first byte */
    /* what waits to be written */
    out_message *out_head, *out_tail;
    int out_count;
    int closing;                 /* close with 1011 once the queue is written */
    /* GET /healthz on a plain HTTP connection */
    int http_healthz;
} client;

struct vh_policy_server {
    vh_session *session;         /* policy.session, once running */
    vh_serve_policy policy;
    vh_serve_config cfg;
    struct lws_context *context;
    struct lws_protocols protocols[2];
    vh_serve_poller *poller;
    atomic_bool stop;
    int port;
    client *clients;             /* registered connections */
    uint32_t n_clients;
    uint64_t next_id;
    uint64_t answers_dropped;    /* answers whose client had gone */
};

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static vh_policy_server *server_of(struct lws *wsi)
{
    return lws_context_user(lws_get_context(wsi));
}

/* ------------------------------------------------------------------------------------------------
 * The output queue.
 */
static void free_queue(client *c)
{
    for (out_message *m = c->out_head, *next; m; m = next) {
        next = m->next;
        free(m->buf);
        free(m);
    }
    c->out_head = c->out_tail = NULL;
    c->out_count = 0;
}

/* Queue `buf` (LWS_PRE headroom + len bytes, taken over) for writing. */
static int enqueue(vh_policy_server *s, client *c, uint8_t *buf, size_t len, int text, int answer)
{
    out_message *m = calloc(1, sizeof *m);
    if (!m || c->out_count >= MAX_QUEUED_MESSAGES) {
        free(m);
        free(buf);
        fprintf(stderr, "vh-serve: client %llu (%s): %s; dropping it\n", (unsigned long long)c->id, c->peer,
                m ? "too many messages waiting to be written" : "out of memory");
        lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
        return -1;
    }
    m->buf = buf;
    m->len = len;
    m->text = text;
    m->answer = answer;
    if (c->out_tail) c->out_tail->next = m;
    else c->out_head = m;
    c->out_tail = m;
    c->out_count++;
    /* the client must take what we write within the timeout; cleared once the queue is flushed */
    lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK, (int)s->cfg.write_timeout_s);
    lws_callback_on_writable(c->wsi);
    return 0;
}

static int enqueue_copy(vh_policy_server *s, client *c, const uint8_t *payload, size_t len, int text)
{
    uint8_t *buf = malloc(LWS_PRE + len + 1);
    if (!buf) {
        fprintf(stderr, "vh-serve: client %llu (%s): out of memory; dropping it\n", (unsigned long long)c->id, c->peer);
        lws_set_timeout(c->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
        return -1;
    }
    memcpy(buf + LWS_PRE, payload, len);
    return enqueue(s, c, buf, len, text, 0);
}

/* Tell the client what went wrong (a text message, as openpi sends its traceback) and close it with
 * 1011 once that is written. Nothing more is read from it. */
static void fail_client(vh_policy_server *s, client *c, const char *fmt, ...)
{
    if (c->closing) return;
    char text[1024];
    int n = snprintf(text, sizeof text, "vh-serve: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text + n, sizeof text - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "vh-serve: client %llu (%s): %s\n", (unsigned long long)c->id, c->peer, text + n);
    c->closing = 1;
    lws_rx_flow_control(c->wsi, 0);
    enqueue_copy(s, c, (const uint8_t *)text, strlen(text), 1);
}

/* ------------------------------------------------------------------------------------------------
 * Requests.
 */
static void release_rx(client *c)
{
    c->rx_len = 0;
    c->rx_complete = 0;
    if (c->rx_cap > KEEP_RX_BYTES) {
        free(c->rx);
        c->rx = NULL;
        c->rx_cap = 0;
    }
}

/* A whole observation has arrived: decode it and submit its frame. */
static void submit_observation(vh_policy_server *s, client *c)
{
    vh_openpi_observation obs;
    char why[512];
    if (vh_openpi_decode_observation(c->rx, c->rx_len, &s->cfg.keys, &obs, why, sizeof why)) {
        release_rx(c);
        fail_client(s, c, "bad observation: %s", why);
        return;
    }
    vh_frame frame;
    vh_frame_init(&frame);
    frame.rgb = obs.rgb;
    frame.width = obs.width;
    frame.height = obs.height;
    frame.instruction = obs.prompt;
    frame.unnorm_key = obs.unnorm_key; /* NULL: the session's (--unnorm-key); the library checks it */
    frame.tag = c->id;
    frame.timestamp_ns = c->request_start_ns;
    uint64_t id = 0;
    vh_status st = vh_submit_frame(s->session, &frame, &id); /* copies the image and the prompt */
    vh_openpi_observation_free(&obs);
    c->answered_start_ns = c->request_start_ns;
    release_rx(c);
    if (st != VH_OK) {
        fail_client(s, c, "the session refused the frame: %s: %s", vh_status_string(st),
                    vh_session_last_error(s->session));
        return;
    }
    c->in_flight = 1;
    c->frame_id = id;
    /* one frame per client in the session: read nothing more until its answer is written */
    lws_rx_flow_control(c->wsi, 0);
}

static void receive(vh_policy_server *s, client *c, const uint8_t *data, size_t len)
{
    if (c->closing) return;
    if (lws_is_first_fragment(c->wsi)) {
        if (c->rx_complete) {
            fail_client(s, c, "a second observation arrived before the first was answered");
            return;
        }
        c->rx_len = 0;
        c->rx_text = !lws_frame_is_binary(c->wsi);
        c->request_start_ns = now_ns();
    }
    /* this piece, plus what the frame header still announces, against the limit */
    const uint64_t announced = (uint64_t)c->rx_len + len + lws_remaining_packet_payload(c->wsi);
    if (announced > s->cfg.max_message_bytes) {
        release_rx(c);
        fail_client(s, c, "a message of at least %llu bytes is over the limit of %llu (vh-serve --max-message-mb)",
                    (unsigned long long)announced, (unsigned long long)s->cfg.max_message_bytes);
        return;
    }
    if (announced > c->rx_cap) {
        size_t cap = c->rx_cap ? c->rx_cap : RX_CHUNK_BYTES;
        while (cap < announced) cap *= 2;
        if (cap > s->cfg.max_message_bytes) cap = (size_t)s->cfg.max_message_bytes;
        uint8_t *grown = realloc(c->rx, cap);
        if (!grown) {
            release_rx(c);
            fail_client(s, c, "out of memory receiving a message of %llu bytes", (unsigned long long)announced);
            return;
        }
        c->rx = grown;
        c->rx_cap = cap;
    }
    if (len) memcpy(c->rx + c->rx_len, data, len);
    c->rx_len += len;
    if (!lws_is_final_fragment(c->wsi) || lws_remaining_packet_payload(c->wsi)) return;

    if (c->rx_text) {
        release_rx(c);
        fail_client(s, c, "observations are binary msgpack messages; a text message arrived");
        return;
    }
    if (c->in_flight) {
        /* the socket had it buffered before flow control applied: it waits its turn */
        c->rx_complete = 1;
        lws_rx_flow_control(c->wsi, 0);
        return;
    }
    submit_observation(s, c);
}

/* ------------------------------------------------------------------------------------------------
 * Answers, from the poller.
 */
static client *find_client(vh_policy_server *s, uint64_t id)
{
    for (client *c = s->clients; c; c = c->next)
        if (c->id == id) return c;
    return NULL;
}

static void deliver(vh_policy_server *s, const vh_serve_answer *a)
{
    client *c = find_client(s, a->tag);
    if (!c || !c->in_flight || c->frame_id != a->frame_id) {
        s->answers_dropped++; /* the client went away while its frame ran */
        return;
    }
    c->in_flight = 0;
    if (c->closing) return;
    if (a->status != VH_OK) {
        fail_client(s, c, "frame %llu failed: %s", (unsigned long long)a->frame_id, a->error);
        return;
    }
    vh_openpi_buffer out = {.headroom = LWS_PRE};
    const vh_openpi_action action = {
        .values = a->values,
        .action_dim = a->action_dim,
        .as_float32 = s->cfg.actions_float32,
        .infer_ms = (double)(a->finished_ns - a->submitted_ns) / 1e6,
        .compute_ms = (double)(a->finished_ns - a->started_ns) / 1e6,
        .prev_total_ms = c->prev_total_ms,
    };
    if (vh_openpi_encode_action(&action, &out)) {
        vh_openpi_buffer_free(&out);
        fail_client(s, c, "out of memory encoding an action");
        return;
    }
    enqueue(s, c, out.data, out.size - LWS_PRE, 0, 1);
}

static void deliver_posted(vh_policy_server *s)
{
    if (!s->poller) return; /* being destroyed */
    for (vh_serve_answer *a = vh_serve_poller_take(s->poller), *next; a; a = next) {
        next = a->next;
        deliver(s, a);
        free(a);
    }
}

static void wake_loop(void *user)
{
    lws_cancel_service(user);
}

/* ------------------------------------------------------------------------------------------------
 * Writing.
 */
static int write_next(vh_policy_server *s, client *c)
{
    out_message *m = c->out_head;
    if (!m) {
        if (c->closing) goto close;
        /* the queue is written and libwebsockets holds nothing back: the client keeps up */
        lws_set_timeout(c->wsi, NO_PENDING_TIMEOUT, 0);
        if (!c->in_flight) {
            if (c->rx_complete) submit_observation(s, c);
            else lws_rx_flow_control(c->wsi, 1);
        }
        return 0;
    }
    const int n = lws_write(c->wsi, m->buf + LWS_PRE, m->len, m->text ? LWS_WRITE_TEXT : LWS_WRITE_BINARY);
    if (n < 0 || (size_t)n < m->len) return -1; /* the connection failed */
    if (m->answer) c->prev_total_ms = (double)(now_ns() - c->answered_start_ns) / 1e6;
    c->out_head = m->next;
    if (!c->out_head) c->out_tail = NULL;
    c->out_count--;
    free(m->buf);
    free(m);
    if (c->closing && !c->out_head) goto close;
    /* one write per callback; the next one comes when this one has left (or there is more) */
    lws_callback_on_writable(c->wsi);
    return 0;
close: {
        static const char reason[] = "vh-serve error; the message is in the previous frame";
        lws_close_reason(c->wsi, LWS_CLOSE_STATUS_UNEXPECTED_CONDITION, (unsigned char *)reason, sizeof reason - 1);
        return -1;
    }
}

/* ------------------------------------------------------------------------------------------------
 * Connections.
 */
/* "127.0.0.1:50312", "[::1]:50312": the address and port, so that log lines name one connection. */
static void describe_peer(int fd, char *out, size_t size)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    snprintf(out, size, "unknown peer");
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&sa, &len)) return;
    if (sa.ss_family == AF_INET) {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)&sa;
        inet_ntop(AF_INET, &in4->sin_addr, host, sizeof host);
        port = ntohs(in4->sin_port);
        snprintf(out, size, "%s:%u", host, port);
    } else if (sa.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&sa;
        port = ntohs(in6->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) { /* an IPv4 client of a dual-stack socket */
            inet_ntop(AF_INET, &in6->sin6_addr.s6_addr[12], host, sizeof host);
            snprintf(out, size, "%s:%u", host, port);
        } else {
            inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
            snprintf(out, size, "[%s]:%u", host, port);
        }
    }
}

static void client_opened(vh_policy_server *s, client *c, struct lws *wsi)
{
    memset(c, 0, sizeof *c);
    c->wsi = wsi;
    c->id = ++s->next_id;
    c->prev_total_ms = -1;
    describe_peer(lws_get_socket_fd(wsi), c->peer, sizeof c->peer);
    if (s->cfg.socket_send_buffer > 0) {
        int fd = lws_get_socket_fd(wsi);
        if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &s->cfg.socket_send_buffer, sizeof s->cfg.socket_send_buffer);
    }
    if (s->n_clients >= s->cfg.max_clients) {
        fail_client(s, c, "the server already has %u clients (vh-serve --max-clients)", s->cfg.max_clients);
        return;
    }
    c->registered = 1;
    c->next = s->clients;
    if (s->clients) s->clients->prev = c;
    s->clients = c;
    s->n_clients++;
    if (s->cfg.verbose) fprintf(stderr, "vh-serve: client %llu (%s) connected\n", (unsigned long long)c->id, c->peer);
    const vh_openpi_buffer *meta = s->policy.metadata;
    enqueue_copy(s, c, meta->data + meta->headroom, meta->size - meta->headroom, 0);
}

static void client_closed(vh_policy_server *s, client *c)
{
    if (c->registered) {
        if (c->prev) c->prev->next = c->next;
        else s->clients = c->next;
        if (c->next) c->next->prev = c->prev;
        s->n_clients--;
        c->registered = 0;
    }
    /* a frame not yet started is cancelled; one running finishes and its answer is dropped */
    if (c->in_flight) (void)vh_session_cancel(s->session, c->frame_id);
    if (s->cfg.verbose)
        fprintf(stderr, "vh-serve: client %llu (%s) closed%s\n", (unsigned long long)c->id, c->peer,
                c->in_flight ? " with a frame in flight" : "");
    free(c->rx);
    c->rx = NULL;
    c->rx_cap = c->rx_len = 0;
    free_queue(c);
}

static int serve_healthz(struct lws *wsi, client *c, const char *path)
{
    uint8_t buf[LWS_PRE + 512], *start = buf + LWS_PRE, *p = start, *end = buf + sizeof buf;
    if (strcmp(path, "/healthz")) {
        lws_return_http_status(wsi, HTTP_STATUS_NOT_FOUND,
                               "vh-serve speaks openpi's websocket protocol; GET /healthz for its health");
        return lws_http_transaction_completed(wsi) ? -1 : 0;
    }
    if (lws_add_http_common_headers(wsi, HTTP_STATUS_OK, "text/plain", 3, &p, end) ||
        lws_finalize_write_http_header(wsi, start, &p, end))
        return -1;
    c->http_healthz = 1;
    lws_callback_on_writable(wsi);
    return 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in, size_t len)
{
    vh_policy_server *s = server_of(wsi);
    client *c = user;
    switch (reason) {
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED: /* the poller posted answers (or stop was asked) */
        if (s) deliver_posted(s);
        return 0;
    case LWS_CALLBACK_HTTP:
        return serve_healthz(wsi, c, in ? (const char *)in : "");
    case LWS_CALLBACK_HTTP_WRITEABLE: {
        if (!c || !c->http_healthz) break;
        uint8_t body[LWS_PRE + 3];
        memcpy(body + LWS_PRE, "OK\n", 3);
        if (lws_write(wsi, body + LWS_PRE, 3, LWS_WRITE_HTTP_FINAL) != 3) return -1;
        return lws_http_transaction_completed(wsi) ? -1 : 0;
    }
    case LWS_CALLBACK_ESTABLISHED:
        client_opened(s, c, wsi);
        return 0;
    case LWS_CALLBACK_RECEIVE:
        receive(s, c, in, len);
        return 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return write_next(s, c);
    case LWS_CALLBACK_CLOSED:
        client_closed(s, c);
        return 0;
    default:
        break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

/* ------------------------------------------------------------------------------------------------
 * The server.
 */
vh_policy_server *vh_policy_server_create(const vh_serve_config *cfg)
{
    vh_policy_server *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->cfg = *cfg;
    atomic_init(&s->stop, false);
    /* one protocol, the first: it gets the plain HTTP requests and the websockets that name none */
    s->protocols[0] = (struct lws_protocols){
        .name = "openpi",
        .callback = callback,
        .per_session_data_size = sizeof(client),
        .rx_buffer_size = RX_CHUNK_BYTES,
    };
    lws_set_log_level(cfg->verbose ? LLL_ERR | LLL_WARN | LLL_NOTICE : LLL_ERR, NULL);

    struct lws_context_creation_info info;
    memset(&info, 0, sizeof info);
    info.port = cfg->port;
    info.iface = cfg->host && *cfg->host ? cfg->host : NULL;
    info.protocols = s->protocols;
    info.user = s;
    s->context = lws_create_context(&info);
    if (!s->context) {
        fprintf(stderr, "vh-serve: cannot listen on %s:%d (in use, or an address this machine lacks)\n",
                info.iface ? info.iface : "*", cfg->port);
        free(s);
        return NULL;
    }
    s->port = lws_get_vhost_listen_port(lws_get_vhost_by_name(s->context, "default"));
    return s;
}

int vh_policy_server_port(const vh_policy_server *s)
{
    return s->port;
}

int vh_policy_server_run(vh_policy_server *s, const vh_serve_policy *policy)
{
    s->policy = *policy;
    s->session = policy->session;
    s->poller = vh_serve_poller_start(s->session, wake_loop, s->context);
    if (!s->poller) {
        fprintf(stderr, "vh-serve: cannot start the poller thread\n");
        return -1;
    }
    while (!atomic_load(&s->stop))
        if (lws_service(s->context, 0) < 0) return -1;
    return 0;
}

void vh_policy_server_stop(vh_policy_server *s)
{
    atomic_store(&s->stop, true);
    lws_cancel_service(s->context);
}

void vh_policy_server_destroy(vh_policy_server *s)
{
    if (!s) return;
    /* the poller first: it wakes the context, which must still exist */
    if (s->poller) vh_serve_poller_stop(s->poller);
    s->poller = NULL;
    lws_context_destroy(s->context); /* closes every connection (client_closed for each) */
    if (s->cfg.verbose && s->answers_dropped)
        fprintf(stderr, "vh-serve: %llu answers dropped (their clients had gone)\n",
                (unsigned long long)s->answers_dropped);
    free(s);
}
