/*
 * vh_thread_pool on OpenMP's team (see thread_pool_openmp.h): the chunks vh_parallel_for chose are
 * run by team thread i = chunk i. Should the team be smaller than asked (a nested region, a thread
 * limit), each thread runs chunks i, i + team, ...: every chunk still runs once, with its own
 * thread_index, chunk 0 on the calling thread.
 */
#include "thread_pool_openmp.h"

#include <omp.h>
#include <stdlib.h>

#include "cpu_affinity.h"
#include "thread_pool_kind.h"

typedef struct openmp_pool {
    vh_thread_pool head;
    vh_cpu_placement *placement; /* NULL: unpinned */
} openmp_pool;

static void openmp_pool_run(vh_thread_pool *pool, int64_t n, int n_chunks, vh_parallel_fn fn, void *ctx)
{
    const openmp_pool *p = (const openmp_pool *)pool;
#pragma omp parallel num_threads(p->head.n_threads)
    {
        const int thread = omp_get_thread_num(), team = omp_get_num_threads();
        vh_cpu_placement_pin_self(p->placement, thread); /* (NULL: unpins a thread pinned before) */
        for (int chunk = thread; chunk < n_chunks; chunk += team) {
            int64_t begin, end;
            vh_pool_chunk_bounds(n, n_chunks, chunk, &begin, &end);
            fn(ctx, begin, end, chunk);
        }
    }
}

/* The master is the team's thread 0: held on its own core for the pass (the team's threads keep
 * theirs; OpenMP makes no new ones for an existing team). */
static void openmp_pool_enter(vh_thread_pool *pool)
{
    vh_cpu_placement_hold_caller(((openmp_pool *)pool)->placement);
}

static void openmp_pool_leave(vh_thread_pool *pool)
{
    (void)pool;
    vh_cpu_placement_release_caller();
}

static void openmp_pool_destroy(vh_thread_pool *pool)
{
    openmp_pool *p = (openmp_pool *)pool;
    vh_cpu_placement_destroy(p->placement);
    free(p);
}

static const vh_thread_pool_kind openmp_kind = {
    .run = openmp_pool_run,
    .park = NULL,
    .enter = openmp_pool_enter,
    .leave = openmp_pool_leave,
    .destroy = openmp_pool_destroy,
};

vh_thread_pool *vh_thread_pool_create_openmp(int n_threads, unsigned flags)
{
    openmp_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->head.kind = &openmp_kind;
    p->head.n_threads = vh_pool_thread_count(n_threads);
    if (flags & VH_POOL_PIN_CORES) p->placement = vh_cpu_placement_create(p->head.n_threads);
    return &p->head;
}

void vh_openmp_release_team(void)
{
    if (!omp_in_parallel()) omp_pause_resource_all(omp_pause_soft);
}
