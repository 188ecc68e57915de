/*
 * Latency samples of one kind: a count, sum and maximum over all samples, and the most recent
 * VH_STATS_WINDOW samples for percentiles (nearest rank). Fixed size, no allocation: recording
 * is a few stores, so it can sit under the lock of whoever records.
 *
 * Not thread-safe by itself: the owner's lock guards it. Percentiles sort a copy, so read with
 * vh_latency_window_summary on a snapshot taken under the lock, then summarise outside it.
 */
#ifndef VH_UTIL_LATENCY_WINDOW_H
#define VH_UTIL_LATENCY_WINDOW_H

#include <stdint.h>

#include "vlahybrid/vlahybrid.h"

typedef struct vh_latency_window {
    uint64_t count;
    int64_t sum_ns, max_ns;
    int64_t recent[VH_STATS_WINDOW];   /* ring: sample i at i % VH_STATS_WINDOW */
} vh_latency_window;

void vh_latency_window_add(vh_latency_window *w, int64_t ns);

/* count, p50, p95, max and mean of `w` (see vh_latency in the public header). */
void vh_latency_window_summary(const vh_latency_window *w, vh_latency *out);

#endif
