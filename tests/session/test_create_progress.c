/* vh_session_create's progress callback (vh_session_params.progress_fn, 0.4.0) on the bundled tiny
 * model with cpu_generic:
 *   - it is called, on the creating thread, with named stages, fractions in [0, 1] that never go
 *     down and end at exactly 1.0, "backend NAME" calls that move through each stage's share as
 *     its executor makes its blocks resident (ABI 2.3; one and two stages), and a "warm-up" call
 *     as the warm-up begins and one per warm-up frame;
 *   - a nonzero return at any one of those calls (those inside an executor's upload included)
 *     aborts the create with VH_ERR_CANCELLED, no session, a message naming the stage, and nothing
 *     leaked (the ASan job runs this test);
 *   - a caller built with the 0.3.0 header (struct_size ending at `seed`) is accepted and its
 *     missing fields take their defaults: no callback; a size between 0.3.0's and this one is
 *     refused. */
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#define MAX_CALLS 256

typedef struct recorder {
    int n;
    char stage[MAX_CALLS][64];
    double fraction[MAX_CALLS];
    int abort_at;               /* the call (0-based) that returns nonzero; -1: none */
    pthread_t creator;
    int other_thread;           /* a call came from another thread */
} recorder;

static char *model_dir;

static int record(void *user, const char *stage, double fraction)
{
    recorder *r = user;
    if (!pthread_equal(pthread_self(), r->creator)) r->other_thread = 1;
    const int k = r->n;
    if (k < MAX_CALLS) {
        snprintf(r->stage[k], sizeof r->stage[k], "%s", stage ? stage : "(null)");
        r->fraction[k] = fraction;
        r->n++;
    }
    return k == r->abort_at;
}

static vh_status create(recorder *r, const char *backends, int warmup, vh_session **s)
{
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model_dir;
    p.backends = backends;
    p.warmup_frames = warmup;
    p.llm_split = strchr(backends, ',') ? 1 : -1;
    p.progress_fn = record;
    p.progress_user = r;
    r->creator = pthread_self();
    return vh_session_create(&p, s);
}

static int count_stage(const recorder *r, const char *prefix)
{
    int n = 0;
    for (int i = 0; i < r->n; i++) n += !strncmp(r->stage[i], prefix, strlen(prefix));
    return n;
}

static void check_calls(const recorder *r, int n_backends, int warmup)
{
    ck_assert_int_ge(r->n, 4);
    ck_assert_int_eq(r->other_thread, 0);
    for (int i = 0; i < r->n; i++) {
        ck_assert_msg(r->fraction[i] >= 0 && r->fraction[i] <= 1, "call %d (%s): fraction %g", i, r->stage[i],
                      r->fraction[i]);
        if (i) ck_assert_msg(r->fraction[i] >= r->fraction[i - 1], "call %d (%s): %g after %g", i, r->stage[i],
                             r->fraction[i], r->fraction[i - 1]);
        ck_assert_msg(r->stage[i][0], "call %d: empty stage name", i);
    }
    ck_assert_msg(r->fraction[r->n - 1] == 1.0, "last fraction %.17g", r->fraction[r->n - 1]);
    ck_assert_str_eq(r->stage[0], "loading weights");
    /* ABI 2.3: each executor reports as its blocks are made resident, so its share moves in steps,
     * not in one jump: a call at its start and more as it loads, the last at the next phase's start */
    const int backend_calls = count_stage(r, "backend cpu_generic");
    ck_assert_int_ge(backend_calls, 3 * n_backends);
    int distinct = 0, last_backend = -1;
    for (int i = 0; i < r->n; i++)
        if (!strncmp(r->stage[i], "backend ", 8)) {
            distinct += last_backend < 0 || r->fraction[i] > r->fraction[last_backend];
            last_backend = i;
        }
    ck_assert_int_ge(distinct, 3 * n_backends);
    ck_assert_int_lt(last_backend + 1, r->n);
    ck_assert_str_eq(r->stage[last_backend + 1], "starting stages");
    ck_assert_double_eq(r->fraction[last_backend], r->fraction[last_backend + 1]);
    /* the warm-up is its own phase: a call as it begins and one per warm-up frame */
    ck_assert_int_eq(count_stage(r, "warm-up"), warmup ? warmup + 1 : 0);
    int first_warmup = -1;
    for (int i = 0; i < r->n && first_warmup < 0; i++)
        if (!strcmp(r->stage[i], "warm-up")) first_warmup = i;
    if (warmup) ck_assert_str_eq(r->stage[first_warmup - 1], "starting stages");
}

START_TEST(test_progress_one_stage)
{
    recorder r = {.abort_at = -1};
    vh_session *s = NULL;
    ck_assert_msg(create(&r, "cpu_generic", 2, &s) == VH_OK, "%s", vh_last_error());
    check_calls(&r, 1, 2);
    vh_session_destroy(s);
}
END_TEST

START_TEST(test_progress_two_stages)
{
    recorder r = {.abort_at = -1};
    vh_session *s = NULL;
    ck_assert_msg(create(&r, "cpu_generic,cpu_generic", 1, &s) == VH_OK, "%s", vh_last_error());
    check_calls(&r, 2, 1);
    vh_session_destroy(s);
}
END_TEST

/* With cpu_affinity the create runs on a library thread: the calls come from that one thread. */
START_TEST(test_progress_with_cpu_affinity)
{
    recorder r = {.abort_at = -1};
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model_dir;
    p.backends = "cpu_generic";
    cpu_set_t mine; /* one CPU this test may run on (a container's set may not hold CPU 0) */
    ck_assert_int_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &mine)) cpu++;
    char cpus[16];
    snprintf(cpus, sizeof cpus, "%d", cpu);
    p.cpu_affinity = cpus;
    p.progress_fn = record;
    p.progress_user = &r;
    r.creator = pthread_self();
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    ck_assert_int_eq(r.other_thread, 1); /* documented: not the caller's thread then */
    ck_assert_double_eq(r.fraction[r.n - 1], 1.0);
    vh_session_destroy(s);
}
END_TEST

/* Abort at call _i of a full create's calls: each gives VH_ERR_CANCELLED and no session. */
START_TEST(test_abort_at_each_call)
{
    recorder full = {.abort_at = -1};
    vh_session *s = NULL;
    ck_assert_msg(create(&full, "cpu_generic,cpu_generic", 2, &s) == VH_OK, "%s", vh_last_error());
    vh_session_destroy(s);
    for (int k = 0; k < full.n; k++) {
        recorder r = {.abort_at = k};
        s = (vh_session *)1;
        ck_assert_int_eq(create(&r, "cpu_generic,cpu_generic", 2, &s), VH_ERR_CANCELLED);
        ck_assert_ptr_null(s);
        ck_assert_int_eq(r.n, k + 1); /* nothing is reported after the abort */
        ck_assert_msg(strstr(vh_last_error(), "cancelled") && strstr(vh_last_error(), full.stage[k]),
                      "abort at %d (%s): %s", k, full.stage[k], vh_last_error());
    }
    /* and the library is fine afterwards */
    recorder again = {.abort_at = -1};
    ck_assert_msg(create(&again, "cpu_generic", 1, &s) == VH_OK, "%s", vh_last_error());
    vh_session_destroy(s);
}
END_TEST

START_TEST(test_v030_struct_size)
{
    const size_t v03 = offsetof(vh_session_params, progress_fn);
    recorder r = {.abort_at = 0}; /* would cancel at once if it were called */
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model_dir;
    p.backends = "cpu_generic";
    p.progress_fn = record; /* beyond a 0.3.0 caller's struct: not read */
    p.progress_user = &r;
    p.struct_size = v03;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    ck_assert_int_eq(r.n, 0);
    vh_session_destroy(s);
    p.struct_size = v03 + sizeof(void *); /* never released */
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_STRUCT_SIZE);
    ck_assert_ptr_null(s);
    /* vh_session_params_init_sized for a 0.3.0 caller fills only what it has */
    unsigned char buf[sizeof(vh_session_params)];
    memset(buf, 0xab, sizeof buf);
    vh_session_params_init_sized((vh_session_params *)buf, v03);
    for (size_t i = v03; i < sizeof buf; i++) ck_assert_uint_eq(buf[i], 0xab);
}
END_TEST

int main(void)
{
    model_dir = vh_test_source_path("models/openvla-tiny");
    Suite *suite = suite_create("create_progress");
    TCase *tc = tcase_create("progress");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_progress_one_stage);
    tcase_add_test(tc, test_progress_two_stages);
    tcase_add_test(tc, test_progress_with_cpu_affinity);
    tcase_add_test(tc, test_abort_at_each_call);
    tcase_add_test(tc, test_v030_struct_size);
    suite_add_tcase(suite, tc);
    int rc = vh_test_run_suite(suite);
    free(model_dir);
    return rc;
}
