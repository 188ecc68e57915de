/* lib/family/driving/camera_preprocess.c against the released eval pipeline of Orion's agent
 * (tests/fixtures/driving/make_camera_fixtures.py ran transforms_3d.py's ResizeCropFlipRotImage,
 * ResizeMultiview3D and NormalizeMultiviewImage with the agent config's values): a random 400 x 225
 * image (an upscale through Pillow's bicubic) and the agent's 1600 x 900 size (a pattern of sharp
 * wraps); the planes' rows at the edges and the stretch's seams, each plane's sum, the intrinsics.
 * Then bad arguments. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family/driving/camera_preprocess.h"
#include "test_support.h"

enum { OUT = 640 };

static uint8_t *pattern(uint32_t w, uint32_t h)
{
    uint8_t *rgb = malloc((size_t)w * h * 3);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            uint8_t *p = rgb + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)((x * 7 + y * 3) % 256), p[1] = (uint8_t)((x * 5 + y * 11) % 256), p[2] = (uint8_t)((x ^ y) % 256);
        }
    return rgb;
}

START_TEST(test_against_the_agent_pipeline)
{
    char *path = vh_test_fixture_path("driving/camera_cases.json");
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    ck_assert_msg(root, "%s: %s", path, jerr.text);
    free(path);
    const json_t *rows = json_object_get(root, "rows"), *cases = json_object_get(root, "cases");
    const size_t n_rows = json_array_size(rows);
    ck_assert_uint_eq(json_array_size(cases), 2);
    const vh_camera_prep prep = vh_camera_prep_agent();
    float *planes = malloc(sizeof(float) * 3 * OUT * OUT);
    for (size_t k = 0; k < 2; k++) {
        const json_t *cs = json_array_get(cases, k);
        const uint32_t w = (uint32_t)json_integer_value(json_object_get(cs, "w"));
        const uint32_t h = (uint32_t)json_integer_value(json_object_get(cs, "h"));
        uint8_t *rgb;
        if (k == 0) {
            char *p = vh_test_fixture_path("driving/camera_0.rgb");
            size_t size = 0;
            rgb = vh_test_read_file(p, &size);
            ck_assert_msg(rgb && size == (size_t)w * h * 3, "%s", p);
            free(p);
        } else {
            rgb = pattern(w, h);
        }
        double K[9];
        for (int i = 0; i < 9; i++) K[i] = json_real_value(json_array_get(json_object_get(cs, "intrinsic_in"), i));
        vh_error err;
        ck_assert_msg(vh_camera_preprocess(&prep, rgb, w, h, 0, planes, K, &err) == VH_OK, "%s", err.message);
        for (int i = 0; i < 9; i++) {
            const double want = json_real_value(json_array_get(json_object_get(cs, "intrinsic_out"), i));
            ck_assert_msg(fabs(K[i] - want) <= 1e-12 * fmax(fabs(want), 1.0), "K[%d] %.17g, want %.17g", i, K[i], want);
        }
        char rel[64];
        snprintf(rel, sizeof rel, "driving/%s", json_string_value(json_object_get(cs, "rows_file")));
        char *rp = vh_test_fixture_path(rel);
        size_t size = 0;
        float *want = (float *)vh_test_read_file(rp, &size);
        ck_assert_msg(want && size == sizeof(float) * 3 * n_rows * OUT, "%s", rp);
        free(rp);
        double worst = 0;
        for (size_t c = 0; c < 3; c++)
            for (size_t r = 0; r < n_rows; r++) {
                const size_t y = (size_t)json_integer_value(json_array_get(rows, r));
                for (size_t x = 0; x < OUT; x++) {
                    const double e = fabs((double)planes[(c * OUT + y) * OUT + x] - want[(c * n_rows + r) * OUT + x]);
                    if (e > worst || isnan(planes[(c * OUT + y) * OUT + x])) worst = isnan(e) ? INFINITY : e;
                }
            }
        double sum_error = 0;
        for (size_t c = 0; c < 3; c++) {
            double sum = 0;
            for (size_t i = 0; i < (size_t)OUT * OUT; i++) sum += planes[c * OUT * OUT + i];
            const double ref = json_real_value(json_array_get(json_object_get(cs, "plane_sums"), c));
            sum_error = fmax(sum_error, fabs(sum - ref) / (OUT * OUT));
        }
        printf("%ux%u: rows' largest error %.3g, mean error of the planes' sums %.3g\n", w, h, worst, sum_error);
        /* the same pixels (Pillow-exact resize, OpenCV's x2 stretch exact) and one float32 rounding
         * per normalised value: a few 1e-7 of values up to 2.6 */
        ck_assert_msg(worst <= 1e-5, "case %zu: error %g", k, worst);
        ck_assert_msg(sum_error <= 1e-6, "case %zu: planes' sums off by %g a pixel", k, sum_error);
        /* cut by output rows (a camera over several threads): the checked planes' bytes, each part
         * writing its rows only */
        float *parts = malloc(sizeof(float) * 3 * OUT * OUT);
        memset(parts, 0xff, sizeof(float) * 3 * OUT * OUT);
        const uint32_t cut[4] = {0, 1, OUT / 3 + 1, OUT};
        for (int q = 0; q < 3; q++)
            ck_assert_msg(vh_camera_preprocess_rows(&prep, rgb, w, h, 0, parts, cut[q], cut[q + 1], NULL, &err) == VH_OK,
                          "%s", err.message);
        ck_assert_msg(!memcmp(parts, planes, sizeof(float) * 3 * OUT * OUT), "case %zu: the parts differ", k);
        free(parts);
        free(want);
        free(rgb);
    }
    free(planes);
    json_decref(root);
}
END_TEST

START_TEST(test_bad_arguments)
{
    const vh_camera_prep prep = vh_camera_prep_agent();
    uint8_t px[3] = {1, 2, 3};
    float planes[3];
    vh_error err;
    ck_assert_int_eq(vh_camera_preprocess(&prep, NULL, 1, 1, 0, planes, NULL, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_camera_preprocess_rows(&prep, px, 1, 1, 0, planes, 5, 5, NULL, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_camera_preprocess_rows(&prep, px, 1, 1, 0, planes, 0, prep.out_h + 1, NULL, &err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_camera_preprocess(&prep, px, 0, 1, 0, planes, NULL, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_camera_preprocess(NULL, px, 1, 1, 0, planes, NULL, &err), VH_ERR_INVALID_ARGUMENT);
    vh_camera_prep zero = prep;
    zero.out_w = 0;
    ck_assert_int_eq(vh_camera_preprocess(&zero, px, 1, 1, 0, planes, NULL, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "camera preprocessing"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("camera_preprocess");
    TCase *tc = tcase_create("camera_preprocess");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_against_the_agent_pipeline);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
