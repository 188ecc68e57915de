/* Read a whole small text file (config.json, an index, a tokenizer file) into memory. */
#ifndef VH_UTIL_FILE_READ_H
#define VH_UTIL_FILE_READ_H

#include <stddef.h>

#include "util/error.h"

/* Read the file at `path` into a new buffer, NUL-terminated after its last byte (the contents may
 * hold NUL bytes themselves: use *len). *text is malloc'd: the caller frees it. `len` may be NULL.
 * Refuses files larger than max_size bytes, so a wrong or hostile path cannot exhaust memory.
 * Returns VH_OK, or: VH_ERR_IO (with strerror) if it is missing, a dangling symbolic link,
 * unreadable, a directory or not a regular file; VH_ERR_BAD_MODEL if it holds more than max_size bytes; VH_ERR_OUT_OF_MEMORY.
 * On error *text is NULL. Thread-safe. */
vh_status vh_read_text_file(const char *path, size_t max_size, char **text, size_t *len,
                            vh_error *err);

/* VH_ERR_IO for open(path) failing with errno `error_number`: "PATH: cannot open: REASON", or, for a
 * symbolic link whose target does not exist, "PATH: a dangling symbolic link (to 'TARGET', which
 * does not exist)", so a broken link is never mistaken for a missing file. */
vh_status vh_file_open_error(const char *path, int error_number, vh_error *err);

#endif
