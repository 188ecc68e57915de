/* Internal logging: messages go to the caller's callback and nowhere else (never stdout/stderr). */
#ifndef VH_UTIL_LOG_H
#define VH_UTIL_LOG_H

#include "util/error.h"

typedef struct vh_logger {
    vh_log_fn fn;            /* NULL: silent */
    void *user;
    vh_log_level level;      /* most verbose level delivered */
} vh_logger;

void vh_log(const vh_logger *logger, vh_log_level level, const char *fmt, ...) VH_PRINTF(3, 4);

#define vh_log_error(lg, ...) vh_log((lg), VH_LOG_ERROR, __VA_ARGS__)
#define vh_log_warn(lg, ...) vh_log((lg), VH_LOG_WARN, __VA_ARGS__)
#define vh_log_info(lg, ...) vh_log((lg), VH_LOG_INFO, __VA_ARGS__)
#define vh_log_debug(lg, ...) vh_log((lg), VH_LOG_DEBUG, __VA_ARGS__)

#endif
