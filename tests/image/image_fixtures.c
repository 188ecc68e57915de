#include "image_fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "test_support.h"

uint8_t *read_image_fixture(const char *relative, size_t *size)
{
    char name[512];
    snprintf(name, sizeof name, "images/%s", relative);
    char *path = vh_test_fixture_path(name);
    uint8_t *data = vh_test_read_file(path, size);
    free(path);
    return data;
}

size_t count_manifest_lines(const char *relative)
{
    size_t size, n = 0;
    char *text = (char *)read_image_fixture(relative, &size);
    if (!text)
        return 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save))
        n += line[0] != '#';
    free(text);
    return n;
}

manifest_line *read_manifest(const char *relative, size_t *n)
{
    size_t size;
    char *text = (char *)read_image_fixture(relative, &size);
    ck_assert_msg(text != NULL, "cannot read fixture images/%s", relative);
    size_t capacity = 1;
    for (size_t i = 0; i < size; i++)
        capacity += text[i] == '\n';
    manifest_line *lines = calloc(capacity, sizeof *lines);
    ck_assert_ptr_nonnull(lines);
    *n = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || line[0] == '\0')
            continue;
        manifest_line *m = &lines[(*n)++];
        snprintf(m->text, sizeof m->text, "%s", line);
        for (char *fs = NULL, *f = strtok_r(m->text, " ", &fs); f && m->n_fields < 8;
             f = strtok_r(NULL, " ", &fs))
            m->field[m->n_fields++] = f;
    }
    free(text);
    return lines;
}

uint8_t *read_zlib_fixture(const char *relative, size_t size)
{
    size_t packed_size;
    uint8_t *packed = read_image_fixture(relative, &packed_size);
    ck_assert_msg(packed != NULL, "cannot read fixture images/%s", relative);
    uint8_t *out = malloc(size + 1);
    ck_assert_ptr_nonnull(out);
    uLongf out_size = size + 1;
    int rc = uncompress(out, &out_size, packed, packed_size);
    free(packed);
    ck_assert_msg(rc == Z_OK && out_size == size, "images/%s: inflate rc %d, %lu bytes, want %zu",
                  relative, rc, (unsigned long)out_size, size);
    return out;
}
