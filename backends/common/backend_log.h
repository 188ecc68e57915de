/* A backend's messages go to the session's log callback (vh_executor_params.log_fn), filtered by
 * its level, and nowhere else: never stdout or stderr. */
#ifndef VH_BACKEND_LOG_H
#define VH_BACKEND_LOG_H

#include <stdarg.h>
#include <stdio.h>

#include "vlahybrid/backend.h"

__attribute__((format(printf, 3, 4))) static inline void vh_backend_log(const vh_executor_params *params,
                                                                        vh_log_level level, const char *fmt, ...)
{
    if (!params->log_fn || (int)level > (int)params->log_level) return;
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    params->log_fn(params->log_user, level, message);
}

#endif
