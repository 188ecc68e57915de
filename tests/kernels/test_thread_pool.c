/* vh_thread_pool: coverage, partition contract, small n, n = 0, rapid reuse, sleep/wake, the
 * caller held on its core between enter and leave. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"
#include "thread_pool.h"

/* The same contract for every kind of pool: built three times (see meson.build), for the plain
 * pthread pool, the pthread pool pinned to cores, and the pool on OpenMP's team. */
#if defined(TEST_POOL_OPENMP)
#include "thread_pool_openmp.h"
#define pool_create(n) vh_thread_pool_create_openmp((n), VH_POOL_PIN_CORES)
#elif defined(TEST_POOL_PINNED)
#define pool_create(n) vh_thread_pool_create_flags((n), VH_POOL_PIN_CORES)
#else
#define pool_create(n) vh_thread_pool_create(n)
#endif

#define MAX_CHUNKS 64

/* What one vh_parallel_for call did: per-index visit counts and the chunks it ran. */
typedef struct record {
    atomic_int *visits;       /* [n] */
    atomic_int n_chunks;
    int64_t begin[MAX_CHUNKS], end[MAX_CHUNKS];
    int thread_of_chunk[MAX_CHUNKS];
    pthread_t thread_id[MAX_CHUNKS];
    atomic_int index_seen[MAX_CHUNKS];  /* times each thread_index was used */
} record;

static void record_chunk(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    record *r = ctx;
    for (int64_t i = begin; i < end; i++) atomic_fetch_add(&r->visits[i], 1);
    int slot = atomic_fetch_add(&r->n_chunks, 1);
    if (slot < MAX_CHUNKS) {
        r->begin[slot] = begin;
        r->end[slot] = end;
        r->thread_of_chunk[slot] = thread_index;
        r->thread_id[slot] = pthread_self();
    }
    if (thread_index >= 0 && thread_index < MAX_CHUNKS) atomic_fetch_add(&r->index_seen[thread_index], 1);
}

static record *record_new(int64_t n)
{
    record *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    r->visits = calloc((size_t)(n > 0 ? n : 1), sizeof *r->visits);
    ck_assert_ptr_nonnull(r->visits);
    return r;
}

static void record_free(record *r)
{
    free(r->visits);
    free(r);
}

/* Run one call and check it against the documented partition:
 * k = min(size, max(1, n / grain)) chunks, chunk i = [n*i/k, n*(i+1)/k) on thread_index i. */
static void check_partition(vh_thread_pool *pool, int64_t n, int64_t grain)
{
    int size = vh_thread_pool_size(pool);
    record *r = record_new(n);
    vh_parallel_for(pool, n, grain, record_chunk, r);

    /* (ck_assert costs a system call per use: count in a plain loop, assert once) */
    int64_t wrong = -1;
    for (int64_t i = 0; i < n && wrong < 0; i++)
        if (atomic_load(&r->visits[i]) != 1) wrong = i;
    ck_assert_msg(wrong < 0, "n=%lld grain=%lld size=%d: index %lld ran %d times", (long long)n,
                  (long long)grain, size, (long long)wrong, wrong < 0 ? 1 : atomic_load(&r->visits[wrong]));
    if (n <= 0) {
        ck_assert_int_eq(atomic_load(&r->n_chunks), 0);
        record_free(r);
        return;
    }
    int64_t g = grain < 1 ? 1 : grain;
    int64_t by_grain = n / g < 1 ? 1 : n / g;
    int k = by_grain < size ? (int)by_grain : size;
    ck_assert_int_eq(atomic_load(&r->n_chunks), k);
    for (int c = 0; c < k; c++) {
        int t = r->thread_of_chunk[c];
        ck_assert_int_ge(t, 0);
        ck_assert_int_lt(t, k);
        ck_assert_int_eq(atomic_load(&r->index_seen[t]), 1);
        ck_assert_int_eq(r->begin[c], n * t / k);
        ck_assert_int_eq(r->end[c], n * (t + 1) / k);
        if (n >= g) ck_assert_int_ge(r->end[c] - r->begin[c], g);
    }
    record_free(r);
}

START_TEST(test_partition_contract)
{
    static const int sizes[] = {1, 2, 3, 4, 7};
    static const int64_t ns[] = {0, 1, 2, 3, 5, 6, 17, 64, 1000, 100003};
    static const int64_t grains[] = {0, 1, 3, 64, 1000, 1000000};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        vh_thread_pool *pool = pool_create(sizes[s]);
        ck_assert_ptr_nonnull(pool);
        ck_assert_int_eq(vh_thread_pool_size(pool), sizes[s]);
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (size_t j = 0; j < sizeof grains / sizeof grains[0]; j++)
                check_partition(pool, ns[i], grains[j]);
        vh_thread_pool_destroy(pool);
    }
}
END_TEST

/* With fewer indices than threads every index still runs once, in n chunks of one. */
START_TEST(test_n_smaller_than_threads)
{
    vh_thread_pool *pool = pool_create(7);
    ck_assert_ptr_nonnull(pool);
    for (int64_t n = 1; n < 7; n++) {
        record *r = record_new(n);
        vh_parallel_for(pool, n, 1, record_chunk, r);
        ck_assert_int_eq(atomic_load(&r->n_chunks), n);
        for (int64_t i = 0; i < n; i++) ck_assert_int_eq(atomic_load(&r->visits[i]), 1);
        record_free(r);
    }
    vh_thread_pool_destroy(pool);
}
END_TEST

static void must_not_run(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)begin; (void)end; (void)thread_index;
    atomic_fetch_add((atomic_int *)ctx, 1);
}

START_TEST(test_empty_ranges)
{
    vh_thread_pool *pool = pool_create(3);
    atomic_int calls = 0;
    vh_parallel_for(pool, 0, 1, must_not_run, &calls);
    vh_parallel_for(pool, -5, 1, must_not_run, &calls);
    vh_parallel_for(NULL, 0, 1, must_not_run, &calls);
    ck_assert_int_eq(atomic_load(&calls), 0);
    vh_thread_pool_destroy(pool);
}
END_TEST

/* Chunks other than 0 run on other threads than the caller, and chunk 0 on the caller. */
START_TEST(test_work_runs_on_workers)
{
    vh_thread_pool *pool = pool_create(3);
    record *r = record_new(3000);
    vh_parallel_for(pool, 3000, 1, record_chunk, r);
    ck_assert_int_eq(atomic_load(&r->n_chunks), 3);
    for (int c = 0; c < 3; c++) {
        int on_caller = pthread_equal(r->thread_id[c], pthread_self()) != 0;
        ck_assert_int_eq(on_caller, r->thread_of_chunk[c] == 0);
    }
    for (int a = 0; a < 3; a++)
        for (int b = a + 1; b < 3; b++) ck_assert(!pthread_equal(r->thread_id[a], r->thread_id[b]));
    record_free(r);
    vh_thread_pool_destroy(pool);
}
END_TEST

typedef struct sum_ctx {
    _Atomic int64_t sum;
} sum_ctx;

static void add_indices(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    int64_t s = 0;
    for (int64_t i = begin; i < end; i++) s += i;
    atomic_fetch_add(&((sum_ctx *)ctx)->sum, s);
}

/* Many back-to-back calls of varying size: each must see a complete, fresh job. */
START_TEST(test_many_rapid_calls)
{
    vh_thread_pool *pool = pool_create(3);
    for (int call = 0; call < 20000; call++) {
        int64_t n = 1 + call % 37;
        sum_ctx ctx = {0};
        vh_parallel_for(pool, n, 1, add_indices, &ctx);
        ck_assert_int_eq(atomic_load(&ctx.sum), n * (n - 1) / 2);
    }
    vh_thread_pool_destroy(pool);
}
END_TEST

/* After the workers have gone to sleep on the condition variable, a call still wakes them. */
START_TEST(test_wake_after_idle)
{
    vh_thread_pool *pool = pool_create(4);
    for (int round = 0; round < 5; round++) {
        struct timespec pause = {0, 20 * 1000 * 1000}; /* 20 ms: far beyond the spin time */
        nanosleep(&pause, NULL);
        record *r = record_new(400);
        vh_parallel_for(pool, 400, 1, record_chunk, r);
        ck_assert_int_eq(atomic_load(&r->n_chunks), 4);
        int all_once = 1;
        for (int64_t i = 0; i < 400; i++) all_once &= atomic_load(&r->visits[i]) == 1;
        ck_assert(all_once);
        record_free(r);
    }
    vh_thread_pool_destroy(pool);
}
END_TEST

START_TEST(test_sizes_and_null)
{
    vh_thread_pool *pool = pool_create(0);
    ck_assert_ptr_nonnull(pool);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    ck_assert_int_eq(vh_thread_pool_size(pool), online > 0 ? online : 1);
    vh_thread_pool_destroy(pool);
    ck_assert_int_eq(vh_thread_pool_size(NULL), 1);
    vh_thread_pool_destroy(NULL);

    record *r = record_new(10);
    vh_parallel_for(NULL, 10, 1, record_chunk, r);
    ck_assert_int_eq(atomic_load(&r->n_chunks), 1);
    ck_assert_int_eq(r->begin[0], 0);
    ck_assert_int_eq(r->end[0], 10);
    record_free(r);
}
END_TEST

/* Creating and destroying pools repeatedly leaks no threads and never hangs. */
START_TEST(test_create_destroy_cycles)
{
    for (int i = 0; i < 200; i++) {
        vh_thread_pool *pool = pool_create(1 + i % 4);
        ck_assert_ptr_nonnull(pool);
        if (i % 2) {
            sum_ctx ctx = {0};
            vh_parallel_for(pool, 100, 1, add_indices, &ctx);
            ck_assert_int_eq(atomic_load(&ctx.sum), 4950);
        }
        vh_thread_pool_destroy(pool);
    }
}
END_TEST

/* Between enter and leave a pinned pool holds the calling thread on one CPU (where a placement
 * exists: hwloc, enough cores) and the work still covers every index; leave gives back exactly the
 * CPUs it had; an unpinned pool leaves the caller alone. */
START_TEST(test_enter_holds_caller)
{
    cpu_set_t before, during, after;
    ck_assert_int_eq(pthread_getaffinity_np(pthread_self(), sizeof before, &before), 0);
    vh_thread_pool *pool = pool_create(2);
    vh_thread_pool_enter(pool);
    ck_assert_int_eq(pthread_getaffinity_np(pthread_self(), sizeof during, &during), 0);
    vh_thread_pool_enter(pool); /* a second enter changes nothing */
    record *r = record_new(1000);
    vh_parallel_for(pool, 1000, 1, record_chunk, r);
    for (int64_t i = 0; i < 1000; i++) ck_assert_int_eq(atomic_load(&r->visits[i]), 1);
    record_free(r);
    vh_thread_pool_leave(pool);
    ck_assert_int_eq(pthread_getaffinity_np(pthread_self(), sizeof after, &after), 0);
    ck_assert(CPU_EQUAL(&after, &before));
#if defined(TEST_POOL_OPENMP) || defined(TEST_POOL_PINNED)
    ck_assert(CPU_COUNT(&during) == 1 || CPU_EQUAL(&during, &before));
#else
    ck_assert(CPU_EQUAL(&during, &before));
#endif
    vh_thread_pool_leave(pool); /* a leave without a hold changes nothing */
    vh_thread_pool_enter(NULL);
    vh_thread_pool_leave(NULL);
    ck_assert_int_eq(pthread_getaffinity_np(pthread_self(), sizeof after, &after), 0);
    ck_assert(CPU_EQUAL(&after, &before));
    vh_thread_pool_destroy(pool);
}
END_TEST

static Suite *thread_pool_suite(void)
{
    Suite *s = suite_create("thread_pool");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_partition_contract);
    tcase_add_test(tc, test_n_smaller_than_threads);
    tcase_add_test(tc, test_empty_ranges);
    tcase_add_test(tc, test_work_runs_on_workers);
    tcase_add_test(tc, test_many_rapid_calls);
    tcase_add_test(tc, test_wake_after_idle);
    tcase_add_test(tc, test_sizes_and_null);
    tcase_add_test(tc, test_create_destroy_cycles);
    tcase_add_test(tc, test_enter_holds_caller);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return vh_test_run_suite(thread_pool_suite());
}
