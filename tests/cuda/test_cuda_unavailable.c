/* Without a usable GPU, backends = "cuda" is refused with why: on a machine with no NVIDIA driver
 * loaded (no /proc/driver/nvidia/version) the CUDA runtime says "CUDA driver version is
 * insufficient", which reads as an old driver; the plugin's reason says "no CUDA device
 * (cudaGetDeviceCount: ...; no NVIDIA driver is loaded)" instead. With a driver and no device it
 * is "no CUDA device (cudaGetDeviceCount: no CUDA-capable device is detected)". Skipped (77) where
 * a GPU works. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

static char *model_dir;

static vh_status create_cuda(vh_session **s)
{
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model_dir;
    p.backends = "cuda";
    p.warmup_frames = 0;
    return vh_session_create(&p, s);
}

START_TEST(test_no_device_reason)
{
    vh_session *s = NULL;
    ck_assert_int_eq(create_cuda(&s), VH_ERR_BACKEND_FAILED);
    ck_assert_ptr_null(s);
    const char *why = vh_last_error();
    ck_assert_msg(strstr(why, "backend 'cuda' cannot run on this machine: "), "%s", why);
    if (access("/proc/driver/nvidia/version", F_OK) != 0) /* no driver: said so, not "insufficient" */
        ck_assert_msg(strstr(why, "no CUDA device (cudaGetDeviceCount: ") && strstr(why, "no NVIDIA driver is loaded"),
                      "%s", why);
    else /* a driver: no device, or one the runtime cannot use (an old driver): the runtime's words */
        ck_assert_msg(strstr(why, "no CUDA device (cudaGetDeviceCount: ") || strstr(why, "no usable CUDA device: "),
                      "%s", why);
}
END_TEST

int main(void)
{
    model_dir = vh_test_source_path("models/openvla-tiny");
    vh_session *s = NULL;
    if (create_cuda(&s) == VH_OK) { /* a GPU works here: nothing to check */
        vh_session_destroy(s);
        free(model_dir);
        return 77;
    }
    Suite *suite = suite_create("cuda_unavailable");
    TCase *tc = tcase_create("reason");
    tcase_add_test(tc, test_no_device_reason);
    suite_add_tcase(suite, tc);
    int rc = vh_test_run_suite(suite);
    free(model_dir);
    return rc;
}
