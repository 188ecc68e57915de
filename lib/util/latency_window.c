#include "util/latency_window.h"

#include <stdlib.h>
#include <string.h>

void vh_latency_window_add(vh_latency_window *w, int64_t ns)
{
    if (ns < 0) ns = 0; /* a clock read out of order cannot be a negative latency */
    w->recent[w->count % VH_STATS_WINDOW] = ns;
    w->count++;
    w->sum_ns += ns;
    if (ns > w->max_ns) w->max_ns = ns;
}

static int compare_ns(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The ceil(percent/100 * n)-th smallest of sorted[0 .. n), n > 0. */
static int64_t nearest_rank(const int64_t *sorted, uint32_t n, uint32_t percent)
{
    uint64_t rank = ((uint64_t)percent * n + 99) / 100;
    return sorted[rank ? rank - 1 : 0];
}

void vh_latency_window_summary(const vh_latency_window *w, vh_latency *out)
{
    memset(out, 0, sizeof *out);
    out->count = w->count;
    if (!w->count) return;
    out->max_ns = w->max_ns;
    out->mean_ns = w->sum_ns / (int64_t)w->count;
    const uint32_t n = w->count < VH_STATS_WINDOW ? (uint32_t)w->count : VH_STATS_WINDOW;
    int64_t sorted[VH_STATS_WINDOW];
    memcpy(sorted, w->recent, sizeof *sorted * n);
    qsort(sorted, n, sizeof *sorted, compare_ns);
    out->p50_ns = nearest_rank(sorted, n, 50);
    out->p95_ns = nearest_rank(sorted, n, 95);
}
