/*
 * vh_thread_pool: the partition every kind of pool shares. vh_parallel_for decides the chunks
 * here, from (n, grain, size) only, and hands them to the pool's kind to run; so a kernel gives
 * the same bits on a pthread pool and an OpenMP pool of any size.
 */
#include <sched.h>
#include <unistd.h>

#include "thread_pool_kind.h"

/* n*i cannot overflow for n <= INT64_MAX / VH_POOL_MAX_THREADS. */
void vh_pool_chunk_bounds(int64_t n, int k, int i, int64_t *begin, int64_t *end)
{
    if (n <= INT64_MAX / VH_POOL_MAX_THREADS) {
        *begin = n * i / k;
        *end = n * (i + 1) / k;
    } else { /* absurdly large n: split by quotient and remainder instead */
        int64_t q = n / k, r = n % k;
        *begin = q * i + (i < r ? i : r);
        *end = *begin + q + (i < r ? 1 : 0);
    }
}

int vh_pool_thread_count(int requested)
{
    if (requested <= 0) { /* the CPUs the creating thread may use (taskset, the session's cpu_affinity) */
        cpu_set_t mine;
        long usable = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : sysconf(_SC_NPROCESSORS_ONLN);
        requested = usable > 0 ? (int)(usable < VH_POOL_MAX_THREADS ? usable : VH_POOL_MAX_THREADS) : 1;
    }
    return requested < VH_POOL_MAX_THREADS ? requested : VH_POOL_MAX_THREADS;
}

void vh_thread_pool_destroy(vh_thread_pool *pool)
{
    if (pool) pool->kind->destroy(pool);
}

int vh_thread_pool_size(const vh_thread_pool *pool)
{
    return pool ? pool->n_threads : 1;
}

void vh_thread_pool_enter(vh_thread_pool *pool)
{
    if (pool && pool->kind->enter) pool->kind->enter(pool);
}

void vh_thread_pool_leave(vh_thread_pool *pool)
{
    if (pool && pool->kind->leave) pool->kind->leave(pool);
}

void vh_thread_pool_park(vh_thread_pool *pool)
{
    if (pool && pool->kind->park) pool->kind->park(pool);
}

void vh_parallel_for(vh_thread_pool *pool, int64_t n, int64_t grain, vh_parallel_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int size = vh_thread_pool_size(pool);
    int64_t by_grain = n / grain;
    int k = by_grain < size ? (int)(by_grain > 1 ? by_grain : 1) : size;
    if (k == 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    pool->kind->run(pool, n, k, fn, ctx);
}
