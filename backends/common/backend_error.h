/* The one-line error message a backend writes into the core's buffer, returning the status. */
#ifndef VH_BACKEND_ERROR_H
#define VH_BACKEND_ERROR_H

#include <stdarg.h>
#include <stdio.h>

#include "vlahybrid/vlahybrid.h"

__attribute__((format(printf, 4, 5))) static inline vh_status vh_backend_fail(char *err, size_t err_size,
                                                                             vh_status status, const char *fmt, ...)
{
    if (err && err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_size, fmt, ap);
        va_end(ap);
    }
    return status;
}

#endif
