/* The core's knobs (lib/util/knobs.c): each accessor reads its variable when called (a test or a
 * second session sees a change), and VH_MINDDRIVE_ROUNDS takes 'packed', 'sequential', empty or
 * unset, and refuses anything else with a message naming both values. */
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "util/knobs.h"

START_TEST(test_paths_read_when_called)
{
    unsetenv("VH_BACKEND_PATH");
    unsetenv("VH_CACHE_DIR");
    unsetenv("VH_TRACE");
    ck_assert_ptr_null(vh_knob_backend_path());
    ck_assert_ptr_null(vh_knob_cache_dir());
    ck_assert_ptr_null(vh_knob_trace_path());
    setenv("VH_BACKEND_PATH", "/a:/b", 1);
    setenv("VH_CACHE_DIR", "off", 1);
    setenv("VH_TRACE", "/tmp/t.json", 1);
    ck_assert_str_eq(vh_knob_backend_path(), "/a:/b");
    ck_assert_str_eq(vh_knob_cache_dir(), "off");
    ck_assert_str_eq(vh_knob_trace_path(), "/tmp/t.json");
    setenv("VH_CACHE_DIR", "/tmp/c", 1);
    ck_assert_str_eq(vh_knob_cache_dir(), "/tmp/c");
}
END_TEST

START_TEST(test_minddrive_rounds)
{
    static const struct {
        const char *value; /* NULL: unset */
        int sequential;
    } accepted[] = {{NULL, 0}, {"", 0}, {"packed", 0}, {"sequential", 1}};
    for (size_t i = 0; i < sizeof accepted / sizeof accepted[0]; i++) {
        if (accepted[i].value) setenv("VH_MINDDRIVE_ROUNDS", accepted[i].value, 1);
        else unsetenv("VH_MINDDRIVE_ROUNDS");
        int sequential = -1;
        vh_error err = {0};
        ck_assert_int_eq(vh_knob_minddrive_sequential(&sequential, &err), VH_OK);
        ck_assert_int_eq(sequential, accepted[i].sequential);
    }
    setenv("VH_MINDDRIVE_ROUNDS", "both", 1);
    int sequential = -1;
    vh_error err = {0};
    ck_assert_int_eq(vh_knob_minddrive_sequential(&sequential, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(sequential, 0);
    ck_assert_str_eq(err.message, "VH_MINDDRIVE_ROUNDS='both': 'packed' (the default: both rounds as two segments "
                                  "of one pass) or 'sequential' (two passes)");
    unsetenv("VH_MINDDRIVE_ROUNDS");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("knobs");
    TCase *tc = tcase_create("knobs");
    tcase_add_test(tc, test_paths_read_when_called);
    tcase_add_test(tc, test_minddrive_rounds);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
