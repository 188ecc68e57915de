/* Internal error reporting: every fallible internal function takes a vh_error and returns the
 * status it also stores there, with a one-line message that names the file, tensor or field. */
#ifndef VH_UTIL_ERROR_H
#define VH_UTIL_ERROR_H

#include <stdarg.h>

#include "vlahybrid/vlahybrid.h"

#define VH_ERROR_MESSAGE_SIZE 512

typedef struct vh_error {
    vh_status status;
    char message[VH_ERROR_MESSAGE_SIZE];
} vh_error;

#if defined(__GNUC__)
#define VH_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define VH_PRINTF(fmt_index, first_arg)
#endif

/* Record status and message (printf-style); returns status. err may be NULL. */
vh_status vh_error_set(vh_error *err, vh_status status, const char *fmt, ...) VH_PRINTF(3, 4);
vh_status vh_error_setv(vh_error *err, vh_status status, const char *fmt, va_list ap);

/* Prefix the message already in err with more context ("loading model: " + message). */
vh_status vh_error_prefix(vh_error *err, const char *fmt, ...) VH_PRINTF(2, 3);

void vh_error_clear(vh_error *err);

/* Publish err as the calling thread's vh_last_error(). */
void vh_error_publish_thread(const vh_error *err);

#endif
