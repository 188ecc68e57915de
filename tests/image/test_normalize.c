/* vh_image_normalize_rgb8 against torch 1.13: images/normalize/<set>.f32.z holds torchvision's
 * to_tensor + normalize of images/normalize/source.rgb.z (64x48, every byte value in every
 * channel) for the DINOv2, SigLIP and ImageNet constants; the result must match bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/normalize.h"
#include "image_fixtures.h"
#include "test_support.h"

enum { WIDTH = 64, HEIGHT = 48 };

static size_t n_norm_sets;

/* Fail with the first float whose bits differ. */
static void assert_same_bits(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, &got[i], 4);
        memcpy(&b, &want[i], 4);
        ck_assert_msg(a == b, "%s: float %zu (plane %zu, y %zu, x %zu) is %.9g, torch %.9g", what,
                      i, i / (WIDTH * HEIGHT), i / WIDTH % HEIGHT, i % WIDTH, (double)got[i],
                      (double)want[i]);
    }
}

START_TEST(normalizes_like_torch)
{
    size_t n;
    manifest_line *lines = read_manifest("normalize/manifest.txt", &n);
    ck_assert_uint_eq(n, n_norm_sets);
    manifest_line *m = &lines[_i];
    ck_assert_int_eq(m->n_fields, 8);
    vh_image_norm norm;
    for (int c = 0; c < 3; c++) {
        norm.mean[c] = strtof(m->field[1 + c], NULL); /* hexadecimal: exact */
        norm.std[c] = strtof(m->field[4 + c], NULL);
    }
    size_t n_floats = (size_t)3 * WIDTH * HEIGHT;
    uint8_t *rgb = read_zlib_fixture("normalize/source.rgb.z", (size_t)WIDTH * HEIGHT * 3);
    float *want = (float *)read_zlib_fixture(m->field[7], n_floats * sizeof(float));
    float *got = malloc(n_floats * sizeof *got);
    vh_error err = {0};
    ck_assert_int_eq(vh_image_normalize_rgb8(rgb, WIDTH, HEIGHT, 0, &norm, got, &err), VH_OK);
    assert_same_bits(got, want, n_floats, m->field[0]);

    /* Strided rows give the same planes. */
    size_t stride = WIDTH * 3 + 5;
    uint8_t *strided = calloc(stride, HEIGHT);
    for (int y = 0; y < HEIGHT; y++)
        memcpy(strided + y * stride, rgb + y * WIDTH * 3, WIDTH * 3);
    memset(got, 0, n_floats * sizeof *got);
    ck_assert_int_eq(vh_image_normalize_rgb8(strided, WIDTH, HEIGHT, stride, &norm, got, &err),
                     VH_OK);
    assert_same_bits(got, want, n_floats, m->field[0]);

    free(strided);
    free(got);
    free(want);
    free(rgb);
    free(lines);
}
END_TEST

START_TEST(refuses_bad_arguments)
{
    uint8_t rgb[2 * 2 * 3] = {0};
    float out[12];
    vh_image_norm norm = {{0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
    vh_error err = {0};
    ck_assert_int_eq(vh_image_normalize_rgb8(NULL, 2, 2, 0, &norm, out, &err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_image_normalize_rgb8(rgb, 2, 2, 0, NULL, out, &err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_image_normalize_rgb8(rgb, 0, 2, 0, &norm, out, &err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_image_normalize_rgb8(rgb, 2, 2, 5, &norm, out, &err),
                     VH_ERR_INVALID_ARGUMENT);
    norm.std[1] = 0.0f;
    ck_assert_int_eq(vh_image_normalize_rgb8(rgb, 2, 2, 0, &norm, out, &err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "channel 1"));
    norm.std[1] = 0.5f;
    norm.mean[2] = NAN;
    ck_assert_int_eq(vh_image_normalize_rgb8(rgb, 2, 2, 0, &norm, out, &err),
                     VH_ERR_INVALID_ARGUMENT);
}
END_TEST

static Suite *normalize_suite(void)
{
    Suite *s = suite_create("image_normalize");
    TCase *tc = tcase_create("torch");
    tcase_set_timeout(tc, 30);
    /* A missing manifest still runs one iteration, which fails. */
    tcase_add_loop_test(tc, normalizes_like_torch, 0, n_norm_sets > 0 ? (int)n_norm_sets : 1);
    tcase_add_test(tc, refuses_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    n_norm_sets = count_manifest_lines("normalize/manifest.txt");
    return vh_test_run_suite(normalize_suite());
}
