/* Reading the image test fixtures (tests/fixtures/images, made by make_image_reference.py). */
#ifndef VH_TEST_IMAGE_FIXTURES_H
#define VH_TEST_IMAGE_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

/* One manifest line split on spaces: at most 8 fields, each NUL-terminated. */
typedef struct manifest_line {
    char text[512];
    char *field[8];
    int n_fields;
} manifest_line;

/* The non-comment lines of images/<relative>; malloc'd array (free it), count in *n.
 * Fails the calling test (ck_abort) if the manifest is missing. */
manifest_line *read_manifest(const char *relative, size_t *n);

/* Number of non-comment lines of a manifest, for sizing loop tests in main() (outside a test:
 * no check assertions); 0 if it is missing. */
size_t count_manifest_lines(const char *relative);

/* images/<relative> as bytes; malloc'd; NULL if unreadable. */
uint8_t *read_image_fixture(const char *relative, size_t *size);

/* images/<relative> (a zlib stream) inflated; must be exactly `size` bytes or the test fails. */
uint8_t *read_zlib_fixture(const char *relative, size_t size);

#endif
