/*
 * vh_thread_pool: a persistent pool of worker threads for the CPU backends' kernels.
 *
 * A pool of N threads is the calling thread plus N - 1 workers. vh_parallel_for splits an index
 * range into at most N contiguous chunks, runs chunk 0 on the calling thread and the others on
 * the workers, and returns when every chunk is done.
 *
 * Waiting: between jobs a worker spins for about 100 microseconds (a CPU pause hint for the first
 * 20, then sched_yield so that an oversubscribed machine runs threads that have work), so a
 * decode step made of many small kernels does not pay a thread wake-up per kernel; after that it
 * blocks on a condition variable, so an idle pool uses no CPU. The caller waits for the workers
 * the same way.
 *
 * Determinism: the partition of [0, n) depends only on (n, grain, pool size), and chunk i always
 * runs with thread_index i. A kernel whose per-index work does not depend on its chunk gives the
 * same bits for every pool size.
 *
 * Threading: one pool serves one thread at a time, and vh_parallel_for is not reentrant: `fn` must
 * not call vh_parallel_for on the same pool. Different pools are independent.
 */
#ifndef VH_THREAD_POOL_H
#define VH_THREAD_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vh_thread_pool vh_thread_pool;

/* Create a pool of n_threads threads in all, counting the calling thread (so 1 starts no
 * worker). n_threads <= 0 means one per online CPU. Returns NULL when memory or threads cannot
 * be obtained. */
vh_thread_pool *vh_thread_pool_create(int n_threads);

/* Stop and join the workers, free the pool. NULL is allowed. Must not race a vh_parallel_for. */
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

#ifdef __cplusplus
}
#endif
#endif /* VH_THREAD_POOL_H */
