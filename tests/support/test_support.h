/* Shared helpers for the check-based tests. */
#ifndef VH_TEST_SUPPORT_H
#define VH_TEST_SUPPORT_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

/* Path of a file under tests/fixtures (VH_TEST_DATA); malloc'd, never NULL. */
char *vh_test_fixture_path(const char *relative);

/* Path of a file under the source root (VH_SOURCE_ROOT); malloc'd, never NULL. */
char *vh_test_source_path(const char *relative);

/* Whole file into memory (malloc'd, NUL-terminated beyond *size); NULL if unreadable. */
uint8_t *vh_test_read_file(const char *path, size_t *size);

/* Write bytes to a fresh temporary file; returns its malloc'd path (unlink it when done). */
char *vh_test_write_temp(const void *data, size_t size, const char *suffix);

/* A fresh temporary directory; malloc'd path. vh_test_remove_tree deletes it. */
char *vh_test_make_temp_dir(void);
void vh_test_remove_tree(const char *path);

/* Largest |a-b| / max(|b|, floor) over n values; a NaN anywhere counts as infinitely wrong. */
double vh_test_max_rel_error(const float *a, const double *b, size_t n, double floor);
/* Largest |a-b| over n values, relative to the largest |b| (a driving model's outputs: the
 * reference's scale, not each value's); NaN: infinite. */
double vh_test_rel_error_of_largest(const float *a, const double *b, size_t n);
/* The same against a float32 reference (a fixture stored in float32), widened exactly. */
double vh_test_rel_error_of_largest_f32(const float *a, const float *b, size_t n);

/* Whether backend `name` loads and has a usable device here. Asked in a child process, because a
 * GPU runtime initialised in the test's main process would not survive check's fork into each
 * test. Prints why not. */
int vh_test_backend_usable(const char *name);

/* Run a suite with check's default runner; returns the process exit status for main(). */
int vh_test_run_suite(Suite *suite);

#endif
