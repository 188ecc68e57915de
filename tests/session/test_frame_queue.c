/* The session's frame queue: one result per accepted frame, in submission order, whatever the
 * policy does to each frame (run, dropped, cancelled), with several threads at once. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "queue/frame_queue.h"
#include "test_support.h"
#include "util/clock.h"

static vh_frame_record *new_record(uint64_t tag)
{
    vh_frame_record *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    r->rgb = malloc(3);
    r->instruction = strdup("x");
    vh_action_init(&r->result);
    r->result.tag = tag;
    return r;
}

static uint64_t submit(vh_frame_queue *q, uint64_t tag, vh_status want)
{
    vh_frame_record *r = new_record(tag);
    vh_error err;
    uint64_t id = 0;
    vh_status st = vh_frame_queue_submit(q, r, &id, &err);
    ck_assert_int_eq(st, want);
    if (st) vh_frame_record_free(r);
    return id;
}

static void expect_result(vh_frame_queue *q, uint64_t id, vh_status status)
{
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_frame_queue_poll(q, &a, sizeof a, 1000), VH_OK);
    ck_assert_uint_eq(a.frame_id, id);
    ck_assert_int_eq(a.status, status);
    ck_assert_uint_eq(a.struct_size, sizeof a);
}

static void run_one(vh_frame_queue *q)
{
    vh_frame_record *r = vh_frame_queue_take(q);
    ck_assert_ptr_nonnull(r);
    ck_assert_ptr_nonnull(r->rgb);
    r->result.status = VH_OK;
    vh_frame_queue_finish(q, r);
}

START_TEST(test_fifo_ids_and_timeout)
{
    vh_frame_queue q;
    vh_error err;
    ck_assert_int_eq(vh_frame_queue_init(&q, 4, VH_QUEUE_REJECT, &err), VH_OK);
    vh_action a;
    vh_action_init(&a);
    int64_t t0 = vh_now_ns();
    ck_assert_int_eq(vh_frame_queue_poll(&q, &a, sizeof a, 50), VH_ERR_TIMEOUT);
    ck_assert_int_ge(vh_now_ns() - t0, 45 * 1000000);
    ck_assert_int_eq(vh_frame_queue_poll(&q, &a, sizeof a, 0), VH_ERR_TIMEOUT);
    ck_assert_uint_eq(submit(&q, 10, VH_OK), 1);
    ck_assert_uint_eq(submit(&q, 11, VH_OK), 2);
    ck_assert_int_eq(vh_frame_queue_poll(&q, &a, sizeof a, 0), VH_ERR_TIMEOUT); /* not run yet */
    run_one(&q);
    run_one(&q);
    expect_result(&q, 1, VH_OK);
    expect_result(&q, 2, VH_OK);
    vh_frame_queue_destroy(&q);
}
END_TEST

START_TEST(test_drop_oldest_answers_in_order)
{
    vh_frame_queue q;
    vh_error err;
    ck_assert_int_eq(vh_frame_queue_init(&q, 2, VH_QUEUE_DROP_OLDEST, &err), VH_OK);
    submit(&q, 0, VH_OK);                        /* 1 */
    vh_frame_record *running = vh_frame_queue_take(&q); /* 1 starts */
    submit(&q, 0, VH_OK);                        /* 2 */
    submit(&q, 0, VH_OK);                        /* 3 */
    submit(&q, 0, VH_OK);                        /* 4 displaces 2 */
    submit(&q, 0, VH_OK);                        /* 5 displaces 3 */
    /* 2 and 3 are answered, but not before 1, which is still running */
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_frame_queue_poll(&q, &a, sizeof a, 0), VH_ERR_TIMEOUT);
    running->result.status = VH_OK;
    vh_frame_queue_finish(&q, running);
    expect_result(&q, 1, VH_OK);
    expect_result(&q, 2, VH_ERR_DROPPED);
    expect_result(&q, 3, VH_ERR_DROPPED);
    run_one(&q);
    run_one(&q);
    expect_result(&q, 4, VH_OK);
    expect_result(&q, 5, VH_OK);
    vh_frame_queue_destroy(&q);
}
END_TEST

START_TEST(test_reject_when_full)
{
    vh_frame_queue q;
    vh_error err;
    ck_assert_int_eq(vh_frame_queue_init(&q, 1, VH_QUEUE_REJECT, &err), VH_OK);
    ck_assert_uint_eq(submit(&q, 0, VH_OK), 1);
    submit(&q, 0, VH_ERR_BUSY);
    run_one(&q);
    ck_assert_uint_eq(submit(&q, 0, VH_OK), 2); /* a rejected frame takes no id */
    run_one(&q);
    expect_result(&q, 1, VH_OK);
    expect_result(&q, 2, VH_OK);
    vh_frame_queue_destroy(&q);
}
END_TEST

static void *take_later(void *arg)
{
    usleep(100 * 1000);
    run_one(arg);
    return NULL;
}

START_TEST(test_block_waits_for_room)
{
    vh_frame_queue q;
    vh_error err;
    ck_assert_int_eq(vh_frame_queue_init(&q, 1, VH_QUEUE_BLOCK, &err), VH_OK);
    submit(&q, 0, VH_OK);
    pthread_t t;
    pthread_create(&t, NULL, take_later, &q);
    int64_t t0 = vh_now_ns();
    ck_assert_uint_eq(submit(&q, 0, VH_OK), 2);  /* blocks until the other thread takes frame 1 */
    ck_assert_int_ge(vh_now_ns() - t0, 80 * 1000000);
    pthread_join(t, NULL);
    run_one(&q);
    expect_result(&q, 1, VH_OK);
    expect_result(&q, 2, VH_OK);
    vh_frame_queue_destroy(&q);
}
END_TEST

START_TEST(test_close_cancels_pending)
{
    vh_frame_queue q;
    vh_error err;
    ck_assert_int_eq(vh_frame_queue_init(&q, 8, VH_QUEUE_BLOCK, &err), VH_OK);
    submit(&q, 0, VH_OK);
    submit(&q, 0, VH_OK);
    vh_frame_queue_close(&q);
    ck_assert_ptr_null(vh_frame_queue_take(&q));
    expect_result(&q, 1, VH_ERR_CANCELLED);
    expect_result(&q, 2, VH_ERR_CANCELLED);
    submit(&q, 0, VH_ERR_CANCELLED);
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_frame_queue_poll(&q, &a, sizeof a, -1), VH_ERR_TIMEOUT); /* closed and empty: no wait */
    vh_frame_queue_destroy(&q);
}
END_TEST


/* A record whose deadline has passed is answered EXPIRED instead of being started, whether the
 * worker or a poller gets to it first; one within its deadline runs. */
START_TEST(test_deadline_expires_pending_frames)
{
    vh_frame_queue q;
    vh_error err;
    ck_assert_int_eq(vh_frame_queue_init(&q, 8, VH_QUEUE_BLOCK, &err), VH_OK);
    const int64_t now = vh_now_ns();
    vh_frame_record *r = new_record(1);
    r->result.deadline_ns = now - 1; /* already past */
    uint64_t id1, id2, id3;
    ck_assert_int_eq(vh_frame_queue_submit(&q, r, &id1, &err), VH_OK);
    r = new_record(2);
    r->result.deadline_ns = now + 60 * 1000000000ll; /* a minute: runs */
    ck_assert_int_eq(vh_frame_queue_submit(&q, r, &id2, &err), VH_OK);
    r = new_record(3);
    r->result.deadline_ns = vh_now_ns() + 30 * 1000000; /* 30 ms, with nobody taking frames */
    ck_assert_int_eq(vh_frame_queue_submit(&q, r, &id3, &err), VH_OK);

    vh_frame_record *taken = vh_frame_queue_take(&q); /* passes frame 1 (expired), starts 2 */
    ck_assert_uint_eq(taken->result.frame_id, id2);
    expect_result(&q, id1, VH_ERR_EXPIRED);
    taken->result.status = VH_OK;
    vh_frame_queue_finish(&q, taken);
    expect_result(&q, id2, VH_OK);
    /* frame 3 is next in line: a poller waiting for it gets its expiry at its deadline */
    vh_action a;
    vh_action_init(&a);
    /* No timeout: a queue that answered the expiry only when a poll timed out would hang here
     * (and fail by the test's timeout) instead of answering at the deadline. */
    ck_assert_int_eq(vh_frame_queue_poll(&q, &a, sizeof a, -1), VH_OK);
    ck_assert_uint_eq(a.frame_id, id3);
    ck_assert_int_eq(a.status, VH_ERR_EXPIRED);
    ck_assert_int_eq(a.started_ns, 0);
    ck_assert_int_ge(a.finished_ns, a.deadline_ns);

    vh_frame_stats st;
    vh_frame_queue_stats(&q, &st, NULL, NULL, NULL, NULL);
    ck_assert_uint_eq(st.expired, 2);
    ck_assert_uint_eq(st.completed, 1);
    ck_assert_uint_eq(st.submitted, 3);
    vh_frame_queue_destroy(&q);
}
END_TEST

/* Cancel one pending frame (answered in its place), not a started or unknown one; cancel all. */
START_TEST(test_cancel_one_and_all)
{
    vh_frame_queue q;
    vh_error err;
    ck_assert_int_eq(vh_frame_queue_init(&q, 8, VH_QUEUE_BLOCK, &err), VH_OK);
    uint64_t id[5];
    for (int i = 0; i < 5; i++) id[i] = submit(&q, (uint64_t)i, VH_OK);
    vh_frame_record *running = vh_frame_queue_take(&q); /* frame 1 starts */
    ck_assert_int_eq(vh_frame_queue_cancel(&q, id[0], &err), VH_ERR_BUSY);  /* started */
    ck_assert_int_eq(vh_frame_queue_cancel(&q, 99, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_frame_queue_cancel(&q, 0, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_frame_queue_cancel(&q, id[2], &err), VH_OK);       /* the middle one */
    ck_assert_int_eq(vh_frame_queue_cancel(&q, id[2], &err), VH_ERR_BUSY); /* already answered */
    ck_assert_int_eq(vh_frame_queue_cancel(&q, id[1], &err), VH_OK);       /* the first pending */
    run_one(&q);                                                           /* skips 2 and 3: runs 4 */
    ck_assert_uint_eq(vh_frame_queue_cancel_pending(&q), 1);               /* 5 */
    ck_assert_uint_eq(vh_frame_queue_cancel_pending(&q), 0);
    running->result.status = VH_OK;
    vh_frame_queue_finish(&q, running);
    expect_result(&q, id[0], VH_OK);
    expect_result(&q, id[1], VH_ERR_CANCELLED);
    expect_result(&q, id[2], VH_ERR_CANCELLED);
    expect_result(&q, id[3], VH_OK);
    expect_result(&q, id[4], VH_ERR_CANCELLED);
    uint32_t pending, n_running, unpolled;
    vh_frame_stats st;
    vh_frame_queue_stats(&q, &st, &pending, &n_running, &unpolled, NULL);
    ck_assert_uint_eq(st.cancelled, 3);
    ck_assert_uint_eq(st.completed, 2);
    ck_assert_uint_eq(pending + n_running + unpolled, 0);
    /* the queue goes on after cancelling: new frames queue behind nothing */
    uint64_t next = submit(&q, 9, VH_OK);
    run_one(&q);
    expect_result(&q, next, VH_OK);
    vh_frame_queue_destroy(&q);
}
END_TEST

static void *finish_later(void *arg)
{
    vh_frame_record *r = ((void **)arg)[1];
    usleep(50 * 1000);
    r->result.status = VH_OK;
    vh_frame_queue_finish(((void **)arg)[0], r);
    return NULL;
}

/* Reset: pending frames cancelled, the call returns only once the started frame is answered,
 * later frames carry the next episode, statistics cleared on request. */
START_TEST(test_reset_starts_an_episode)
{
    vh_frame_queue q;
    vh_error err;
    ck_assert_int_eq(vh_frame_queue_init(&q, 8, VH_QUEUE_BLOCK, &err), VH_OK);
    uint64_t a = submit(&q, 0, VH_OK), b = submit(&q, 0, VH_OK);
    vh_frame_record *running = vh_frame_queue_take(&q);
    void *args[2] = {&q, running};
    pthread_t t;
    pthread_create(&t, NULL, finish_later, args);
    int64_t t0 = vh_now_ns();
    vh_frame_queue_reset(&q, 0, 0);
    ck_assert_int_ge(vh_now_ns() - t0, 40 * 1000000ll); /* waited for the running frame */
    pthread_join(t, NULL);
    uint64_t c = submit(&q, 0, VH_OK);
    run_one(&q);
    vh_action r;
    vh_action_init(&r);
    ck_assert_int_eq(vh_frame_queue_poll(&q, &r, sizeof r, 0), VH_OK);
    ck_assert(r.frame_id == a && r.status == VH_OK && r.episode == 0);
    ck_assert_int_eq(vh_frame_queue_poll(&q, &r, sizeof r, 0), VH_OK);
    ck_assert(r.frame_id == b && r.status == VH_ERR_CANCELLED && r.episode == 0);
    ck_assert_int_eq(vh_frame_queue_poll(&q, &r, sizeof r, 0), VH_OK);
    ck_assert(r.frame_id == c && r.status == VH_OK && r.episode == 1);
    vh_frame_stats st;
    uint64_t episode;
    vh_frame_queue_stats(&q, &st, NULL, NULL, NULL, &episode);
    ck_assert_uint_eq(episode, 1);
    ck_assert_uint_eq(st.completed, 2);
    vh_frame_queue_reset(&q, 1, 0);
    vh_frame_queue_stats(&q, &st, NULL, NULL, NULL, &episode);
    ck_assert_uint_eq(episode, 2);
    ck_assert_uint_eq(st.completed + st.submitted + st.cancelled + st.end_to_end.count, 0);
    ck_assert_uint_eq(submit(&q, 0, VH_OK), c + 1); /* ids go on */
    vh_frame_queue_destroy(&q);
}
END_TEST

/* Producers, a worker and a poller at once: every id answered exactly once, in order. */
enum { PRODUCERS = 3, PER_PRODUCER = 2000 };

static void *produce(void *arg)
{
    vh_frame_queue *q = arg;
    for (int i = 0; i < PER_PRODUCER; i++) {
        vh_frame_record *r = new_record(0);
        vh_error err;
        uint64_t id;
        if (vh_frame_queue_submit(q, r, &id, &err) != VH_OK) vh_frame_record_free(r);
    }
    return NULL;
}

static void *work(void *arg)
{
    vh_frame_queue *q = arg;
    vh_frame_record *r;
    while ((r = vh_frame_queue_take(q))) {
        r->result.status = VH_OK;
        vh_frame_queue_finish(q, r);
    }
    return NULL;
}

START_TEST(test_concurrent_exactly_once_in_order)
{
    vh_frame_queue q;
    vh_error err;
    ck_assert_int_eq(vh_frame_queue_init(&q, 3, VH_QUEUE_DROP_OLDEST, &err), VH_OK);
    pthread_t producers[PRODUCERS], worker;
    pthread_create(&worker, NULL, work, &q);
    for (int i = 0; i < PRODUCERS; i++) pthread_create(&producers[i], NULL, produce, &q);
    uint64_t expected = 1, ok = 0, dropped = 0;
    while (expected <= PRODUCERS * PER_PRODUCER) {
        vh_action a;
        vh_action_init(&a);
        ck_assert_int_eq(vh_frame_queue_poll(&q, &a, sizeof a, 5000), VH_OK);
        ck_assert_uint_eq(a.frame_id, expected);
        ck_assert(a.status == VH_OK || a.status == VH_ERR_DROPPED);
        ok += a.status == VH_OK;
        dropped += a.status == VH_ERR_DROPPED;
        expected++;
    }
    for (int i = 0; i < PRODUCERS; i++) pthread_join(producers[i], NULL);
    vh_frame_queue_close(&q);
    pthread_join(worker, NULL);
    ck_assert_uint_eq(ok + dropped, PRODUCERS * PER_PRODUCER);
    vh_frame_queue_destroy(&q);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("frame_queue");
    TCase *tc = tcase_create("queue");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_fifo_ids_and_timeout);
    tcase_add_test(tc, test_drop_oldest_answers_in_order);
    tcase_add_test(tc, test_reject_when_full);
    tcase_add_test(tc, test_block_waits_for_room);
    tcase_add_test(tc, test_close_cancels_pending);
    tcase_add_test(tc, test_deadline_expires_pending_frames);
    tcase_add_test(tc, test_cancel_one_and_all);
    tcase_add_test(tc, test_reset_starts_an_episode);
    tcase_add_test(tc, test_concurrent_exactly_once_in_order);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
