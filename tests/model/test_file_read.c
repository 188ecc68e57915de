/* vh_read_text_file: exact contents, the size cap, and the ways a path can be unreadable. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_support.h"
#include "util/file_read.h"

START_TEST(reads_exact_bytes)
{
    const char contents[] = "{\"a\": 1}\n\0tail"; /* an embedded NUL is kept */
    char *path = vh_test_write_temp(contents, sizeof contents - 1, ".json");
    char *text = NULL;
    size_t len = 0;
    vh_error err;
    ck_assert_int_eq(vh_read_text_file(path, 1024, &text, &len, &err), VH_OK);
    ck_assert_uint_eq(len, sizeof contents - 1);
    ck_assert_int_eq(memcmp(text, contents, len), 0);
    ck_assert_int_eq(text[len], '\0');
    free(text);
    /* Exactly at the cap is fine; len may be NULL. */
    ck_assert_int_eq(vh_read_text_file(path, sizeof contents - 1, &text, NULL, &err), VH_OK);
    free(text);
    unlink(path);
    free(path);

    path = vh_test_write_temp("", 0, ".json");
    ck_assert_int_eq(vh_read_text_file(path, 0, &text, &len, &err), VH_OK);
    ck_assert_uint_eq(len, 0);
    ck_assert_str_eq(text, "");
    free(text);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(refuses_over_cap)
{
    char *path = vh_test_write_temp("0123456789", 10, ".json");
    char *text = (char *)1;
    vh_error err;
    ck_assert_int_eq(vh_read_text_file(path, 9, &text, NULL, &err), VH_ERR_BAD_MODEL);
    ck_assert_ptr_null(text);
    ck_assert_msg(strstr(err.message, path) && strstr(err.message, "limit of 9 bytes"), "%s",
                  err.message);
    unlink(path);
    free(path);
}
END_TEST

/* procfs reports size 0: the reader must read to EOF rather than trust st_size. */
START_TEST(reads_files_with_unknown_size)
{
    char *text;
    size_t len;
    vh_error err;
    ck_assert_int_eq(vh_read_text_file("/proc/self/status", 1 << 20, &text, &len, &err), VH_OK);
    ck_assert_uint_gt(len, 0);
    ck_assert_ptr_nonnull(strstr(text, "Name:"));
    free(text);
    ck_assert_int_eq(vh_read_text_file("/proc/self/status", 8, &text, &len, &err),
                     VH_ERR_BAD_MODEL);
}
END_TEST

START_TEST(unreadable_paths)
{
    char *text = (char *)1;
    vh_error err;
    ck_assert_int_eq(vh_read_text_file("/nonexistent/config.json", 100, &text, NULL, &err),
                     VH_ERR_IO);
    ck_assert_ptr_null(text);
    ck_assert_msg(strstr(err.message, "/nonexistent/config.json: cannot open: No such file"),
                  "%s", err.message);
    char *dir = vh_test_make_temp_dir();
    ck_assert_int_eq(vh_read_text_file(dir, 100, &text, NULL, &err), VH_ERR_IO);
    ck_assert_msg(strstr(err.message, "is a directory"), "%s", err.message);
    vh_test_remove_tree(dir);
    free(dir);
    ck_assert_int_eq(vh_read_text_file("/dev/null", 100, &text, NULL, &err), VH_ERR_IO);
    ck_assert_msg(strstr(err.message, "not a regular file"), "%s", err.message);
}
END_TEST

static Suite *file_read_suite(void)
{
    Suite *s = suite_create("file_read");
    TCase *tc = tcase_create("read");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, reads_exact_bytes);
    tcase_add_test(tc, refuses_over_cap);
    tcase_add_test(tc, reads_files_with_unknown_size);
    tcase_add_test(tc, unreadable_paths);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return vh_test_run_suite(file_read_suite());
}
