/* What the benchmark programs share: a monotonic clock in milliseconds and qsort's comparison of
 * doubles (for medians). */
#ifndef VH_BENCH_CLOCK_H
#define VH_BENCH_CLOCK_H

#include <time.h>

static inline double vh_bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline int vh_bench_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#endif
