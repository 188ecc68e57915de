/*
 * Every allocation and file operation of session creation (model loading, tokenizer, plan,
 * pipeline) and of a frame's way through a session fails in turn, one call site at a time
 * (fault_wrap.c; the core is linked with -Wl,--wrap for each function).
 *   - creation: returns an error status with a message and no session, or (where the failed call
 *     is one the code may do without) a working session; never a crash;
 *   - a frame: vh_submit_frame refuses it with a status, or its result carries an error status;
 *     either way the next frame, with nothing failing, gets its action: the session goes on.
 * The backend is a copy of cpu_generic linked with the same wraps (tests/faults/plugin/), so its
 * executor's allocations during creation fail in turn too. Leaks: the suite's ASan job
 * (scripts/check-sanitizers.sh) runs this test under LeakSanitizer, which fails it if any of these
 * paths leaks. A backend failing mid-run: test_backend_failure.c.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_wrap.h"
#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

static void params_for_tiny(vh_session_params *p, char *model)
{
    vh_session_params_init(p);
    p->model_path = model;
    p->backends = "cpu_generic";
    p->n_threads = 2;
}

START_TEST(test_session_create_fails_cleanly_at_every_site)
{
    char *model = vh_test_source_path("models/openvla-tiny");
    vh_session_params p;
    params_for_tiny(&p, model);
    vh_session *s = NULL;
    fault_arm(FAULT_COUNT, 0);
    vh_status st = vh_session_create(&p, &s);
    fault_disarm();
    ck_assert_msg(st == VH_OK, "%s", vh_last_error());
    vh_session_destroy(s);
    const int n = fault_site_count();
    ck_assert_int_gt(n, 20);
    int refused = 0, tolerated = 0, unreached = 0;
    for (int site = 0; site < n; site++) {
        s = NULL;
        fault_arm(FAULT_FAIL, site);
        st = vh_session_create(&p, &s);
        fault_disarm();
        if (!fault_fired()) { /* another thread's timing: the site was not reached this time */
            unreached++;
            vh_session_destroy(s);
            continue;
        }
        if (st == VH_OK) {
            tolerated++;
            vh_session_destroy(s);
            continue;
        }
        ck_assert_msg(s == NULL, "site %d (%s in %s): failed with %s but returned a session", site,
                      fault_site_function(site), fault_site_object(site), vh_status_string(st));
        const char *why = vh_last_error();
        ck_assert_msg(why && why[0], "site %d (%s in %s): %s without a message", site, fault_site_function(site),
                      fault_site_object(site), vh_status_string(st));
        refused++;
    }
    fprintf(stderr, "session create: %d call sites; each failed in turn: %d refused with a status and message, "
                    "%d tolerated, %d not reached\n", n, refused, tolerated, unreached);
    ck_assert_int_gt(refused, n / 2);
    free(model);
}
END_TEST

static void submit_frame(vh_session *s, uint64_t tag, vh_status *submit_status, uint64_t *id)
{
    enum { W = 40, H = 30 };
    static uint8_t rgb[W * H * 3];
    for (int i = 0; i < W * H * 3; i++) rgb[i] = (uint8_t)(i * 13);
    vh_frame f;
    vh_frame_init(&f);
    f.rgb = rgb, f.width = W, f.height = H, f.stride = W * 3, f.instruction = "pick up the red block", f.tag = tag;
    *submit_status = vh_submit_frame(s, &f, id);
}

START_TEST(test_a_failing_frame_leaves_the_session_working)
{
    char *model = vh_test_source_path("models/openvla-tiny");
    vh_session_params p;
    params_for_tiny(&p, model);
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    vh_status sub;
    uint64_t id;
    vh_action a;
    /* the call sites of one frame, submit to result */
    fault_arm(FAULT_COUNT, 0);
    submit_frame(s, 1, &sub, &id);
    vh_action_init(&a);
    ck_assert_int_eq(sub, VH_OK);
    ck_assert_int_eq(vh_poll_action(s, &a, 60000), VH_OK);
    fault_disarm();
    ck_assert_int_eq(a.status, VH_OK);
    const int n = fault_site_count();
    int refused = 0, failed_result = 0, tolerated = 0;
    for (int site = 0; site < n; site++) {
        fault_arm(FAULT_FAIL, site);
        submit_frame(s, 100 + (uint64_t)site, &sub, &id);
        vh_action_init(&a);
        vh_status polled = sub == VH_OK ? vh_poll_action(s, &a, 60000) : VH_OK;
        fault_disarm();
        if (sub != VH_OK) {
            refused++;
        } else {
            ck_assert_msg(polled == VH_OK, "site %d (%s): the frame got no answer (%s)", site, fault_site_function(site),
                          vh_status_string(polled));
            ck_assert_uint_eq(a.frame_id, id);
            if (a.status != VH_OK) failed_result++;
            else tolerated++;
        }
        /* the session goes on: the next frame, nothing failing, gets its action */
        submit_frame(s, 9000 + (uint64_t)site, &sub, &id);
        ck_assert_msg(sub == VH_OK, "site %d (%s): the next frame was refused: %s", site, fault_site_function(site),
                      vh_session_last_error(s));
        vh_action_init(&a);
        ck_assert_int_eq(vh_poll_action(s, &a, 60000), VH_OK);
        ck_assert_msg(a.status == VH_OK, "site %d (%s): the next frame failed: %s", site, fault_site_function(site),
                      vh_status_string(a.status));
    }
    fprintf(stderr, "one frame: %d call sites; each failed in turn: %d refused at submit, %d answered with an error "
                    "status, %d tolerated; the next frame succeeded every time\n", n, refused, failed_result, tolerated);
    vh_session_destroy(s);
    free(model);
}
END_TEST

int main(void)
{
    setenv("VH_BACKEND_PATH", FAULTY_PLUGIN_DIR, 1);
    Suite *suite = suite_create("fault_injection");
    TCase *tc = tcase_create("fault_injection");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_session_create_fails_cleanly_at_every_site);
    tcase_add_test(tc, test_a_failing_frame_leaves_the_session_working);
    suite_add_tcase(suite, tc);
    return vh_test_run_suite(suite);
}
