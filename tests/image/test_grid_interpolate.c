/* lib/image/grid_interpolate.c against torch's F.interpolate(mode="bicubic", align_corners=False)
 * in float32 (tests/image/make_grid_interpolate_reference.py): upsampling, downsampling, non-square,
 * the identity and a single point; the edges clamp as torch's do. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>

#include "image/grid_interpolate.h"
#include "test_support.h"

static float *floats(const json_t *a, size_t *n)
{
    *n = json_array_size(a);
    float *v = malloc(sizeof(float) * (*n ? *n : 1));
    for (size_t i = 0; i < *n; i++) v[i] = (float)json_real_value(json_array_get(a, i));
    return v;
}

START_TEST(test_against_torch)
{
    char *path = vh_test_fixture_path("images/grid_interpolate.json");
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    ck_assert_msg(root, "%s: %s", path, jerr.text);
    free(path);
    const int64_t h = json_integer_value(json_object_get(root, "h")), w = json_integer_value(json_object_get(root, "w"));
    const int64_t c = json_integer_value(json_object_get(root, "channels"));
    size_t n;
    float *grid = floats(json_object_get(root, "grid"), &n);
    ck_assert_uint_eq(n, (size_t)(h * w * c));
    const json_t *cases = json_object_get(root, "cases");
    ck_assert_uint_ge(json_array_size(cases), 4);
    for (size_t k = 0; k < json_array_size(cases); k++) {
        const json_t *cs = json_array_get(cases, k);
        const int64_t oh = json_integer_value(json_object_get(cs, "out_h"));
        const int64_t ow = json_integer_value(json_object_get(cs, "out_w"));
        float *want = floats(json_object_get(cs, "values"), &n);
        ck_assert_uint_eq(n, (size_t)(oh * ow * c));
        float *got = malloc(sizeof(float) * n);
        vh_grid_interpolate_bicubic(grid, h, w, c, got, oh, ow);
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            const double e = fabs((double)got[i] - want[i]) / fmax(fabs(want[i]), 1.0);
            worst = e > worst || isnan(got[i]) ? (isnan(got[i]) ? INFINITY : e) : worst;
        }
        /* float32 on both sides with the same formulas, not the same roundings: torch's own float32
         * result is 8.9e-7 from its float64 one on the 9 x 4 case, ours 1.3e-6; 4e-6 leaves room */
        ck_assert_msg(worst <= 4e-6, "%lldx%lld -> %lldx%lld: error %g", (long long)h, (long long)w, (long long)oh,
                      (long long)ow, worst);
        free(got);
        free(want);
    }
    free(grid);
    json_decref(root);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("grid_interpolate");
    TCase *tc = tcase_create("grid_interpolate");
    tcase_add_test(tc, test_against_torch);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
