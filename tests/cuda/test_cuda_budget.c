/* The cuda backend's memory bound: a session whose gpu_memory_budget cannot hold the model fails at
 * create with VH_ERR_DEVICE_OUT_OF_MEMORY and a message with the numbers, and leaves the process
 * able to create a session that fits. Exits 77 (skip) without a usable GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

static vh_status create(uint64_t budget, vh_session **s)
{
    char *dir = vh_test_source_path("models/openvla-tiny");
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = "cuda";
    p.gpu_memory_budget = budget;
    vh_status st = vh_session_create(&p, s);
    free(dir);
    return st;
}

START_TEST(test_budget_too_small)
{
    vh_session *s = (vh_session *)1;
    ck_assert_int_eq(create(1 << 20, &s), VH_ERR_DEVICE_OUT_OF_MEMORY);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(vh_last_error(), "memory budget") != NULL, "%s", vh_last_error());
    ck_assert_msg(strstr(vh_last_error(), "weights") != NULL, "%s", vh_last_error());
    /* the same process then loads a session that fits, and reports its memory */
    ck_assert_msg(create((uint64_t)1 << 30, &s) == VH_OK, "%s", vh_last_error());
    vh_session_info info;
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
    ck_assert_str_eq(info.backends, "cuda");
    ck_assert_uint_gt(info.backend_weight_bytes, 8 << 20);
    ck_assert_uint_le(info.backend_weight_bytes + info.backend_work_bytes, (uint64_t)1 << 30);
    vh_session_destroy(s);
}
END_TEST

int main(void)
{
    if (!vh_test_backend_usable("cuda")) return 77;
    Suite *s = suite_create("cuda_budget");
    TCase *tc = tcase_create("budget");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_budget_too_small);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
