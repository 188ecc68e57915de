/*
 * vh_thread_pool's own kind: persistent pthread workers that spin briefly, then sleep.
 *
 * Handshake. The caller publishes a job (fn, ctx, n, n_chunks), sets `pending` to the number of
 * workers, and bumps `generation` under the mutex, broadcasting `work_ready`. A worker waits for
 * `generation` to differ from the last one it served: first by polling the atomic for SPIN_NS
 * (pause, then sched_yield between polls) unless the pool is parked, then on the condition
 * variable. It runs its chunk (if it has one) and decrements `pending`; the worker that brings it
 * to zero broadcasts `work_done`. The caller runs chunk 0, then waits for `pending == 0` the same
 * way (spin, then condition variable). Every worker takes part in every job, so a worker never
 * reads the job fields of a job the caller has moved past.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_affinity.h"
#include "thread_pool_kind.h"

#define SPIN_NS 100000        /* how long a waiting thread spins before it blocks */
#define PAUSE_NS 20000        /* the first part of the spin uses pause; the rest sched_yield, so
                                 an oversubscribed machine can run the threads that have work */
#define SPINS_PER_CLOCK 32    /* pause instructions between clock reads while spinning */

typedef struct pthread_pool pthread_pool;

typedef struct worker {
    pthread_pool *pool;
    int index;                /* thread_index of the chunks it runs, >= 1 */
} worker;

struct pthread_pool {
    vh_thread_pool head;
    int n_started;            /* workers actually running (for cleanup after a failed create) */
    pthread_t *threads;       /* [n_threads - 1] */
    worker *workers;          /* [n_threads - 1] */
    vh_cpu_placement *placement; /* NULL: unpinned */

    pthread_mutex_t mutex;
    pthread_cond_t work_ready;
    pthread_cond_t work_done;
    _Atomic uint64_t generation;  /* bumped once per job (and once to stop) */
    atomic_int pending;           /* workers that have not finished the current job */
    atomic_int stop;
    atomic_int parked;            /* set by park, cleared by the next job: idle workers block */

    /* The current job: written by the caller before it bumps `generation`. */
    vh_parallel_fn fn;
    void *ctx;
    int64_t n;
    int n_chunks;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Between polls of a spin-wait begun at `start`: 0 when it is time to block instead; after
 * PAUSE_NS, gives the CPU to other runnable threads. */
static int keep_spinning(int64_t start)
{
    int64_t elapsed = now_ns() - start;
    if (elapsed > SPIN_NS) return 0;
    if (elapsed > PAUSE_NS) sched_yield();
    return 1;
}

/* Wait until `generation` differs from `seen`; returns the new value. Spins first (unless the
 * pool is parked), then sleeps. */
static uint64_t wait_for_job(pthread_pool *p, uint64_t seen)
{
    int64_t start = now_ns();
    while (!atomic_load_explicit(&p->parked, memory_order_relaxed)) {
        for (int i = 0; i < SPINS_PER_CLOCK; i++) {
            uint64_t g = atomic_load_explicit(&p->generation, memory_order_acquire);
            if (g != seen) return g;
            cpu_relax();
        }
        if (!keep_spinning(start)) break;
    }
    pthread_mutex_lock(&p->mutex);
    uint64_t g;
    while ((g = atomic_load_explicit(&p->generation, memory_order_acquire)) == seen)
        pthread_cond_wait(&p->work_ready, &p->mutex);
    pthread_mutex_unlock(&p->mutex);
    return g;
}

/* Caller side: wait until every worker has finished the current job. */
static void wait_for_workers(pthread_pool *p)
{
    int64_t start = now_ns();
    for (;;) {
        for (int i = 0; i < SPINS_PER_CLOCK; i++) {
            if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) return;
            cpu_relax();
        }
        if (!keep_spinning(start)) break;
    }
    pthread_mutex_lock(&p->mutex);
    while (atomic_load_explicit(&p->pending, memory_order_acquire) != 0)
        pthread_cond_wait(&p->work_done, &p->mutex);
    pthread_mutex_unlock(&p->mutex);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    pthread_pool *p = w->pool;
    if (p->placement) vh_cpu_placement_pin_self(p->placement, w->index);
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_job(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        if (w->index < p->n_chunks) {
            int64_t begin, end;
            vh_pool_chunk_bounds(p->n, p->n_chunks, w->index, &begin, &end);
            p->fn(p->ctx, begin, end, w->index);
        }
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mutex);
            pthread_cond_broadcast(&p->work_done);
            pthread_mutex_unlock(&p->mutex);
        }
    }
    return NULL;
}

/* Publish a new generation (a job, or the stop request) and wake sleeping workers. */
static void publish(pthread_pool *p)
{
    atomic_store_explicit(&p->parked, 0, memory_order_relaxed);
    pthread_mutex_lock(&p->mutex);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_acq_rel);
    pthread_cond_broadcast(&p->work_ready);
    pthread_mutex_unlock(&p->mutex);
}

static void stop_workers(pthread_pool *p)
{
    atomic_store_explicit(&p->stop, 1, memory_order_release);
    publish(p);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->threads[i], NULL);
    p->n_started = 0;
}

static void pthread_pool_run(vh_thread_pool *pool, int64_t n, int n_chunks, vh_parallel_fn fn, void *ctx)
{
    pthread_pool *p = (pthread_pool *)pool;
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->n_chunks = n_chunks;
    atomic_store_explicit(&p->pending, p->head.n_threads - 1, memory_order_relaxed);
    publish(p);

    int64_t begin, end;
    vh_pool_chunk_bounds(n, n_chunks, 0, &begin, &end);
    fn(ctx, begin, end, 0);
    wait_for_workers(p);
}

static void pthread_pool_park(vh_thread_pool *pool)
{
    atomic_store_explicit(&((pthread_pool *)pool)->parked, 1, memory_order_relaxed);
}

static void pthread_pool_enter(vh_thread_pool *pool)
{
    vh_cpu_placement_hold_caller(((pthread_pool *)pool)->placement);
}

static void pthread_pool_leave(vh_thread_pool *pool)
{
    (void)pool;
    vh_cpu_placement_release_caller();
}

static void free_pool(pthread_pool *p)
{
    vh_cpu_placement_destroy(p->placement);
    free(p->threads);
    free(p->workers);
    free(p);
}

static void pthread_pool_destroy(vh_thread_pool *pool)
{
    pthread_pool *p = (pthread_pool *)pool;
    if (p->head.n_threads > 1) {
        stop_workers(p);
        pthread_cond_destroy(&p->work_done);
        pthread_cond_destroy(&p->work_ready);
        pthread_mutex_destroy(&p->mutex);
    }
    free_pool(p);
}

static const vh_thread_pool_kind pthread_kind = {
    .run = pthread_pool_run,
    .park = pthread_pool_park,
    .enter = pthread_pool_enter,
    .leave = pthread_pool_leave,
    .destroy = pthread_pool_destroy,
};

vh_thread_pool *vh_thread_pool_create_flags(int n_threads, unsigned flags)
{
    n_threads = vh_pool_thread_count(n_threads);
    pthread_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->head.kind = &pthread_kind;
    p->head.n_threads = n_threads;
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->parked, 0);
    if (n_threads == 1) return &p->head;

    if (flags & VH_POOL_PIN_CORES) p->placement = vh_cpu_placement_create(n_threads);
    p->threads = calloc((size_t)n_threads - 1, sizeof *p->threads);
    p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
    if (!p->threads || !p->workers) goto fail_alloc;
    if (pthread_mutex_init(&p->mutex, NULL) != 0) goto fail_alloc;
    if (pthread_cond_init(&p->work_ready, NULL) != 0) goto fail_mutex;
    if (pthread_cond_init(&p->work_done, NULL) != 0) goto fail_ready;

    /* Workers start with every signal blocked, so signals keep going to the application's
     * threads. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int ok = 1;
    for (int i = 0; i < n_threads - 1; i++) {
        p->workers[i].pool = p;
        p->workers[i].index = i + 1;
        if (pthread_create(&p->threads[i], NULL, worker_main, &p->workers[i]) != 0) {
            ok = 0;
            break;
        }
        pthread_setname_np(p->threads[i], "vh-cpu-worker");
        p->n_started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (ok) return &p->head;

    stop_workers(p);
    pthread_cond_destroy(&p->work_done);
fail_ready:
    pthread_cond_destroy(&p->work_ready);
fail_mutex:
    pthread_mutex_destroy(&p->mutex);
fail_alloc:
    free_pool(p);
    return NULL;
}

vh_thread_pool *vh_thread_pool_create(int n_threads)
{
    return vh_thread_pool_create_flags(n_threads, 0);
}
