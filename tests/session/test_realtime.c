/* The real-time contract of a session (doc/api.md, "Real-time use"), through the public API on
 * the bundled tiny model with cpu_generic: each queue policy under concurrent submitter and
 * poller threads (every accepted id answered exactly once, in order), deadlines, cancel, reset,
 * the statistics (checked against the polled actions' own times), warm-up, and the sequence and
 * timestamp round trip. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#define WAIT_MS 60000
enum { SUBMITTERS = 2, PER_SUBMITTER = 24, MAX_FRAMES = 256 };

static char *model;
static uint8_t rgb[32 * 24 * 3];

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static vh_session *open_session(vh_queue_policy policy, uint32_t capacity, uint32_t deadline_ms, const char *backends,
                                vh_execution_mode mode)
{
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model;
    p.backends = backends;
    p.n_threads = 1;
    p.queue_policy = policy;
    p.queue_capacity = capacity;
    p.deadline_ms = deadline_ms;
    p.execution_mode = mode;
    p.warmup_frames = 0;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    return s;
}

static void frame_for(vh_frame *f, uint64_t sequence)
{
    vh_frame_init(f);
    f->rgb = rgb;
    f->width = 32;
    f->height = 24;
    f->instruction = "pick up the red block";
    f->sequence = sequence;
    f->tag = sequence * 3 + 1;
    f->timestamp_ns = (int64_t)sequence * 1000 + 7;
}

/* What the threads of one run share: which ids were accepted and how each was answered. */
typedef struct run {
    vh_session *s;
    pthread_mutex_t lock;
    uint64_t accepted, busy;
    int accepted_id[MAX_FRAMES + 1];
    int answered[MAX_FRAMES + 1];
    vh_action actions[MAX_FRAMES + 1];
    uint64_t polled, last_polled_id;
    int out_of_order;
    int submitters_done;
} run;

static void *submitter(void *arg)
{
    run *r = arg;
    for (int i = 0; i < PER_SUBMITTER; i++) {
        vh_frame f;
        frame_for(&f, (uint64_t)i);
        uint64_t id = 0;
        vh_status st = vh_submit_frame(r->s, &f, &id);
        pthread_mutex_lock(&r->lock);
        if (st == VH_OK) {
            ck_assert(id >= 1 && id <= MAX_FRAMES && !r->accepted_id[id]);
            r->accepted_id[id] = 1;
            r->accepted++;
        } else {
            ck_assert_int_eq(st, VH_ERR_BUSY);
            r->busy++;
        }
        pthread_mutex_unlock(&r->lock);
    }
    pthread_mutex_lock(&r->lock);
    r->submitters_done++;
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

static void *poller(void *arg)
{
    run *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->lock);
        int done = r->submitters_done == SUBMITTERS && r->polled == r->accepted;
        pthread_mutex_unlock(&r->lock);
        if (done) return NULL;
        vh_action a;
        vh_action_init(&a);
        if (vh_poll_action(r->s, &a, 20) != VH_OK) continue;
        pthread_mutex_lock(&r->lock);
        ck_assert(a.frame_id >= 1 && a.frame_id <= MAX_FRAMES);
        r->answered[a.frame_id]++;
        r->actions[a.frame_id] = a;
        /* pollers race to record, but each poll takes the oldest result: with one poller in
         * order; with two, no id twice (checked by the count) */
        if (a.frame_id < r->last_polled_id) r->out_of_order++;
        r->last_polled_id = a.frame_id;
        r->polled++;
        pthread_mutex_unlock(&r->lock);
    }
}

/* SUBMITTERS threads submit PER_SUBMITTER frames each while `pollers` threads poll. */
static void run_concurrently(run *r, vh_session *s, int pollers)
{
    memset(r, 0, sizeof *r);
    r->s = s;
    pthread_mutex_init(&r->lock, NULL);
    pthread_t sub[SUBMITTERS], pol[2];
    for (int i = 0; i < pollers; i++) pthread_create(&pol[i], NULL, poller, r);
    for (int i = 0; i < SUBMITTERS; i++) pthread_create(&sub[i], NULL, submitter, r);
    for (int i = 0; i < SUBMITTERS; i++) pthread_join(sub[i], NULL);
    for (int i = 0; i < pollers; i++) pthread_join(pol[i], NULL);
    pthread_mutex_destroy(&r->lock);
    for (uint64_t id = 1; id <= MAX_FRAMES; id++)
        ck_assert_msg(r->answered[id] == r->accepted_id[id], "frame %llu answered %d times (accepted: %d)",
                      (unsigned long long)id, r->answered[id], r->accepted_id[id]);
    if (pollers == 1) ck_assert_int_eq(r->out_of_order, 0);
}

static uint64_t count_status(const run *r, vh_status status)
{
    uint64_t n = 0;
    for (uint64_t id = 1; id <= MAX_FRAMES; id++) n += r->answered[id] && r->actions[id].status == status;
    return n;
}

static void get_stats(vh_session *s, vh_session_stats *st)
{
    vh_session_stats_init(st);
    ck_assert_int_eq(vh_session_get_stats(s, st), VH_OK);
}

/* The counts of the statistics equal what the threads saw. */
static void expect_counts_match(vh_session *s, const run *r)
{
    vh_session_stats st;
    get_stats(s, &st);
    ck_assert_uint_eq(st.submitted, r->accepted);
    ck_assert_uint_eq(st.rejected, r->busy);
    ck_assert_uint_eq(st.completed, count_status(r, VH_OK));
    ck_assert_uint_eq(st.dropped, count_status(r, VH_ERR_DROPPED));
    ck_assert_uint_eq(st.expired, count_status(r, VH_ERR_EXPIRED));
    ck_assert_uint_eq(st.cancelled, count_status(r, VH_ERR_CANCELLED));
    ck_assert_uint_eq(st.completed + st.dropped + st.expired + st.cancelled + st.failed, st.submitted);
    ck_assert_uint_eq(st.pending + st.running + st.unpolled, 0);
}

START_TEST(test_policy_latest)
{
    vh_session *s = open_session(VH_QUEUE_LATEST, 1, 0, "cpu_generic", VH_EXECUTION_PIPELINE);
    run *r = malloc(sizeof *r);
    run_concurrently(r, s, 1);
    ck_assert_uint_eq(r->accepted, SUBMITTERS * PER_SUBMITTER); /* latest never refuses */
    ck_assert_uint_eq(r->busy, 0);
    ck_assert_uint_gt(count_status(r, VH_ERR_DROPPED), 0);    /* 48 frames at once, one slot */
    ck_assert_uint_eq(count_status(r, VH_OK) + count_status(r, VH_ERR_DROPPED), r->accepted);
    /* the newest frame is never the one dropped: nothing came after it */
    ck_assert_int_eq(r->actions[r->accepted].status, VH_OK);
    expect_counts_match(s, r);
    free(r);
    vh_session_destroy(s);
}
END_TEST

START_TEST(test_policy_reject)
{
    vh_session *s = open_session(VH_QUEUE_REJECT, 1, 0, "cpu_generic", VH_EXECUTION_PIPELINE);
    run *r = malloc(sizeof *r);
    run_concurrently(r, s, 2);
    ck_assert_uint_gt(r->busy, 0);
    ck_assert_uint_eq(r->accepted + r->busy, SUBMITTERS * PER_SUBMITTER);
    ck_assert_uint_eq(count_status(r, VH_OK), r->accepted); /* what was accepted ran */
    expect_counts_match(s, r);
    free(r);
    vh_session_destroy(s);
}
END_TEST

START_TEST(test_policy_block)
{
    /* two stages, pipelined: frames in flight on both while submitters wait for room */
    vh_session *s = open_session(VH_QUEUE_BLOCK, 2, 0, "cpu_generic,cpu_generic", VH_EXECUTION_PIPELINE);
    run *r = malloc(sizeof *r);
    run_concurrently(r, s, 2);
    ck_assert_uint_eq(r->accepted, SUBMITTERS * PER_SUBMITTER);
    ck_assert_uint_eq(count_status(r, VH_OK), r->accepted);
    expect_counts_match(s, r);
    free(r);
    vh_session_destroy(s);
}
END_TEST

/* Frames that cannot start before their deadline are answered EXPIRED, never computed; those
 * that started did so before it. Per frame (deadline_ns) and per session (deadline_ms). */
START_TEST(test_deadlines)
{
    vh_session *s = open_session(VH_QUEUE_BLOCK, 64, 0, "cpu_generic", VH_EXECUTION_SERIAL);
    vh_frame f;
    frame_for(&f, 1);
    f.deadline_ns = now_ns() - 1; /* already past */
    uint64_t late, fine;
    ck_assert_int_eq(vh_submit_frame(s, &f, &late), VH_OK);
    f.deadline_ns = now_ns() + 60 * 1000000000ll;
    ck_assert_int_eq(vh_submit_frame(s, &f, &fine), VH_OK);
    f.deadline_ns = -5;
    ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_ERR_INVALID_ARGUMENT);
    f.deadline_ns = INT64_MAX; /* the end of time: never expires, waiting on it must not overflow */
    uint64_t never;
    ck_assert_int_eq(vh_submit_frame(s, &f, &never), VH_OK);
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
    ck_assert(a.frame_id == late && a.status == VH_ERR_EXPIRED && a.started_ns == 0 && a.action_dim == 0);
    ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
    ck_assert(a.frame_id == fine && a.status == VH_OK && a.started_ns <= a.deadline_ns);
    ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
    ck_assert(a.frame_id == never && a.status == VH_OK && a.deadline_ns == INT64_MAX);
    vh_session_destroy(s);

    /* 1 ms after submission: a burst of 40 cannot all start in time */
    s = open_session(VH_QUEUE_BLOCK, 64, 1, "cpu_generic", VH_EXECUTION_SERIAL);
    uint64_t expired = 0, ok = 0;
    for (int i = 0; i < 40; i++) {
        frame_for(&f, (uint64_t)i);
        ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_OK);
    }
    for (int i = 0; i < 40; i++) {
        ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
        ck_assert_int_eq(a.deadline_ns, a.submitted_ns + 1000000);
        if (a.status == VH_OK) {
            ok++;
            ck_assert_int_le(a.started_ns, a.deadline_ns);
        } else {
            ck_assert_int_eq(a.status, VH_ERR_EXPIRED);
            expired++;
            ck_assert_int_eq(a.started_ns, 0);
            ck_assert_int_gt(a.finished_ns, a.deadline_ns);
        }
    }
    ck_assert_uint_gt(expired, 0);
    vh_session_stats st;
    get_stats(s, &st);
    ck_assert_uint_eq(st.expired, expired);
    ck_assert_uint_eq(st.completed, ok);
    vh_session_destroy(s);
}
END_TEST

/* Cancel one pending frame, then all pending ones; a started or unknown one cannot be. */
START_TEST(test_cancel)
{
    vh_session *s = open_session(VH_QUEUE_BLOCK, 64, 0, "cpu_generic", VH_EXECUTION_SERIAL);
    vh_frame f;
    uint64_t ids[40];
    for (int i = 0; i < 40; i++) {
        frame_for(&f, (uint64_t)i);
        ck_assert_int_eq(vh_submit_frame(s, &f, &ids[i]), VH_OK);
    }
    ck_assert_int_eq(vh_session_cancel(s, ids[39]), VH_OK);
    ck_assert_int_eq(vh_session_cancel(s, ids[39]), VH_ERR_BUSY); /* already answered */
    ck_assert_int_eq(vh_session_cancel(s, 1000), VH_ERR_INVALID_ARGUMENT);
    uint32_t n = 0;
    ck_assert_int_eq(vh_session_cancel_pending(s, &n), VH_OK);
    ck_assert_uint_gt(n, 0);
    uint32_t cancelled = 0, ok = 0;
    for (int i = 0; i < 40; i++) {
        vh_action a;
        vh_action_init(&a);
        ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
        ck_assert_uint_eq(a.frame_id, ids[i]);
        ck_assert(a.status == VH_OK || a.status == VH_ERR_CANCELLED);
        if (a.status == VH_OK) ck_assert_uint_eq(cancelled, 0); /* the computed ones come first */
        cancelled += a.status == VH_ERR_CANCELLED;
        ok += a.status == VH_OK;
    }
    ck_assert_uint_eq(cancelled, n + 1);
    ck_assert_int_eq(vh_session_cancel(s, ids[0]), VH_ERR_BUSY); /* computed */
    ck_assert_int_eq(vh_session_cancel(NULL, 1), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_session_cancel_pending(s, NULL), VH_OK);
    vh_session_stats st;
    get_stats(s, &st);
    ck_assert_uint_eq(st.cancelled, cancelled);
    ck_assert_uint_eq(st.completed, ok);
    vh_session_destroy(s);
}
END_TEST

/* Reset between episodes: pending frames cancelled, started ones answered before it returns,
 * the next frames in the next episode, computed as in a fresh session; statistics on request. */
START_TEST(test_reset)
{
    vh_session *s = open_session(VH_QUEUE_BLOCK, 64, 0, "cpu_generic,cpu_generic", VH_EXECUTION_PIPELINE);
    vh_frame f;
    frame_for(&f, 0);
    vh_action first_ok;
    vh_action_init(&first_ok);
    ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_OK);
    ck_assert_int_eq(vh_poll_action(s, &first_ok, WAIT_MS), VH_OK);
    ck_assert_int_eq(first_ok.status, VH_OK);
    for (int i = 0; i < 20; i++) {
        frame_for(&f, (uint64_t)i);
        ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_OK);
    }
    vh_session_stats st;
    do { /* reset while frames run */
        get_stats(s, &st);
    } while (st.running == 0 && st.unpolled == 0);
    ck_assert_int_eq(vh_session_reset(s, 0), VH_OK);
    get_stats(s, &st);
    ck_assert_uint_eq(st.pending + st.running, 0); /* everything of episode 0 is answered */
    ck_assert_uint_eq(st.unpolled, 20);
    ck_assert_uint_eq(st.episode, 1);
    ck_assert_uint_gt(st.cancelled, 0);
    for (int i = 0; i < 20; i++) {
        vh_action a;
        vh_action_init(&a);
        ck_assert_int_eq(vh_poll_action(s, &a, 0), VH_OK); /* all answered: no wait */
        ck_assert_uint_eq(a.episode, 0);
        ck_assert(a.status == VH_OK || a.status == VH_ERR_CANCELLED);
    }
    ck_assert_int_eq(vh_session_reset(s, 0x80), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_session_reset(s, VH_RESET_STATISTICS), VH_OK);
    get_stats(s, &st);
    ck_assert_uint_eq(st.submitted + st.completed + st.cancelled + st.end_to_end.count + st.stage_pass[0].count, 0);
    ck_assert_uint_eq(st.episode, 2);
    frame_for(&f, 0);
    uint64_t id;
    ck_assert_int_eq(vh_submit_frame(s, &f, &id), VH_OK);
    ck_assert_uint_eq(id, 22); /* ids go on across episodes */
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
    ck_assert(a.status == VH_OK && a.episode == 2);
    /* nothing of the earlier episodes reaches this frame: the same action as before */
    ck_assert_mem_eq(a.token_ids, first_ok.token_ids, sizeof a.token_ids);
    vh_session_destroy(s);
}
END_TEST

/* The percentiles and maxima equal those of the polled actions' own times (nearest rank over
 * the same samples); per stage, one sample a pass. */
static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static void expect_latency(const vh_latency *l, int64_t *samples, size_t n)
{
    qsort(samples, n, sizeof *samples, cmp_i64);
    ck_assert_uint_eq(l->count, n);
    ck_assert_int_eq(l->p50_ns, samples[(n * 50 + 99) / 100 - 1]);
    ck_assert_int_eq(l->p95_ns, samples[(n * 95 + 99) / 100 - 1]);
    ck_assert_int_eq(l->max_ns, samples[n - 1]);
    ck_assert_int_le(l->p50_ns, l->p95_ns);
}

START_TEST(test_statistics)
{
    vh_session *s = open_session(VH_QUEUE_LATEST, 2, 0, "cpu_generic,cpu_generic", VH_EXECUTION_PIPELINE);
    run *r = malloc(sizeof *r);
    run_concurrently(r, s, 1);
    int64_t e2e[MAX_FRAMES], wait[MAX_FRAMES], compute[MAX_FRAMES], decode[MAX_FRAMES];
    size_t n = 0;
    for (uint64_t id = 1; id <= MAX_FRAMES; id++) {
        const vh_action *a = &r->actions[id];
        if (!r->answered[id] || a->status != VH_OK) continue;
        ck_assert(a->submitted_ns <= a->started_ns && a->started_ns <= a->finished_ns);
        e2e[n] = a->finished_ns - a->submitted_ns;
        wait[n] = a->started_ns - a->submitted_ns;
        compute[n] = a->finished_ns - a->started_ns;
        decode[n] = a->decode_ns;
        n++;
    }
    vh_session_stats st;
    get_stats(s, &st);
    expect_latency(&st.end_to_end, e2e, n);
    expect_latency(&st.queue_wait, wait, n);
    expect_latency(&st.compute, compute, n);
    expect_latency(&st.decode, decode, n);
    ck_assert_int_gt(st.end_to_end.p50_ns, 0);
    vh_session_info info;
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
    ck_assert_uint_eq(st.n_stages, 2);
    for (uint32_t i = 0; i < 2; i++) {
        ck_assert_uint_eq(st.stage_pass[i].count, info.stages[i].passes);
        ck_assert_int_gt(st.stage_pass[i].max_ns, 0);
        ck_assert_int_le(st.stage_pass[i].max_ns, st.compute.max_ns);
    }
    /* bad arguments */
    st.struct_size = 8;
    ck_assert_int_eq(vh_session_get_stats(s, &st), VH_ERR_STRUCT_SIZE);
    ck_assert_int_eq(vh_session_get_stats(s, NULL), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_session_get_stats(NULL, &st), VH_ERR_INVALID_ARGUMENT);
    free(r);
    vh_session_destroy(s);
}
END_TEST

/* Statistics are readable while frames run, from another thread (checked for consistency). */
static void *read_stats_loop(void *arg)
{
    vh_session *s = arg;
    for (int i = 0; i < 200; i++) {
        vh_session_stats st;
        get_stats(s, &st);
        ck_assert_uint_le(st.completed + st.dropped + st.expired + st.cancelled + st.failed, st.submitted);
        ck_assert_int_le(st.end_to_end.p50_ns, st.end_to_end.max_ns);
    }
    return NULL;
}

START_TEST(test_statistics_while_running)
{
    vh_session *s = open_session(VH_QUEUE_LATEST, 1, 0, "cpu_generic", VH_EXECUTION_PIPELINE);
    pthread_t reader;
    pthread_create(&reader, NULL, read_stats_loop, s);
    run *r = malloc(sizeof *r);
    run_concurrently(r, s, 2);
    pthread_join(reader, NULL);
    expect_counts_match(s, r);
    free(r);
    vh_session_destroy(s);
}
END_TEST

/* Warm-up frames run inside create and leave nothing behind: ids start at 1, no statistics. */
START_TEST(test_warmup_leaves_no_trace)
{
    vh_session_params p;
    vh_session_params_init(&p);
    ck_assert_int_eq(p.warmup_frames, -1);
    p.model_path = model;
    p.backends = "cpu_generic";
    p.n_threads = 1;
    p.warmup_frames = 3;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    vh_session_stats st;
    get_stats(s, &st);
    ck_assert_uint_eq(st.submitted + st.completed + st.end_to_end.count + st.stage_pass[0].count, 0);
    vh_session_info info;
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
    ck_assert_uint_eq(info.frames_completed, 0);
    ck_assert_uint_eq(info.stages[0].passes, 0);
    vh_frame f;
    frame_for(&f, 5);
    uint64_t id;
    ck_assert_int_eq(vh_submit_frame(s, &f, &id), VH_OK);
    ck_assert_uint_eq(id, 1);
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
    ck_assert(a.status == VH_OK && a.episode == 0);
    ck_assert_uint_eq(a.sequence, 5);
    ck_assert_uint_eq(a.tag, 16);
    ck_assert_int_eq(a.timestamp_ns, 5007);
    vh_session_destroy(s);

    p.warmup_frames = 65;
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_INVALID_ARGUMENT);
    p.warmup_frames = -2;
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_INVALID_ARGUMENT);
}
END_TEST

/* A model whose context cannot hold a typical prompt: no warm-up (a warning), the session is
 * created, and a frame that does not fit is answered VH_ERR_BAD_FRAME, as without a warm-up. */
static void log_to_buffer(void *user, vh_log_level level, const char *message)
{
    if (level == VH_LOG_WARN) snprintf(user, 512, "%s", message);
}

START_TEST(test_warmup_skipped_when_context_too_small)
{
    char *dir = vh_test_make_temp_dir();
    static const char *const files[] = {"generation_config.json", "model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                                        "preprocessor_config.json", "special_tokens_map.json", "tokenizer.model",
                                        "tokenizer_config.json"};
    char from[4096], to[4096];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(from, sizeof from, "%s/%s", model, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        ck_assert_int_eq(symlink(from, to), 0);
    }
    snprintf(from, sizeof from, "%s/config.json", model);
    size_t size;
    char *config = (char *)vh_test_read_file(from, &size);
    ck_assert_ptr_nonnull(config);
    /* 256 image tokens + 14 positions: no OpenVLA prompt fits */
    char *text = strstr(config, "\"text_config\"");
    ck_assert_ptr_nonnull(text);
    char *brace = strchr(text, '{');
    ck_assert_ptr_nonnull(brace);
    snprintf(to, sizeof to, "%s/config.json", dir);
    FILE *f = fopen(to, "w");
    ck_assert_ptr_nonnull(f);
    fwrite(config, 1, (size_t)(brace + 1 - config), f);
    fprintf(f, "\"max_position_embeddings\": 270, ");
    fwrite(brace + 1, 1, size - (size_t)(brace + 1 - config), f);
    fclose(f);
    free(config);

    char warning[512] = "";
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = "cpu_generic";
    p.n_threads = 1;
    p.log_fn = log_to_buffer;
    p.log_user = warning;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    ck_assert_msg(strstr(warning, "no warm-up") != NULL, "%s", warning);
    vh_frame fr;
    frame_for(&fr, 0);
    fr.instruction = "go";
    uint64_t id;
    ck_assert_int_eq(vh_submit_frame(s, &fr, &id), VH_OK);
    ck_assert_uint_eq(id, 1);
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
    ck_assert_int_eq(a.status, VH_ERR_BAD_FRAME);
    vh_session_destroy(s);
    vh_test_remove_tree(dir);
    free(dir);
}
END_TEST

int main(void)
{
    model = vh_test_source_path("models/openvla-tiny");
    for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)(i * 31 + i / 96);
    Suite *suite = suite_create("realtime");
    TCase *tc = tcase_create("contract");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_policy_latest);
    tcase_add_test(tc, test_policy_reject);
    tcase_add_test(tc, test_policy_block);
    tcase_add_test(tc, test_deadlines);
    tcase_add_test(tc, test_cancel);
    tcase_add_test(tc, test_reset);
    tcase_add_test(tc, test_statistics);
    tcase_add_test(tc, test_statistics_while_running);
    tcase_add_test(tc, test_warmup_leaves_no_trace);
    tcase_add_test(tc, test_warmup_skipped_when_context_too_small);
    suite_add_tcase(suite, tc);
    return vh_test_run_suite(suite);
}
