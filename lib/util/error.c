#include "util/error.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char thread_last_error[VH_ERROR_MESSAGE_SIZE];

vh_status vh_error_setv(vh_error *err, vh_status status, const char *fmt, va_list ap)
{
    if (err) {
        err->status = status;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
    }
    return status;
}

vh_status vh_error_set(vh_error *err, vh_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vh_error_setv(err, status, fmt, ap);
    va_end(ap);
    return status;
}

vh_status vh_error_prefix(vh_error *err, const char *fmt, ...)
{
    if (!err) return VH_ERR_INTERNAL;
    char joined[2 * VH_ERROR_MESSAGE_SIZE];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(joined, VH_ERROR_MESSAGE_SIZE, fmt, ap);
    va_end(ap);
    size_t used = n < 0 ? 0 : (size_t)n < VH_ERROR_MESSAGE_SIZE ? (size_t)n : VH_ERROR_MESSAGE_SIZE - 1;
    size_t rest = strnlen(err->message, sizeof err->message);
    memcpy(joined + used, err->message, rest);
    joined[used + rest] = '\0';
    size_t total = used + rest < sizeof err->message - 1 ? used + rest : sizeof err->message - 1;
    memcpy(err->message, joined, total);
    err->message[total] = '\0';
    return err->status;
}

void vh_error_clear(vh_error *err)
{
    if (err) {
        err->status = VH_OK;
        err->message[0] = '\0';
    }
}

void vh_error_publish_thread(const vh_error *err)
{
    snprintf(thread_last_error, sizeof thread_last_error, "%s", err ? err->message : "");
}

const char *vh_last_error(void)
{
    return thread_last_error;
}
