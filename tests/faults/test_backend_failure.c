/*
 * A backend that fails mid-run (flaky_plugin.c: cpu_generic with every k-th executor_run failing)
 * fails that frame's result and nothing else: the frame is answered with VH_ERR_BACKEND_FAILED and
 * the backend's message, every other frame's action equals a clean session's (the failure left no
 * stale KV or hidden state behind), and the session goes on. Serial (one stage), and pipelined
 * over two stages with several frames in flight. Packed over two stages (a failed run fails every
 * frame of its pass, or the new frames it staged): every frame is answered, OK or with the
 * backend's failure, and the session goes on. Each failed frame's action carries its own message
 * (vh_action.message, 0.5.0: the run that failed it), an answered one none.
 * Backend ABI 3.0: the plugin reports progress as it makes its weights resident; a plugin that says
 * it is of ABI 2 (VH_FLAKY_ABI_MAJOR=2) is refused at load with both versions named.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#define FRAMES 24

typedef struct outcome {
    vh_status status[FRAMES + 1];
    int32_t ids[FRAMES + 1][VH_MAX_ACTION_DIM];
    char message[FRAMES + 1][sizeof(((vh_action *)0)->message)];
} outcome;

static void keep(outcome *out, const vh_action *a)
{
    out->status[a->frame_id] = a->status;
    memcpy(out->ids[a->frame_id], a->token_ids, sizeof a->token_ids);
    memcpy(out->message[a->frame_id], a->message, sizeof a->message);
}

static void run(const char *backends, vh_execution_mode mode, const char *fail_every, outcome *out)
{
    setenv("VH_FLAKY_FAIL_EVERY", fail_every, 1);
    char *model = vh_test_source_path("models/openvla-tiny");
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model;
    p.backends = backends;
    p.execution_mode = mode;
    p.n_threads = 1;
    p.queue_policy = VH_QUEUE_BLOCK;
    p.queue_capacity = 4;
    if (strchr(backends, ',')) p.llm_split = 1;
    if (mode == VH_EXECUTION_PACKED) {
        /* runs a frame depend on how frames pack: no warm-up, which could meet the failing run (the
         * count goes on over the process), and 2 in flight, so a failure fails at most 2 frames */
        p.warmup_frames = 0;
        p.frames_in_flight = 2;
    }
    vh_session *s;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    enum { W = 40, H = 30 };
    static uint8_t rgb[W * H * 3];
    for (uint64_t i = 1; i <= FRAMES; i++) {
        for (int k = 0; k < W * H * 3; k++) rgb[k] = (uint8_t)(k * 7 + i * 31);
        vh_frame f;
        vh_frame_init(&f);
        f.rgb = rgb, f.width = W, f.height = H, f.stride = W * 3, f.tag = i;
        f.instruction = i % 2 ? "pick up the red block" : "open the drawer";
        uint64_t id;
        ck_assert_int_eq(vh_submit_frame(s, &f, &id), VH_OK);
        ck_assert_uint_eq(id, i);
        if (mode == VH_EXECUTION_SERIAL) { /* rgb is reused: wait for this frame */
            vh_action a;
            vh_action_init(&a);
            ck_assert_int_eq(vh_poll_action(s, &a, 60000), VH_OK);
            keep(out, &a);
        }
    }
    for (int answered = mode == VH_EXECUTION_SERIAL ? FRAMES : 0; answered < FRAMES; answered++) {
        vh_action a;
        vh_action_init(&a);
        ck_assert_int_eq(vh_poll_action(s, &a, 60000), VH_OK);
        keep(out, &a);
    }
    if (strcmp(fail_every, "0") != 0) {
        const char *why = vh_session_last_error(s);
        ck_assert_msg(why && strstr(why, "injected failure"), "the backend's message is not reported: %s", why);
    }
    vh_session_destroy(s);
    free(model);
}

static void check(const char *backends, vh_execution_mode mode, const char *what)
{
    outcome clean = {0}, flaky = {0};
    run(backends, mode, "0", &clean);
    /* serial, pipelined: a frame is 8+ runs, about one frame in three fails. Packed, 2 in flight:
     * 2 runs a frame staged (vision, prefill rows) and 2..3 a pass (stage 0's decode rows, stage 1,
     * head) over 84..168 passes: 216..552 runs, 2..5 failures of at most 2 frames each */
    run(backends, mode, mode == VH_EXECUTION_PACKED ? "97" : "23", &flaky);
    int failed = 0, differ = 0, messages_differ = 0, last_failed = 0;
    for (int i = 1; i <= FRAMES; i++) {
        ck_assert_int_eq(clean.status[i], VH_OK);
        ck_assert_str_eq(clean.message[i], "");
        if (flaky.status[i] != VH_OK) {
            ck_assert_int_eq(flaky.status[i], VH_ERR_BACKEND_FAILED);
            /* its own message: the frame and the run that failed it */
            char frame[32];
            snprintf(frame, sizeof frame, "frame %d: ", i);
            ck_assert_msg(strstr(flaky.message[i], frame) && strstr(flaky.message[i], "flaky: injected failure (run "),
                          "%s: frame %d's message: '%s'", what, i, flaky.message[i]);
            if (last_failed) messages_differ += strcmp(flaky.message[i], flaky.message[last_failed]) != 0;
            last_failed = i;
            failed++;
            continue;
        }
        ck_assert_msg(!flaky.message[i][0], "%s: answered frame %d has a message: %s", what, i, flaky.message[i]);
        const int same = !memcmp(flaky.ids[i], clean.ids[i], sizeof clean.ids[i]);
        differ += !same;
        /* packed: the frames beside one in a pass depend on timing, which may change its last bits */
        if (mode != VH_EXECUTION_PACKED)
            ck_assert_msg(same, "%s: frame %d after a failure differs from the clean session's", what, i);
    }
    ck_assert_int_gt(failed, 1);
    ck_assert_int_lt(failed, FRAMES);
    ck_assert_int_eq(messages_differ, failed - 1); /* each names its own frame */
    fprintf(stderr, "%s: %d of %d frames failed by injection, %d of the other %d differ from the clean session's\n",
            what, failed, FRAMES, differ, FRAMES - failed);
}

START_TEST(test_serial_failure_fails_one_frame)
{
    check("flaky", VH_EXECUTION_SERIAL, "one stage, serial");
}
END_TEST

START_TEST(test_pipelined_failure_fails_one_frame)
{
    check("flaky,flaky", VH_EXECUTION_PIPELINE, "two stages, pipelined");
}
END_TEST

START_TEST(test_packed_failure_fails_its_pass)
{
    check("flaky,flaky", VH_EXECUTION_PACKED, "two stages, packed");
}
END_TEST

static int count_progress(void *user, const char *stage, double fraction)
{
    (void)fraction;
    *(int *)user += !strncmp(stage, "backend flaky", 13);
    return 0;
}

/* The "backend flaky" progress calls of a create over `backends` (one frame run through it). */
static int backend_progress_calls(const char *backends)
{
    setenv("VH_FLAKY_FAIL_EVERY", "0", 1);
    char *model = vh_test_source_path("models/openvla-tiny");
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model;
    p.backends = backends;
    p.n_threads = 1;
    if (strchr(backends, ',')) p.llm_split = 1;
    int calls = 0;
    p.progress_fn = count_progress;
    p.progress_user = &calls;
    vh_session *s;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s: %s", backends, vh_last_error());
    static uint8_t rgb[40 * 30 * 3];
    vh_frame f;
    vh_frame_init(&f);
    f.rgb = rgb, f.width = 40, f.height = 30, f.stride = 40 * 3, f.instruction = "open the drawer";
    ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_OK);
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, 60000), VH_OK);
    ck_assert_int_eq(a.status, VH_OK);
    vh_session_destroy(s);
    free(model);
    return calls;
}

START_TEST(test_progress_and_abi_2_plugin_refused)
{
    /* the real plugin's progress hook: several calls per stage */
    ck_assert_int_gt(backend_progress_calls("flaky"), 2);
    ck_assert_int_gt(backend_progress_calls("flaky,flaky"), 4);
    /* a plugin of ABI 2.3: refused, naming its version and the library's */
    setenv("VH_FLAKY_ABI_MAJOR", "2", 1);
    char *model = vh_test_source_path("models/openvla-tiny");
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model;
    p.backends = "flaky";
    p.n_threads = 1;
    vh_session *s = (vh_session *)1;
    ck_assert_int_ne(vh_session_create(&p, &s), VH_OK);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(vh_last_error(), "ABI 2.3") && strstr(vh_last_error(), "3.1"), "%s", vh_last_error());
    unsetenv("VH_FLAKY_ABI_MAJOR");
    free(model);
}
END_TEST

int main(void)
{
    setenv("VH_BACKEND_PATH", FLAKY_PLUGIN_DIR, 1);
    setenv("VH_FLAKY_REAL", REAL_PLUGIN, 1);
    Suite *suite = suite_create("backend_failure");
    TCase *tc = tcase_create("backend_failure");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_serial_failure_fails_one_frame);
    tcase_add_test(tc, test_pipelined_failure_fails_one_frame);
    tcase_add_test(tc, test_packed_failure_fails_its_pass);
    tcase_add_test(tc, test_progress_and_abi_2_plugin_refused);
    suite_add_tcase(suite, tc);
    return vh_test_run_suite(suite);
}
