/*
 * Inside vh_thread_pool: what every kind of pool shares (its head, read by thread_pool.c) and what
 * each kind provides (thread_pool_pthread.c, thread_pool_openmp.c). Not for the pool's users.
 */
#ifndef VH_THREAD_POOL_KIND_H
#define VH_THREAD_POOL_KIND_H

#include "thread_pool.h"

#define VH_POOL_MAX_THREADS 4096

typedef struct vh_thread_pool_kind {
    /* Run chunks 0 .. n_chunks - 1 of [0, n) (2 <= n_chunks <= size), chunk i with thread_index i
     * and chunk 0 on the calling thread; return when all are done. */
    void (*run)(vh_thread_pool *pool, int64_t n, int n_chunks, vh_parallel_fn fn, void *ctx);
    void (*park)(vh_thread_pool *pool); /* NULL: nothing to park */
    void (*enter)(vh_thread_pool *pool); /* NULL: the caller stays where it is */
    void (*leave)(vh_thread_pool *pool);
    void (*destroy)(vh_thread_pool *pool);
} vh_thread_pool_kind;

/* The head of every pool: a kind's own struct starts with it. */
struct vh_thread_pool {
    const vh_thread_pool_kind *kind;
    int n_threads;                      /* counting the caller */
};

/* Chunk i of k over [0, n): [n*i/k, n*(i+1)/k). */
void vh_pool_chunk_bounds(int64_t n, int k, int i, int64_t *begin, int64_t *end);

/* The thread count a pool of `requested` threads gets: <= 0 means one per online CPU; at most
 * VH_POOL_MAX_THREADS. */
int vh_pool_thread_count(int requested);

#endif
