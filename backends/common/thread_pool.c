/*
 * vh_thread_pool: persistent workers that spin briefly, then sleep.
 *
 * Handshake. The caller publishes a job (fn, ctx, n, n_chunks), sets `pending` to the number of
 * workers, and bumps `generation` under the mutex, broadcasting `work_ready`. A worker waits for
 * `generation` to differ from the last one it served: first by polling the atomic for
 * SPIN_NS (pause, then sched_yield between polls), then on the condition variable. It runs its chunk (if it has one) and decrements
 * `pending`; the worker that brings it to zero broadcasts `work_done`. The caller runs chunk 0,
 * then waits for `pending == 0` the same way (spin, then condition variable). Every worker takes
 * part in every job, so a worker never reads the job fields of a job the caller has moved past.
 */
#include "thread_pool.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define SPIN_NS 100000        /* how long a waiting thread spins before it blocks */
#define PAUSE_NS 20000        /* the first part of the spin uses pause; the rest sched_yield, so
                                 an oversubscribed machine can run the threads that have work */
#define SPINS_PER_CLOCK 32    /* pause instructions between clock reads while spinning */
#define MAX_THREADS 4096

typedef struct worker {
    struct vh_thread_pool *pool;
    int index;                /* thread_index of the chunks it runs, >= 1 */
} worker;

struct vh_thread_pool {
    int n_threads;            /* counting the caller */
    int n_started;            /* workers actually running (for cleanup after a failed create) */
    pthread_t *threads;       /* [n_threads - 1] */
    worker *workers;          /* [n_threads - 1] */

    pthread_mutex_t mutex;
    pthread_cond_t work_ready;
    pthread_cond_t work_done;
    _Atomic uint64_t generation;  /* bumped once per job (and once to stop) */
    atomic_int pending;           /* workers that have not finished the current job */
    atomic_int stop;

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

/* Chunk i of k over [0, n): [n*i/k, n*(i+1)/k). n*i cannot overflow for n < 2^62 / 4096. */
static void chunk_bounds(int64_t n, int k, int i, int64_t *begin, int64_t *end)
{
    if (n <= INT64_MAX / MAX_THREADS) {
        *begin = n * i / k;
        *end = n * (i + 1) / k;
    } else { /* absurdly large n: split by quotient and remainder instead */
        int64_t q = n / k, r = n % k;
        *begin = q * i + (i < r ? i : r);
        *end = *begin + q + (i < r ? 1 : 0);
    }
}

/* Wait until `generation` differs from `seen`; returns the new value. Spins first, then sleeps. */
static uint64_t wait_for_job(vh_thread_pool *p, uint64_t seen)
{
    int64_t start = now_ns();
    for (;;) {
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
static void wait_for_workers(vh_thread_pool *p)
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
    vh_thread_pool *p = w->pool;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_job(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        if (w->index < p->n_chunks) {
            int64_t begin, end;
            chunk_bounds(p->n, p->n_chunks, w->index, &begin, &end);
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
static void publish(vh_thread_pool *p)
{
    pthread_mutex_lock(&p->mutex);
    atomic_fetch_add_explicit(&p->generation, 1, memory_order_acq_rel);
    pthread_cond_broadcast(&p->work_ready);
    pthread_mutex_unlock(&p->mutex);
}

static void stop_workers(vh_thread_pool *p)
{
    atomic_store_explicit(&p->stop, 1, memory_order_release);
    publish(p);
    for (int i = 0; i < p->n_started; i++) pthread_join(p->threads[i], NULL);
    p->n_started = 0;
}

vh_thread_pool *vh_thread_pool_create(int n_threads)
{
    if (n_threads <= 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = online > 0 ? (int)(online < MAX_THREADS ? online : MAX_THREADS) : 1;
    }
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;

    vh_thread_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->stop, 0);
    if (n_threads == 1) return p;

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
        p->n_started++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (ok) return p;

    stop_workers(p);
    pthread_cond_destroy(&p->work_done);
fail_ready:
    pthread_cond_destroy(&p->work_ready);
fail_mutex:
    pthread_mutex_destroy(&p->mutex);
fail_alloc:
    free(p->threads);
    free(p->workers);
    free(p);
    return NULL;
}

void vh_thread_pool_destroy(vh_thread_pool *p)
{
    if (!p) return;
    if (p->n_threads > 1) {
        stop_workers(p);
        pthread_cond_destroy(&p->work_done);
        pthread_cond_destroy(&p->work_ready);
        pthread_mutex_destroy(&p->mutex);
    }
    free(p->threads);
    free(p->workers);
    free(p);
}

int vh_thread_pool_size(const vh_thread_pool *p)
{
    return p ? p->n_threads : 1;
}

void vh_parallel_for(vh_thread_pool *p, int64_t n, int64_t grain, vh_parallel_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int size = vh_thread_pool_size(p);
    int64_t by_grain = n / grain;
    int k = by_grain < size ? (int)(by_grain > 1 ? by_grain : 1) : size;
    if (k == 1) {
        fn(ctx, 0, n, 0);
        return;
    }

    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->n_chunks = k;
    atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
    publish(p);

    int64_t begin, end;
    chunk_bounds(n, k, 0, &begin, &end);
    fn(ctx, begin, end, 0);
    wait_for_workers(p);
}
