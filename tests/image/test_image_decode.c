/* vh_image_load / vh_image_decode_memory against Pillow 9.4: every fixture in
 * images/decode/manifest.txt must decode to exactly the pixels of
 * PIL.Image.open(f).convert("RGB") (compared through per-row CRC-32s written by
 * make_image_reference.py). Broken files (truncated, bytes flipped, oversize, not an image) must
 * give an error with a message, no crash, no leak (run under valgrind/ASan to see), no output. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "image_file.h"
#include "image_fixtures.h"
#include "test_support.h"

static size_t n_decode_fixtures;

/* Index of the first row whose CRC differs from the reference, or height if none. */
static uint32_t first_bad_row(const uint8_t *rgb, uint32_t width, uint32_t height,
                              const uint8_t *crcs)
{
    for (uint32_t y = 0; y < height; y++) {
        uint32_t want = (uint32_t)crcs[4 * y] | (uint32_t)crcs[4 * y + 1] << 8 |
                        (uint32_t)crcs[4 * y + 2] << 16 | (uint32_t)crcs[4 * y + 3] << 24;
        uLong got = crc32(0L, rgb + (size_t)y * width * 3, (uInt)width * 3);
        if (got != want)
            return y;
    }
    return height;
}

START_TEST(decodes_like_pillow)
{
    size_t n;
    manifest_line *lines = read_manifest("decode/manifest.txt", &n);
    ck_assert_uint_eq(n, n_decode_fixtures);
    manifest_line *m = &lines[_i];
    ck_assert_int_eq(m->n_fields, 4);
    uint32_t want_w = (uint32_t)strtoul(m->field[1], NULL, 10);
    uint32_t want_h = (uint32_t)strtoul(m->field[2], NULL, 10);
    char name[300];
    snprintf(name, sizeof name, "decode/%s", m->field[3]);
    size_t crc_size;
    uint8_t *crcs = read_image_fixture(name, &crc_size);
    ck_assert_msg(crcs && crc_size == (size_t)want_h * 4, "bad reference %s", name);

    snprintf(name, sizeof name, "images/decode/%s", m->field[0]);
    char *path = vh_test_fixture_path(name);
    uint8_t *rgb = NULL;
    uint32_t w = 0, h = 0;
    char err[256] = "";
    vh_status st = vh_image_load(path, &rgb, &w, &h, err, sizeof err);
    ck_assert_msg(st == VH_OK, "%s: status %d: %s", m->field[0], st, err);
    ck_assert_msg(w == want_w && h == want_h, "%s: %ux%u, Pillow %ux%u", m->field[0], w, h,
                  want_w, want_h);
    uint32_t bad = first_bad_row(rgb, w, h, crcs);
    ck_assert_msg(bad == h, "%s: row %u differs from Pillow's (first pixel %u %u %u)",
                  m->field[0], bad, bad < h ? rgb[(size_t)bad * w * 3] : 0,
                  bad < h ? rgb[(size_t)bad * w * 3 + 1] : 0,
                  bad < h ? rgb[(size_t)bad * w * 3 + 2] : 0);

    /* The in-memory entry point gives the same bytes. */
    size_t size;
    uint8_t *file = vh_test_read_file(path, &size);
    ck_assert_ptr_nonnull(file);
    uint8_t *again = NULL;
    ck_assert_int_eq(vh_image_decode_memory(file, size, &again, &w, &h, err, sizeof err), VH_OK);
    ck_assert_int_eq(memcmp(rgb, again, (size_t)w * h * 3), 0);

    free(again);
    free(file);
    free(rgb);
    free(path);
    free(crcs);
    free(lines);
}
END_TEST

/* Decode bytes that must fail: no pixels, a non-empty message, a status other than OK. */
static vh_status expect_failure(const uint8_t *data, size_t size, const char *what)
{
    uint8_t *rgb = (uint8_t *)&rgb; /* must be reset to NULL */
    uint32_t w, h;
    char err[256] = "";
    vh_status st = vh_image_decode_memory(data, size, &rgb, &w, &h, err, sizeof err);
    ck_assert_msg(st != VH_OK, "%s: decoded %ux%u", what, w, h);
    ck_assert_msg(rgb == NULL, "%s: pixels returned on error", what);
    ck_assert_msg(err[0] != '\0', "%s: no message", what);
    return st;
}

/* Decode bytes that may fail or not (a flipped byte can leave a JPEG decodable); never crash. */
static void expect_no_crash(const uint8_t *data, size_t size)
{
    uint8_t *rgb = NULL;
    uint32_t w = 0, h = 0;
    char err[256] = "";
    vh_status st = vh_image_decode_memory(data, size, &rgb, &w, &h, err, sizeof err);
    if (st == VH_OK) {
        ck_assert_ptr_nonnull(rgb);
        ck_assert(w >= 1 && h >= 1 && w <= VH_IMAGE_MAX_SIDE && h <= VH_IMAGE_MAX_SIDE);
        free(rgb);
    } else {
        ck_assert_ptr_null(rgb);
        ck_assert(err[0] != '\0');
    }
}

static uint8_t *read_decode_fixture(const char *file, size_t *size)
{
    char name[300];
    snprintf(name, sizeof name, "decode/%s", file);
    uint8_t *data = read_image_fixture(name, size);
    ck_assert_msg(data != NULL, "missing fixture %s", name);
    return data;
}

/* Files cut short anywhere, from nothing to one byte short, all fail. */
START_TEST(truncated_files_fail)
{
    static const char *files[] = {
        "png_rgb8_225x223.png", "png_interlaced_rgba16_61x47.png", "png_pal4_61x47.png",
        "png_gray16_61x47.png", "jpeg_rgb_225x223.jpg", "jpeg_progressive_333x197.jpg",
        "jpeg_cmyk_61x47.jpg", "jpeg_gray_61x47.jpg", "jpeg_rgb_1x1.jpg",
    };
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t size;
        uint8_t *data = read_decode_fixture(files[f], &size);
        size_t cuts[] = {1, 2, 3, 8, 16, 33, size / 5, size / 3, size / 2, size * 3 / 4,
                         size - 13, size - 12, size - 4, size - 2, size - 1};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            char what[128];
            snprintf(what, sizeof what, "%s cut to %zu of %zu bytes", files[f], cuts[c], size);
            /* A copy of exactly cuts[c] bytes, so a read past the end is a real overrun. */
            uint8_t *cut = malloc(cuts[c]);
            memcpy(cut, data, cuts[c]);
            vh_status st = expect_failure(cut, cuts[c], what);
            ck_assert_msg(st == VH_ERR_BAD_FRAME || st == VH_ERR_UNSUPPORTED, "%s: status %d",
                          what, st);
            free(cut);
        }
        free(data);
    }
}
END_TEST

/* A flipped byte in a PNG's chunks breaks a CRC (or the structure): always an error. */
START_TEST(png_flipped_bytes_fail)
{
    static const char *files[] = {"png_rgb8_333x197.png", "png_pal8_61x47.png",
                                  "png_interlaced_gray16_61x47.png"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t size;
        uint8_t *data = read_decode_fixture(files[f], &size);
        /* Every byte of the signature and IHDR, then a spread over the IDAT data; stop before
         * IEND and any ancillary chunk whose CRC errors libpng treats as benign. */
        for (size_t pos = 0; pos + 12 < size; pos += pos < 40 ? 1 : 1 + size / 97) {
            data[pos] ^= 0x5a;
            char what[128];
            snprintf(what, sizeof what, "%s byte %zu flipped", files[f], pos);
            expect_failure(data, size, what);
            data[pos] ^= 0x5a;
        }
        free(data);
    }
}
END_TEST

/* A flipped JPEG byte may still decode (the entropy data has no checksum); never crash, and
 * return either an image or an error with a message. */
START_TEST(jpeg_flipped_bytes_do_not_crash)
{
    static const char *files[] = {"jpeg_rgb_225x223.jpg", "jpeg_progressive_333x197.jpg",
                                  "jpeg_cmyk_61x47.jpg", "jpeg_gray_progressive_61x47.jpg"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t size;
        uint8_t *data = read_decode_fixture(files[f], &size);
        for (size_t pos = 0; pos < size; pos += pos < 700 ? 3 : 1 + size / 61) {
            for (int mask = 1; mask < 256; mask <<= 3) {
                data[pos] ^= (uint8_t)mask;
                expect_no_crash(data, size);
                data[pos] ^= (uint8_t)mask;
            }
        }
        free(data);
    }
}
END_TEST

/* Patch a 16-bit big-endian value. */
static void put_be16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

START_TEST(oversize_images_are_refused)
{
    /* PNG: IHDR width 16385, CRC recomputed so only the size is wrong. */
    size_t size;
    uint8_t *png = read_decode_fixture("png_rgb8_3x2.png", &size);
    ck_assert_int_eq(memcmp(png + 12, "IHDR", 4), 0);
    png[16] = 0, png[17] = 0, png[18] = 0x40, png[19] = 0x01; /* width 16385 */
    uLong crc = crc32(0L, png + 12, 17);
    png[29] = (uint8_t)(crc >> 24), png[30] = (uint8_t)(crc >> 16);
    png[31] = (uint8_t)(crc >> 8), png[32] = (uint8_t)crc;
    ck_assert_int_eq(expect_failure(png, size, "PNG 16385 wide"), VH_ERR_UNSUPPORTED);
    free(png);

    /* JPEG: the frame header's height and width (SOF0: FF C0 len(2) precision(1) h(2) w(2)). */
    uint8_t *jpg = read_decode_fixture("jpeg_rgb_3x2.jpg", &size);
    size_t sof = 0;
    for (size_t i = 2; i + 9 < size && !sof; i++)
        if (jpg[i] == 0xff && jpg[i + 1] == 0xc0)
            sof = i;
    ck_assert_uint_gt(sof, 0);
    put_be16(jpg + sof + 5, 20000);
    ck_assert_int_eq(expect_failure(jpg, size, "JPEG 20000 high"), VH_ERR_UNSUPPORTED);
    put_be16(jpg + sof + 5, 2);
    put_be16(jpg + sof + 7, 16385);
    ck_assert_int_eq(expect_failure(jpg, size, "JPEG 16385 wide"), VH_ERR_UNSUPPORTED);
    free(jpg);
}
END_TEST

START_TEST(bad_arguments_and_other_formats)
{
    uint8_t *rgb;
    uint32_t w, h;
    char err[256];
    static const uint8_t gif[] = "GIF89a\x01\x00\x01\x00";
    ck_assert_int_eq(expect_failure(gif, sizeof gif - 1, "GIF"), VH_ERR_UNSUPPORTED);
    static const uint8_t tiny[] = {0x89, 'P'};
    ck_assert_int_eq(expect_failure(tiny, sizeof tiny, "2 bytes"), VH_ERR_UNSUPPORTED);
    ck_assert_int_eq(expect_failure(tiny, 0, "empty"), VH_ERR_BAD_FRAME);
    static const uint8_t soi_only[] = {0xff, 0xd8, 0xff};
    ck_assert_int_eq(expect_failure(soi_only, sizeof soi_only, "SOI only"), VH_ERR_BAD_FRAME);
    ck_assert_int_eq(vh_image_decode_memory(NULL, 5, &rgb, &w, &h, err, sizeof err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_image_decode_memory(gif, 5, NULL, &w, &h, err, sizeof err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_image_decode_memory(gif, 5, &rgb, &w, &h, NULL, 0), VH_ERR_UNSUPPORTED);

    ck_assert_int_eq(vh_image_load("/nonexistent/frame.png", &rgb, &w, &h, err, sizeof err),
                     VH_ERR_IO);
    ck_assert_ptr_null(rgb);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/frame.png"));
    ck_assert_int_eq(vh_image_load("/", &rgb, &w, &h, err, sizeof err), VH_ERR_IO);

    /* A short message buffer is truncated, never overrun. */
    char small[8];
    memset(small, 'x', sizeof small);
    ck_assert_int_eq(vh_image_decode_memory(gif, 5, &rgb, &w, &h, small, 4), VH_ERR_UNSUPPORTED);
    ck_assert_int_eq(small[3], '\0');
    ck_assert_int_eq(small[4], 'x');
}
END_TEST

/* Nothing reaches stdout or stderr, even for libpng/libjpeg warnings and errors. */
START_TEST(decoding_prints_nothing)
{
    char *capture = vh_test_write_temp("", 0, ".txt");
    int fd = open(capture, O_WRONLY | O_TRUNC);
    ck_assert_int_ge(fd, 0);
    fflush(stdout);
    fflush(stderr);
    int saved_out = dup(1), saved_err = dup(2);
    dup2(fd, 1);
    dup2(fd, 2);

    static const char *files[] = {"png_pal8_short_7x1.png", "png_rgb8_3x2.png",
                                  "jpeg_rgb_3x2.jpg", "jpeg_cmyk_61x47.jpg"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        size_t size;
        uint8_t *data = read_decode_fixture(files[f], &size);
        for (size_t cut = 1; cut <= size; cut += 1 + size / 40) {
            uint8_t *rgb = NULL;
            uint32_t w, h;
            char err[256];
            if (vh_image_decode_memory(data, cut, &rgb, &w, &h, err, sizeof err) == VH_OK)
                free(rgb);
        }
        for (size_t pos = 0; pos < size; pos += 1 + size / 50) {
            data[pos] ^= 0xff;
            uint8_t *rgb = NULL;
            uint32_t w, h;
            char err[256];
            if (vh_image_decode_memory(data, size, &rgb, &w, &h, err, sizeof err) == VH_OK)
                free(rgb);
            data[pos] ^= 0xff;
        }
        free(data);
    }

    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);
    close(fd);
    size_t printed;
    char *text = (char *)vh_test_read_file(capture, &printed);
    ck_assert_msg(printed == 0, "decoders printed: %.200s", text);
    free(text);
    unlink(capture);
    free(capture);
}
END_TEST

static Suite *image_decode_suite(void)
{
    Suite *s = suite_create("image_decode");
    TCase *tc = tcase_create("pillow");
    tcase_set_timeout(tc, 60);
    /* A missing manifest still runs one iteration, which fails. */
    tcase_add_loop_test(tc, decodes_like_pillow, 0,
                        n_decode_fixtures > 0 ? (int)n_decode_fixtures : 1);
    suite_add_tcase(s, tc);
    tc = tcase_create("broken");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, truncated_files_fail);
    tcase_add_test(tc, png_flipped_bytes_fail);
    tcase_add_test(tc, jpeg_flipped_bytes_do_not_crash);
    tcase_add_test(tc, oversize_images_are_refused);
    tcase_add_test(tc, bad_arguments_and_other_formats);
    tcase_add_test(tc, decoding_prints_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    n_decode_fixtures = count_manifest_lines("decode/manifest.txt");
    return vh_test_run_suite(image_decode_suite());
}
