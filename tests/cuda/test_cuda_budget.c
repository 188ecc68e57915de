/* The cuda backend's memory bound: a session whose gpu_memory_budget cannot hold the model fails at
 * create with VH_ERR_DEVICE_OUT_OF_MEMORY and a message with the numbers, and leaves the process
 * able to create a session that fits; once created, frames take no device memory (all of it is
 * allocated at create). Exits 77 (skip) without a usable GPU. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

static vh_status create_mode(uint64_t budget, vh_execution_mode mode, vh_session **s)
{
    char *dir = vh_test_source_path("models/openvla-tiny");
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = "cuda";
    p.gpu_memory_budget = budget;
    p.execution_mode = mode;
    p.queue_policy = VH_QUEUE_BLOCK;
    vh_status st = vh_session_create(&p, s);
    free(dir);
    return st;
}

static vh_status create(uint64_t budget, vh_session **s)
{
    return create_mode(budget, VH_EXECUTION_SERIAL, s);
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

/* Device memory free after create (the warm-up included) and after frames of other sizes and
 * prompt lengths: equal, serial and packed (whose passes vary in rows and images). */
static void frames_take_no_device_memory(vh_execution_mode mode)
{
    vh_session *s = NULL;
    ck_assert_msg(create_mode(0, mode, &s) == VH_OK, "%s", vh_last_error());
    size_t free_before = 0, free_after = 0, total = 0;
    ck_assert_int_eq(cudaMemGetInfo(&free_before, &total), cudaSuccess);
    static const char *const instructions[] = {"pick up the red block", "open the drawer",
                                               "move the blue cup to the left of the plate and put the spoon in it"};
    enum { N = 30 };
    uint8_t *rgb = malloc(320 * 240 * 3);
    for (size_t i = 0; i < 320 * 240 * 3; i++) rgb[i] = (uint8_t)(i * 13 + i / 960);
    for (int i = 0; i < N; i++) {
        vh_frame f;
        vh_frame_init(&f);
        f.rgb = rgb;
        f.width = 320 - 40 * (i % 3);
        f.height = 240 - 20 * (i % 2);
        f.stride = 320 * 3;
        f.instruction = instructions[i % 3];
        ck_assert_int_eq(vh_submit_frame(s, &f, NULL), VH_OK);
    }
    for (int i = 0; i < N; i++) {
        vh_action a;
        vh_action_init(&a);
        ck_assert_int_eq(vh_poll_action(s, &a, 60000), VH_OK);
        ck_assert_int_eq(a.status, VH_OK);
    }
    ck_assert_int_eq(cudaMemGetInfo(&free_after, &total), cudaSuccess);
    printf("%s: device memory free %zu bytes after create, %zu after %d frames\n",
           mode == VH_EXECUTION_PACKED ? "packed" : "serial", free_before, free_after, N);
    ck_assert_msg(free_after == free_before, "frames took %lld bytes of device memory",
                  (long long)free_before - (long long)free_after);
    free(rgb);
    vh_session_destroy(s);
}

START_TEST(test_frames_take_no_device_memory_serial)
{
    frames_take_no_device_memory(VH_EXECUTION_SERIAL);
}
END_TEST

START_TEST(test_frames_take_no_device_memory_packed)
{
    frames_take_no_device_memory(VH_EXECUTION_PACKED);
}
END_TEST

/* The shared-memory path (cuda_shared_memory.h) is on exactly when the device is integrated or
 * VH_CUDA_INTEGRATED=1 forces it, and the backend says so, naming system RAM and the shared
 * bandwidth. The session is split over cuda and cpu_generic, so the hidden rows cross in mapped
 * memory (bind_hidden) and a frame must come back; the tokens are held to the fixtures by
 * gpu_pipeline_generic_integrated (a synthetic frame's margins say nothing). */
static char shared_memory_log[8192];

static void keep_log(void *user, vh_log_level level, const char *message)
{
    (void)user, (void)level;
    if (strlen(shared_memory_log) + strlen(message) + 2 < sizeof shared_memory_log) {
        strcat(shared_memory_log, message);
        strcat(shared_memory_log, "\n");
    }
}

static int device_integrated(void)
{
    int integrated = 0;
    return cudaDeviceGetAttribute(&integrated, cudaDevAttrIntegrated, 0) == cudaSuccess && integrated;
}

static void one_action(const char *backends, int32_t split, int log, vh_action *a)
{
    char *dir = vh_test_source_path("models/openvla-tiny");
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = backends;
    p.llm_split = split;
    p.execution_mode = VH_EXECUTION_SERIAL;
    if (log) p.log_fn = keep_log, p.log_level = VH_LOG_INFO;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    static uint8_t rgb[64 * 48 * 3];
    for (int i = 0; i < (int)sizeof rgb; i++) rgb[i] = (uint8_t)(i * 7);
    vh_frame f;
    vh_frame_init(&f);
    f.rgb = rgb, f.width = 64, f.height = 48, f.stride = 64 * 3, f.instruction = "pick up the red block";
    uint64_t id;
    vh_action_init(a);
    ck_assert_int_eq(vh_submit_frame(s, &f, &id), VH_OK);
    ck_assert_int_eq(vh_poll_action(s, a, 60000), VH_OK);
    ck_assert_msg(a->status == VH_OK, "%s", vh_session_last_error(s));
    vh_session_destroy(s);
    free(dir);
}

START_TEST(test_shared_memory_path)
{
    if (!vh_test_backend_usable("cpu_generic")) return;
    const char *forced = getenv("VH_CUDA_INTEGRATED");
    const int expected = forced && !strcmp(forced, "1") ? 1 : forced && !strcmp(forced, "0") ? 0 : device_integrated();
    shared_memory_log[0] = '\0';
    vh_action split;
    one_action("cuda,cpu_generic", 1, 1, &split);
    const int said = strstr(shared_memory_log, "shares the host's memory") != NULL;
    ck_assert_msg(said == expected, "shared-memory path %s, expected %s; log:\n%s", said ? "on" : "off",
                  expected ? "on" : "off", shared_memory_log);
    if (expected) {
        ck_assert_msg(strstr(shared_memory_log, "system RAM") != NULL, "%s", shared_memory_log);
        ck_assert_msg(strstr(shared_memory_log, "a split adds CPU compute, not bandwidth") != NULL, "%s",
                      shared_memory_log);
    }
    ck_assert_uint_eq(split.action_dim, 7);
}
END_TEST

int main(void)
{
    if (!vh_test_backend_usable("cuda")) return 77;
    Suite *s = suite_create("cuda_budget");
    TCase *tc = tcase_create("budget");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_budget_too_small);
    tcase_add_test(tc, test_frames_take_no_device_memory_serial);
    tcase_add_test(tc, test_frames_take_no_device_memory_packed);
    tcase_add_test(tc, test_shared_memory_path);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
