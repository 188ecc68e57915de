#include "util/log.h"

#include <stdio.h>

void vh_log(const vh_logger *logger, vh_log_level level, const char *fmt, ...)
{
    if (!logger || !logger->fn || level > logger->level) return;
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    logger->fn(logger->user, level, message);
}
