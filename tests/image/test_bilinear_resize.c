/* lib/image/bilinear_resize.c against OpenCV's cv2.resize(INTER_LINEAR) on float32 images
 * (tests/image/make_cv2_resize_reference.py, OpenCV 4.6): up, down, one axis only (Orion's
 * 640 x 320 -> 640 x 640 is x2 in y alone), non-integer factors, one pixel, the identity. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "image/bilinear_resize.h"
#include "test_support.h"

static float *floats(const json_t *a, size_t *n)
{
    *n = json_array_size(a);
    float *v = malloc(sizeof(float) * (*n ? *n : 1));
    for (size_t i = 0; i < *n; i++) v[i] = (float)json_real_value(json_array_get(a, i));
    return v;
}

START_TEST(test_against_opencv)
{
    char *path = vh_test_fixture_path("images/cv2_resize.json");
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    ck_assert_msg(root, "%s: %s", path, jerr.text);
    free(path);
    const int64_t w = json_integer_value(json_object_get(root, "w")), h = json_integer_value(json_object_get(root, "h"));
    const int64_t c = json_integer_value(json_object_get(root, "channels"));
    size_t n;
    float *img = floats(json_object_get(root, "image"), &n);
    ck_assert_uint_eq(n, (size_t)(w * h * c));
    const json_t *cases = json_object_get(root, "cases");
    ck_assert_uint_ge(json_array_size(cases), 5);
    for (size_t k = 0; k < json_array_size(cases); k++) {
        const json_t *cs = json_array_get(cases, k);
        const int64_t dw = json_integer_value(json_object_get(cs, "dw")), dh = json_integer_value(json_object_get(cs, "dh"));
        float *want = floats(json_object_get(cs, "values"), &n);
        ck_assert_uint_eq(n, (size_t)(dw * dh * c));
        float *got = malloc(sizeof(float) * n);
        vh_resize_bilinear_f32(img, w, h, c, got, dw, dh);
        double worst = 0;
        for (size_t i = 0; i < n; i++) {
            const double e = isnan(got[i]) ? INFINITY : fabs((double)got[i] - want[i]) / fmax(fabs(want[i]), 1.0);
            if (e > worst) worst = e;
        }
        printf("%lldx%lld -> %lldx%lld: largest error %.3g\n", (long long)w, (long long)h, (long long)dw,
               (long long)dh, worst);
        /* the same float32 formulas: at most a rounding apart (OpenCV's vector loops) */
        ck_assert_msg(worst <= 1e-6, "%lldx%lld -> %lldx%lld: error %g", (long long)w, (long long)h, (long long)dw,
                      (long long)dh, worst);
        free(got);
        free(want);
    }
    free(img);
    json_decref(root);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bilinear_resize");
    TCase *tc = tcase_create("bilinear_resize");
    tcase_add_test(tc, test_against_opencv);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
