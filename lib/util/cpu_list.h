/*
 * CPU lists as Linux writes them ("0-7,16", as in /sys/devices/system/cpu/online and taskset -c),
 * parsed into a glibc CPU set.
 */
#ifndef VH_UTIL_CPU_LIST_H
#define VH_UTIL_CPU_LIST_H

#include <sched.h>

#include "util/error.h"

/* Parse `text` into *set. VH_ERR_INVALID_ARGUMENT (with the reason) on a malformed or empty list
 * or a CPU past CPU_SETSIZE. */
vh_status vh_cpu_list_parse(const char *text, cpu_set_t *set, vh_error *err);

#endif
