/* vh_session_shutdown (include/vlahybrid/vlahybrid.h) on the bundled tiny model with cpu_generic:
 *   - threads blocked in vh_submit_frame (VH_QUEUE_BLOCK, queue full) and in vh_poll_action(-1)
 *     are woken and return VH_ERR_SHUTDOWN, before the frame in flight has finished;
 *   - shutdown returns once the frame in flight is answered; every accepted frame is answered
 *     exactly once (the statistics add up: the one started ran to its end, the others
 *     VH_ERR_CANCELLED), nothing is left pending or running;
 *   - every later call but the getters returns VH_ERR_SHUTDOWN at once, a poll(-1) included;
 *   - shutdown again, from several threads at once, then destroy; a session with frames computing
 *     in a pipeline; NULL.
 * The sanitizer jobs (scripts/check-sanitizers.sh) run it under ASan (leaks) and TSan.
 *
 * A frame is held in flight deterministically by the log callback: the worker logs the failure of
 * a frame whose instruction does not fit the context from its own thread, and the callback blocks
 * there until the test releases it. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#define MODEL_DIR "models/openvla-tiny"
#define WAIT_MS 60000
#define PROMPT_MS 2000 /* "at once": far below a frame's compute under the sanitizers */

static char *model_dir;

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

/* The log callback: holds the worker in its report of a failed frame until released. */
typedef struct staller {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int armed, stalled, release;
} staller;

static void stall_log(void *user, vh_log_level level, const char *message)
{
    staller *c = user;
    if (level != VH_LOG_ERROR || strncmp(message, "frame ", 6)) return;
    pthread_mutex_lock(&c->lock);
    if (c->armed) {
        c->armed = 0;
        c->stalled = 1;
        pthread_cond_broadcast(&c->cond);
        while (!c->release) pthread_cond_wait(&c->cond, &c->lock);
    }
    pthread_mutex_unlock(&c->lock);
}

static void release(staller *c)
{
    pthread_mutex_lock(&c->lock);
    c->release = 1;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

static uint8_t rgb[24 * 16 * 3];

static void fill_rgb(void)
{
    for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)(i * 31 + 7);
}

static void small_frame(vh_frame *f, const char *instruction)
{
    static pthread_once_t filled = PTHREAD_ONCE_INIT; /* submitting threads call this at once */
    pthread_once(&filled, fill_rgb);
    vh_frame_init(f);
    f->rgb = rgb;
    f->width = 24;
    f->height = 16;
    f->instruction = instruction;
}

static vh_session *open_session(uint32_t capacity, const char *backends, staller *c)
{
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model_dir;
    p.backends = backends;
    p.n_threads = 1;
    p.queue_capacity = capacity;
    p.queue_policy = VH_QUEUE_BLOCK;
    if (c) {
        p.log_fn = stall_log;
        p.log_user = c;
    }
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    return s;
}

/* A frame that fails after its vision pass (8192 bytes of "a a a": far beyond the context). */
static uint64_t submit_staller(vh_session *s, staller *c)
{
    static char text[8193];
    for (size_t i = 0; i < 8192; i++) text[i] = i % 2 ? ' ' : 'a';
    pthread_mutex_lock(&c->lock);
    c->armed = 1;
    pthread_mutex_unlock(&c->lock);
    vh_frame f;
    small_frame(&f, text);
    uint64_t id = 0;
    ck_assert_int_eq(vh_submit_frame(s, &f, &id), VH_OK);
    pthread_mutex_lock(&c->lock);
    while (!c->stalled) pthread_cond_wait(&c->cond, &c->lock);
    pthread_mutex_unlock(&c->lock);
    return id;
}

/* A call made in a thread of its own: what it returned, and when. */
typedef struct call {
    vh_session *s;
    int kind; /* 0: submit, 1: poll(-1), 2: shutdown */
    vh_status status;
    atomic_int done;
    int64_t returned_ms;
    pthread_t thread;
} call;

static void *run_call(void *arg)
{
    call *c = arg;
    if (c->kind == 0) {
        vh_frame f;
        small_frame(&f, "pick up the red block");
        c->status = vh_submit_frame(c->s, &f, NULL);
    } else if (c->kind == 1) {
        vh_action a;
        vh_action_init(&a);
        c->status = vh_poll_action(c->s, &a, -1);
    } else {
        c->status = vh_session_shutdown(c->s);
    }
    c->returned_ms = now_ms();
    atomic_store(&c->done, 1);
    return NULL;
}

static void start_call(call *c, vh_session *s, int kind)
{
    c->s = s;
    c->kind = kind;
    atomic_init(&c->done, 0);
    ck_assert_int_eq(pthread_create(&c->thread, NULL, run_call, c), 0);
}

static int wait_done(call *c, int ms)
{
    for (int64_t until = now_ms() + ms; !atomic_load(&c->done) && now_ms() < until;) sleep_ms(2);
    return atomic_load(&c->done);
}

/* Every call that shutdown refuses returns VH_ERR_SHUTDOWN at once, with the message. */
static void expect_refused(vh_session *s)
{
    vh_frame f;
    small_frame(&f, "pick up the red block");
    vh_action a;
    vh_action_init(&a);
    uint32_t n = 99;
    int32_t ids[8];
    size_t count;
    const int64_t t0 = now_ms();
    ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_ERR_SHUTDOWN);
    ck_assert_msg(strstr(vh_last_error(), "shut down"), "%s", vh_last_error());
    ck_assert_int_eq(vh_poll_action(s, &a, -1), VH_ERR_SHUTDOWN);
    ck_assert_int_eq(vh_poll_action(s, &a, 0), VH_ERR_SHUTDOWN);
    ck_assert_int_eq(vh_session_cancel(s, 1), VH_ERR_SHUTDOWN);
    ck_assert_int_eq(vh_session_cancel_pending(s, &n), VH_ERR_SHUTDOWN);
    ck_assert_uint_eq(n, 99); /* untouched */
    ck_assert_int_eq(vh_session_reset(s, 0), VH_ERR_SHUTDOWN);
    ck_assert_int_eq(vh_session_prompt_ids(s, "x", ids, 8, &count), VH_ERR_SHUTDOWN);
    /* checked right after the NULL session, before any other argument */
    ck_assert_int_eq(vh_submit_frame(s, NULL, NULL), VH_ERR_SHUTDOWN);
    ck_assert_int_eq(vh_poll_action(s, NULL, 0), VH_ERR_SHUTDOWN);
    ck_assert_int_eq(vh_session_reset(s, 99), VH_ERR_SHUTDOWN);
    ck_assert_int_eq(vh_submit_frame(NULL, NULL, NULL), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_lt(now_ms() - t0, PROMPT_MS);
    ck_assert_msg(strstr(vh_session_last_error(s), "shut down"), "%s", vh_session_last_error(s));
    /* the getters still answer */
    vh_session_info info;
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
    ck_assert_uint_eq(info.action_dim, 7);
}

static vh_session_stats stats_of(vh_session *s)
{
    vh_session_stats st;
    vh_session_stats_init(&st);
    ck_assert_int_eq(vh_session_get_stats(s, &st), VH_OK);
    return st;
}

START_TEST(test_wakes_blocked_submit_and_poll)
{
    staller c = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    vh_session *s = open_session(1, "cpu_generic", &c);
    ck_assert_uint_eq(submit_staller(s, &c), 1); /* running, held */
    vh_frame f;
    small_frame(&f, "pick up the red block");
    ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_OK); /* pending: the queue (capacity 1) is full */

    call submitters[2], poller, shutdown;
    for (int i = 0; i < 2; i++) start_call(&submitters[i], s, 0);
    start_call(&poller, s, 1);
    sleep_ms(200);
    for (int i = 0; i < 2; i++) ck_assert_msg(!atomic_load(&submitters[i].done), "submit did not block");
    ck_assert_msg(!atomic_load(&poller.done), "poll(-1) did not block");

    start_call(&shutdown, s, 2);
    /* the blocked calls return while the frame in flight is still held: shutdown wakes first */
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(wait_done(&submitters[i], WAIT_MS), "a blocked submit was not woken");
        ck_assert_int_eq(submitters[i].status, VH_ERR_SHUTDOWN);
    }
    ck_assert_msg(wait_done(&poller, WAIT_MS), "a blocked poll was not woken");
    ck_assert_int_eq(poller.status, VH_ERR_SHUTDOWN);
    sleep_ms(100);
    ck_assert_msg(!atomic_load(&shutdown.done), "shutdown returned before the frame in flight was answered");
    expect_refused(s); /* refused already while shutdown waits */

    const int64_t released_ms = now_ms();
    release(&c);
    ck_assert(wait_done(&shutdown, WAIT_MS));
    ck_assert_int_eq(shutdown.status, VH_OK);
    ck_assert_int_ge(shutdown.returned_ms, released_ms);
    for (int i = 0; i < 2; i++) pthread_join(submitters[i].thread, NULL);
    pthread_join(poller.thread, NULL);
    pthread_join(shutdown.thread, NULL);

    /* every accepted frame answered once: 1 ran to its end (its error), 2 cancelled */
    vh_session_stats st = stats_of(s);
    ck_assert_uint_eq(st.submitted, 2);
    ck_assert_uint_eq(st.failed, 1);
    ck_assert_uint_eq(st.cancelled, 1);
    ck_assert_uint_eq(st.completed, 0);
    ck_assert_uint_eq(st.pending, 0);
    ck_assert_uint_eq(st.running, 0);
    ck_assert_uint_eq(st.unpolled, 2);

    expect_refused(s);
    ck_assert_int_eq(vh_session_shutdown(s), VH_OK); /* again */
    vh_session_destroy(s);
}
END_TEST

/* Frames computing in a two-stage pipeline and waiting: after shutdown each accepted frame was
 * answered once, nothing is pending or running, and the ones that started ran to an action. */
START_TEST(test_frames_in_flight_are_answered)
{
    for (int round = 0; round < 3; round++) {
        vh_session *s = open_session(4, "cpu_generic,cpu_generic", NULL);
        vh_frame f;
        small_frame(&f, "pick up the red block");
        const int n = 2 + round * 3;
        for (int i = 0; i < n; i++) ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_OK);
        if (round == 1) sleep_ms(50);
        ck_assert_int_eq(vh_session_shutdown(s), VH_OK);
        vh_session_stats st = stats_of(s);
        ck_assert_uint_eq(st.submitted, (uint64_t)n);
        ck_assert_uint_eq(st.failed + st.dropped + st.expired, 0);
        ck_assert_uint_eq(st.completed + st.cancelled, (uint64_t)n);
        ck_assert_uint_eq(st.pending + st.running, 0);
        expect_refused(s);
        vh_session_destroy(s);
    }
}
END_TEST

START_TEST(test_idempotent_and_concurrent)
{
    ck_assert_int_eq(vh_session_shutdown(NULL), VH_ERR_INVALID_ARGUMENT);
    vh_session *s = open_session(2, "cpu_generic", NULL);
    call calls[4];
    for (int i = 0; i < 4; i++) start_call(&calls[i], s, 2);
    for (int i = 0; i < 4; i++) {
        pthread_join(calls[i].thread, NULL);
        ck_assert_int_eq(calls[i].status, VH_OK);
    }
    ck_assert_int_eq(vh_session_shutdown(s), VH_OK);
    expect_refused(s);
    vh_session_stats st = stats_of(s);
    ck_assert_uint_eq(st.submitted, 0);
    vh_session_destroy(s);

    /* shutdown then destroy at once, an idle session */
    s = open_session(2, "cpu_generic", NULL);
    ck_assert_int_eq(vh_session_shutdown(s), VH_OK);
    vh_session_destroy(s);
}
END_TEST

int main(void)
{
    model_dir = vh_test_source_path(MODEL_DIR);
    Suite *suite = suite_create("shutdown");
    TCase *tc = tcase_create("shutdown");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_wakes_blocked_submit_and_poll);
    tcase_add_test(tc, test_frames_in_flight_are_answered);
    tcase_add_test(tc, test_idempotent_and_concurrent);
    suite_add_tcase(suite, tc);
    int rc = vh_test_run_suite(suite);
    free(model_dir);
    return rc;
}
