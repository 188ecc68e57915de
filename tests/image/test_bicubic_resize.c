/* vh_resize_bicubic_rgb8 against Pillow 9.4: every job in images/resize/manifest.txt (source,
 * target size, PIL's Image.resize(size, Image.BICUBIC) saved losslessly by
 * make_image_reference.py) must match every byte, with packed rows and with a row stride, with
 * every code path (vh_resize_code) this CPU runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/bicubic_resize.h"
#include "image_file.h"
#include "image_fixtures.h"
#include "test_support.h"

static size_t n_resize_jobs;

/* The code paths to test besides the default one (which is one of them). */
static const struct {
    vh_resize_code code;
    const char *name;
} codes[] = {
    {VH_RESIZE_CODE_PORTABLE, "portable"},
    {VH_RESIZE_CODE_AVX2, "avx2"},
    {VH_RESIZE_CODE_NEON, "neon"},
};

static uint8_t *load_image(const char *relative, uint32_t *w, uint32_t *h)
{
    char name[300];
    snprintf(name, sizeof name, "images/%s", relative);
    char *path = vh_test_fixture_path(name);
    uint8_t *rgb = NULL;
    char err[256] = "";
    vh_status st = vh_image_load(path, &rgb, w, h, err, sizeof err);
    ck_assert_msg(st == VH_OK, "%s: %s", relative, err);
    free(path);
    return rgb;
}

/* Fail with the first differing byte and the number of differing bytes. */
static void assert_same_pixels(const uint8_t *got, const uint8_t *want, uint32_t w, uint32_t h,
                               const char *what)
{
    size_t n = (size_t)w * h * 3, differ = 0, first = n;
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            differ++;
            if (first == n)
                first = i;
        }
    }
    ck_assert_msg(differ == 0,
                  "%s: %zu of %zu bytes differ from Pillow; first at x=%zu y=%zu channel %zu: "
                  "%u, Pillow %u",
                  what, differ, n, first / 3 % w, first / 3 / w, first % 3, got[first],
                  want[first]);
}

START_TEST(resizes_like_pillow)
{
    size_t n;
    manifest_line *lines = read_manifest("resize/manifest.txt", &n);
    ck_assert_uint_eq(n, n_resize_jobs);
    manifest_line *m = &lines[_i];
    ck_assert_int_eq(m->n_fields, 4);
    uint32_t dst_w = (uint32_t)strtoul(m->field[1], NULL, 10);
    uint32_t dst_h = (uint32_t)strtoul(m->field[2], NULL, 10);
    uint32_t src_w, src_h, ref_w, ref_h;
    uint8_t *src = load_image(m->field[0], &src_w, &src_h);
    uint8_t *ref = load_image(m->field[3], &ref_w, &ref_h);
    ck_assert(ref_w == dst_w && ref_h == dst_h);
    char what[256];
    snprintf(what, sizeof what, "%s %ux%u -> %ux%u", m->field[0], src_w, src_h, dst_w, dst_h);

    size_t dst_bytes = (size_t)dst_w * dst_h * 3;
    uint8_t *dst = malloc(dst_bytes);
    vh_error err = {0};
    ck_assert_msg(vh_resize_bicubic_rgb8(src, src_w, src_h, 0, dst, dst_w, dst_h, &err) == VH_OK,
                  "%s: %s", what, err.message);
    assert_same_pixels(dst, ref, dst_w, dst_h, what);

    /* Row ranges (a crop, a camera split across threads): Pillow's rows, whatever the range. */
    const uint32_t ranges[5][2] = {{0, 1}, {0, (dst_h + 1) / 2}, {dst_h / 2, dst_h}, {dst_h / 3, 2 * dst_h / 3 + 1},
                                   {dst_h - 1, dst_h}};
    for (int r = 0; r < 5; r++) {
        const uint32_t y0 = ranges[r][0], y1 = ranges[r][1] > dst_h ? dst_h : ranges[r][1];
        if (y0 >= y1) continue;
        char what_rows[300];
        snprintf(what_rows, sizeof what_rows, "%s rows %u..%u", what, y0, y1);
        memset(dst, 0, dst_bytes);
        ck_assert_msg(vh_resize_bicubic_rgb8_rows(src, src_w, src_h, 0, dst, dst_w, dst_h, y0, y1, &err) == VH_OK,
                      "%s: %s", what_rows, err.message);
        assert_same_pixels(dst, ref + (size_t)y0 * dst_w * 3, dst_w, y1 - y0, what_rows);
    }

    /* Rows further apart than width * 3, the gap full of bytes that must not be read. */
    size_t stride = (size_t)src_w * 3 + 13;
    uint8_t *strided = malloc(stride * src_h);
    memset(strided, 0xa5, stride * src_h);
    for (uint32_t y = 0; y < src_h; y++)
        memcpy(strided + y * stride, src + (size_t)y * src_w * 3, (size_t)src_w * 3);

    for (size_t c = 0; c < sizeof codes / sizeof codes[0]; c++) {
        if (!vh_resize_code_available(codes[c].code))
            continue;
        char what_code[300];
        snprintf(what_code, sizeof what_code, "%s (%s)", what, codes[c].name);
        memset(dst, 0, dst_bytes);
        ck_assert_msg(vh_resize_bicubic_rgb8_code(src, src_w, src_h, 0, dst, dst_w, dst_h,
                                                  codes[c].code, &err) == VH_OK,
                      "%s: %s", what_code, err.message);
        assert_same_pixels(dst, ref, dst_w, dst_h, what_code);
        memset(dst, 0, dst_bytes);
        ck_assert_int_eq(vh_resize_bicubic_rgb8_code(strided, src_w, src_h, stride, dst, dst_w,
                                                     dst_h, codes[c].code, &err),
                         VH_OK);
        strcat(what_code, " (strided)");
        assert_same_pixels(dst, ref, dst_w, dst_h, what_code);
    }

    free(strided);
    free(dst);
    free(ref);
    free(src);
    free(lines);
}
END_TEST

/* The vector code each architecture must have, so that the jobs above really run it: AVX2 is a
 * run-time choice on x86-64; NEON is baseline on aarch64, always there and the default. */
START_TEST(vector_code_compiled_in)
{
    ck_assert(vh_resize_code_available(VH_RESIZE_CODE_PORTABLE));
#if defined(__aarch64__)
    ck_assert(vh_resize_code_available(VH_RESIZE_CODE_NEON));
    ck_assert(!vh_resize_code_available(VH_RESIZE_CODE_AVX2));
#else
    ck_assert(!vh_resize_code_available(VH_RESIZE_CODE_NEON));
#endif
}
END_TEST

START_TEST(refuses_bad_arguments)
{
    uint8_t src[4 * 3 * 3] = {0}, dst[16 * 3] = {0};
    vh_error err = {0};
    ck_assert_int_eq(vh_resize_bicubic_rgb8(NULL, 4, 3, 0, dst, 4, 4, &err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "source"));
    ck_assert_int_eq(vh_resize_bicubic_rgb8(src, 4, 3, 0, NULL, 4, 4, &err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_resize_bicubic_rgb8(src, 0, 3, 0, dst, 4, 4, &err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_resize_bicubic_rgb8(src, 4, 3, 0, dst, 4, 0, &err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_resize_bicubic_rgb8(src, 16385, 1, 0, dst, 4, 4, &err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_resize_bicubic_rgb8(src, 4, 3, 0, dst, 1, 16385, &err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "16384"));
    ck_assert_int_eq(vh_resize_bicubic_rgb8(src, 4, 3, 11, dst, 4, 4, &err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "stride"));
    ck_assert_int_eq(vh_resize_bicubic_rgb8_rows(src, 4, 3, 0, dst, 4, 4, 2, 2, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_resize_bicubic_rgb8_rows(src, 4, 3, 0, dst, 4, 4, 3, 5, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(err.message, "rows"));
}
END_TEST

/* The extremes of the size range work (the widest kernel: 16384 -> 1 reads 65537 taps). A flat
 * image must stay flat when enlarging: the weights of each output sum to one. */
START_TEST(extreme_sizes)
{
    vh_error err = {0};
    uint32_t wide = VH_RESIZE_MAX_SIDE;
    uint8_t *row = malloc((size_t)wide * 3 * 2);
    for (size_t c = 0; c < sizeof codes / sizeof codes[0]; c++) {
        if (!vh_resize_code_available(codes[c].code))
            continue;
        for (size_t i = 0; i < (size_t)wide * 3 * 2; i++)
            row[i] = (uint8_t)(i * 7);
        uint8_t one[3];
        ck_assert_int_eq(vh_resize_bicubic_rgb8_code(row, wide, 2, 0, one, 1, 1, codes[c].code,
                                                     &err),
                         VH_OK);
        uint8_t column[2 * 3 * 5];
        ck_assert_int_eq(vh_resize_bicubic_rgb8_code(row, 2, wide, 0, column, 2, 5,
                                                     codes[c].code, &err),
                         VH_OK);

        static const uint8_t flat[3] = {200, 3, 77};
        ck_assert_int_eq(vh_resize_bicubic_rgb8_code(flat, 1, 1, 0, row, wide, 2, codes[c].code,
                                                     &err),
                         VH_OK);
        for (size_t i = 0; i < (size_t)wide * 2; i++)
            ck_assert_msg(memcmp(row + 3 * i, flat, 3) == 0, "%s: pixel %zu not flat",
                          codes[c].name, i);
    }
    free(row);
}
END_TEST

static Suite *resize_suite(void)
{
    Suite *s = suite_create("image_resize");
    TCase *tc = tcase_create("pillow");
    tcase_set_timeout(tc, 60);
    /* A missing manifest still runs one iteration, which fails. */
    tcase_add_loop_test(tc, resizes_like_pillow, 0, n_resize_jobs > 0 ? (int)n_resize_jobs : 1);
    tcase_add_test(tc, vector_code_compiled_in);
    tcase_add_test(tc, refuses_bad_arguments);
    tcase_add_test(tc, extreme_sizes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    n_resize_jobs = count_manifest_lines("resize/manifest.txt");
    return vh_test_run_suite(resize_suite());
}
