/*
 * vh_thread_pool: the threads the CPU backends' kernels run on.
 *
 * A pool of N threads is the calling thread plus N - 1 workers. vh_parallel_for splits an index
 * range into at most N contiguous chunks, runs chunk 0 on the calling thread and the others on
 * the workers, and returns when every chunk is done.
 *
 * Two kinds, one contract (thread_pool.c holds the partition, the kinds only run chunks):
 *  - pthread workers of its own (thread_pool_pthread.c, vh_thread_pool_create*): between jobs a
 *    worker spins for about 100 microseconds (a CPU pause hint for the first 20, then
 *    sched_yield so that an oversubscribed machine runs threads that have work), so a decode step
 *    made of many small kernels does not pay a thread wake-up per kernel; after that it blocks on
 *    a condition variable, so an idle pool uses no CPU. The caller waits for the workers the same
 *    way.
 *  - the calling thread's OpenMP team (thread_pool_openmp.h), for a backend whose library (oneDNN)
 *    already runs on that team: one set of hot threads instead of two sets spinning on the same
 *    cores.
 *
 * Determinism: the partition of [0, n) depends only on (n, grain, pool size), and chunk i always
 * runs with thread_index i. A kernel whose per-index work does not depend on its chunk gives the
 * same bits for every pool size.
 *
 * Threading: one pool serves one thread at a time, and vh_parallel_for is not reentrant: `fn` must
 * not call vh_parallel_for on the same pool. Different pools are independent (OpenMP pools used
 * from one thread share its team, one loop at a time).
 */
#ifndef VH_THREAD_POOL_H
#define VH_THREAD_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vh_thread_pool vh_thread_pool;

/* Creation flags. */
enum {
    /* Pin worker i to core i of cpu_affinity.h's placement (the calling thread stays as it is).
     * Where no placement exists (no hwloc, too few cores), the pool runs unpinned. */
    VH_POOL_PIN_CORES = 1u,
};

/* Create a pool of n_threads threads in all, counting the calling thread (so 1 starts no
 * worker). n_threads <= 0 means one per online CPU. Returns NULL when memory or threads cannot
 * be obtained. vh_thread_pool_create(n) is vh_thread_pool_create_flags(n, 0). */
vh_thread_pool *vh_thread_pool_create(int n_threads);
vh_thread_pool *vh_thread_pool_create_flags(int n_threads, unsigned flags);

/* Stop and join the workers (an OpenMP pool has none of its own), free the pool. NULL is allowed.
 * Must not race a vh_parallel_for. */
void vh_thread_pool_destroy(vh_thread_pool *pool);

/* Threads in the pool, counting the caller (>= 1). A NULL pool has size 1. */
int vh_thread_pool_size(const vh_thread_pool *pool);

/* One chunk of a parallel loop: process indices [begin, end). thread_index is in
 * [0, vh_thread_pool_size) and is unique among the chunks of one call (use it to pick per-thread
 * scratch). */
typedef void (*vh_parallel_fn)(void *ctx, int64_t begin, int64_t end, int thread_index);

/* Run fn over [0, n) split into k = min(size, max(1, n / grain)) contiguous chunks of near-equal
 * length (each at least `grain` long when n >= grain); chunk i is [n*i/k, n*(i+1)/k) and runs with
 * thread_index i, chunk 0 on the calling thread. Returns when all chunks are done. n <= 0 does
 * nothing; grain < 1 counts as 1; a NULL pool runs fn(ctx, 0, n, 0) on the calling thread. */
void vh_parallel_for(vh_thread_pool *pool, int64_t n, int64_t grain, vh_parallel_fn fn, void *ctx);

/* Around a stretch of work made of many vh_parallel_for calls (an executor's pass): with a pinned
 * pool, the calling thread (the team's thread 0) is held on its own core of the placement, and
 * given its CPUs back at leave (cpu_affinity.h says why). Nothing for a NULL, unpinned or OpenMP
 * pool. Enter and leave pair on one thread. */
void vh_thread_pool_enter(vh_thread_pool *pool);
void vh_thread_pool_leave(vh_thread_pool *pool);

/* Stop the idle workers' spinning now: each blocks until the next vh_parallel_for. Call before the
 * cores go to another library's threads (OpenBLAS's sgemm), so that they do not share the cores
 * with spinning workers; the next job pays a wake-up. Does nothing for a NULL pool or an OpenMP
 * pool (its team is the other library's). */
void vh_thread_pool_park(vh_thread_pool *pool);

#ifdef __cplusplus
}
#endif
#endif /* VH_THREAD_POOL_H */
