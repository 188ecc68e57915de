/* Helpers shared by the fuzz targets. */
#ifndef VH_FUZZ_SUPPORT_H
#define VH_FUZZ_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

/* A fresh directory under TMPDIR, removed with its files when the process exits; NULL on failure. */
const char *vh_fuzz_temp_dir(void);

/* Write data[0 .. size) as the file `name` in vh_fuzz_temp_dir() (replacing it): its path, valid until
 * the next call; the process aborts when it cannot (the fuzzer's machine is broken, not the input). */
const char *vh_fuzz_write_input(const char *name, const uint8_t *data, size_t size);

/* The whole file at `path`, malloc'd (caller frees), *len its size; NULL if unreadable. */
char *vh_fuzz_read_file(const char *path, size_t *len);

/* A file of the bundled model (models/openvla-tiny), read once and kept; NULL if unreadable. */
const char *vh_fuzz_bundled_file(const char *name, size_t *len);

#endif
