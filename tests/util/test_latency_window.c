/* The statistics' latency windows against a naive reference: the nearest-rank percentile of a
 * sorted copy of the last VH_STATS_WINDOW samples, and mean and max over all samples. */
#include <stdlib.h>

#include "test_support.h"
#include "util/latency_window.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest rank, written from its definition: the smallest sample with at least p% of the samples
 * at or below it. */
static int64_t reference_percentile(const int64_t *samples, size_t n, double p)
{
    int64_t *sorted = malloc(n * sizeof *sorted);
    for (size_t i = 0; i < n; i++) sorted[i] = samples[i];
    qsort(sorted, n, sizeof *sorted, cmp_i64);
    int64_t found = sorted[n - 1];
    for (size_t i = 0; i < n; i++)
        if ((double)(i + 1) >= p / 100.0 * (double)n) {
            found = sorted[i];
            break;
        }
    free(sorted);
    return found;
}

START_TEST(test_small_known_values)
{
    vh_latency_window *w = calloc(1, sizeof *w);
    vh_latency out;
    vh_latency_window_summary(w, &out);
    ck_assert(out.count == 0 && out.p50_ns == 0 && out.p95_ns == 0 && out.max_ns == 0);
    for (int64_t v = 100; v >= 1; v--) vh_latency_window_add(w, v); /* 1..100, in reverse */
    vh_latency_window_summary(w, &out);
    ck_assert_uint_eq(out.count, 100);
    ck_assert_int_eq(out.p50_ns, 50);
    ck_assert_int_eq(out.p95_ns, 95);
    ck_assert_int_eq(out.max_ns, 100);
    ck_assert_int_eq(out.mean_ns, 50); /* 50.5, truncated */
    free(w);
}
END_TEST

/* Random samples past the window: percentiles over the last VH_STATS_WINDOW only, max and mean
 * over all. */
START_TEST(test_window_against_reference)
{
    enum { N = 3 * VH_STATS_WINDOW + 17 };
    int64_t *samples = malloc(N * sizeof *samples);
    vh_latency_window *w = calloc(1, sizeof *w);
    srand(7);
    double sum = 0;
    int64_t max = 0;
    for (size_t i = 0; i < N; i++) {
        /* an early burst of large values that leaves the window but not the max */
        samples[i] = i < 50 ? 1000000000 + rand() % 1000 : rand() % 5000000;
        vh_latency_window_add(w, samples[i]);
        sum += (double)samples[i];
        if (samples[i] > max) max = samples[i];
        if (i == 10 || i == VH_STATS_WINDOW - 1 || i == N - 1) {
            size_t n = i + 1, in_window = n < VH_STATS_WINDOW ? n : VH_STATS_WINDOW;
            vh_latency out;
            vh_latency_window_summary(w, &out);
            ck_assert_uint_eq(out.count, n);
            ck_assert_int_eq(out.p50_ns, reference_percentile(samples + n - in_window, in_window, 50));
            ck_assert_int_eq(out.p95_ns, reference_percentile(samples + n - in_window, in_window, 95));
            ck_assert_int_eq(out.max_ns, max);
            ck_assert_int_eq(out.mean_ns, (int64_t)(sum / (double)n));
        }
    }
    ck_assert_int_lt(reference_percentile(samples + N - VH_STATS_WINDOW, VH_STATS_WINDOW, 95), 5000000);
    free(samples);
    free(w);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("latency_window");
    TCase *tc = tcase_create("window");
    tcase_add_test(tc, test_small_known_values);
    tcase_add_test(tc, test_window_against_reference);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
