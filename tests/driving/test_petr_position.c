/* lib/family/driving/petr_position.c against the released Orion code (make_position_fixtures.py ran
 * locations, inverse_sigmoid and Orion.position_embeding with an identity position_encoder): six
 * cameras around the ego, a 5 x 5 feature grid, 64 LID depth bins; then bad arguments. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family/driving/petr_position.h"
#include "test_support.h"

START_TEST(test_against_position_embeding)
{
    char *path = vh_test_fixture_path("driving/position_cases.json");
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    ck_assert_msg(root, "%s: %s", path, jerr.text);
    free(path);
    const uint32_t cams = (uint32_t)json_integer_value(json_object_get(root, "cams"));
    const uint32_t grid = (uint32_t)json_integer_value(json_object_get(root, "grid"));
    const uint32_t pad = (uint32_t)json_integer_value(json_object_get(root, "pad"));
    vh_petr_position p = vh_petr_position_agent();
    p.pad_w = p.pad_h = pad;
    ck_assert_uint_eq(p.depth_num, (uint32_t)json_integer_value(json_object_get(root, "depth_num")));
    float *l2i = malloc(sizeof(float) * 16 * cams);
    for (uint32_t c = 0; c < cams; c++)
        for (int i = 0; i < 16; i++)
            l2i[c * 16 + i] = (float)json_real_value(json_array_get(json_array_get(json_object_get(root, "lidar2img"), c), i));
    const size_t n = (size_t)cams * grid * grid * p.depth_num * 3;
    float *got = malloc(sizeof(float) * n);
    vh_error err;
    ck_assert_msg(vh_petr_position_coords(&p, cams, l2i, grid, grid, got, &err) == VH_OK, "%s", err.message);
    char *fp = vh_test_fixture_path("driving/position_coords.f32");
    size_t size = 0;
    float *want = (float *)vh_test_read_file(fp, &size);
    ck_assert_msg(want && size == sizeof(float) * n, "%s", fp);
    free(fp);
    /* inverse_sigmoid magnifies the float32 rounding of t near 0 and 1 (|x| up to 11.5 at the
     * clamps): the error is judged on t = sigmoid(x), the normalised coordinate itself */
    double worst = 0, worst_x = 0;
    for (size_t i = 0; i < n; i++) {
        const double tg = 1.0 / (1.0 + exp(-(double)got[i])), tw = 1.0 / (1.0 + exp(-(double)want[i]));
        if (isnan(got[i]) || fabs(tg - tw) > worst) worst = isnan(got[i]) ? INFINITY : fabs(tg - tw);
        if (fabs((double)got[i] - want[i]) > worst_x) worst_x = fabs((double)got[i] - want[i]);
    }
    printf("position coordinates: largest error %.3g of the normalised coordinates, %.3g of their inverse "
           "sigmoids\n", worst, worst_x);
    ck_assert_msg(worst <= 1e-6, "error %g", worst);
    free(want);
    free(got);
    free(l2i);
    json_decref(root);
}
END_TEST

START_TEST(test_bad_arguments)
{
    const vh_petr_position p = vh_petr_position_agent();
    float l2i[16] = {0}, out[192];
    vh_error err;
    ck_assert_int_eq(vh_petr_position_coords(&p, 1, l2i, 1, 1, out, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err.message, "no inverse"), "%s", err.message);
    ck_assert_int_eq(vh_petr_position_coords(&p, 1, NULL, 1, 1, out, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_petr_position_coords(&p, 0, l2i, 1, 1, out, &err), VH_ERR_INVALID_ARGUMENT);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("petr_position");
    TCase *tc = tcase_create("petr_position");
    tcase_add_test(tc, test_against_position_embeding);
    tcase_add_test(tc, test_bad_arguments);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
