/* The library as a neighbour inside the host process, through the public API only, on the bundled
 * tiny model with the cpu_generic backend:
 *   - silent: with a log callback (level DEBUG) and without one, nothing reaches fd 1 or fd 2
 *     during create, frames (two submitting and two polling threads, one frame failing in the
 *     worker, one refused at submit) and destroy; every accepted frame id is answered exactly once;
 *   - the log callback receives the core's messages and the cpu_generic plugin's (through
 *     vh_executor_params.log_fn);
 *   - idle workers sleep: an idle session costs (next to) no CPU time once its threads have
 *     settled (the first second after the last frame is measured and printed, not held to it);
 *   - no signal handler and no signal mask of the caller's is touched;
 *   - cpu_affinity: every thread the session starts runs on the given CPUs, the caller's thread
 *     keeps its own; a malformed list is refused with a message, "" means the default;
 *   - the threads a session adds are bounded by n_threads (plus the library's own few), and are
 *     gone after destroy.
 *
 * Whatever is measured is printed to stderr (outside the redirection) for the log of the run. */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#define MODEL_DIR "models/openvla-tiny"
#define WAIT_MS 120000           /* generous: the sanitizer jobs run this too */
#define FRAMES_PER_SUBMITTER 20
#define MAX_IDS 128              /* ids a session hands out in these tests, at most */
#define LONG_INSTRUCTION 8192    /* bytes: too long for the prompt budget; fails in the worker */
#define MAX_TASKS 1024

static char *model_dir; /* absolute, set in main */

/* ---------------------------------------------------------------------------------------------
 * Helpers
 */
static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static int64_t clock_ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static uint8_t small_rgb[24 * 16 * 3];

static void fill_small_rgb(void)
{
    for (uint32_t y = 0; y < 16; y++)
        for (uint32_t x = 0; x < 24; x++)
            for (uint32_t c = 0; c < 3; c++)
                small_rgb[(y * 24 + x) * 3 + c] = (uint8_t)(x * 7 + y * 13 + c * 50 + (x * y) % 17);
}

static void small_frame(vh_frame *f, const char *instruction, uint64_t tag)
{
    static pthread_once_t filled = PTHREAD_ONCE_INIT; /* submitter threads call this at once */
    pthread_once(&filled, fill_small_rgb);
    vh_frame_init(f);
    f->rgb = small_rgb;
    f->width = 24;
    f->height = 16;
    f->instruction = instruction;
    f->tag = tag;
}

/* The log callback: thread-safe, records every message. */
typedef struct log_capture {
    pthread_mutex_t lock;
    char text[65536];
    size_t used;
    int n_messages, n_by_level[4];
} log_capture;

static void capture_init(log_capture *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
}

static void capture_free(log_capture *c)
{
    pthread_mutex_destroy(&c->lock);
}

static void capture_log(void *user, vh_log_level level, const char *message)
{
    log_capture *c = user;
    pthread_mutex_lock(&c->lock);
    int n = snprintf(c->text + c->used, sizeof c->text - c->used, "[%d] %s\n", (int)level, message);
    if (n > 0) c->used = c->used + (size_t)n < sizeof c->text ? c->used + (size_t)n : sizeof c->text - 1;
    c->n_messages++;
    if ((int)level >= 0 && (int)level < 4) c->n_by_level[level]++;
    pthread_mutex_unlock(&c->lock);
}

static int capture_contains(log_capture *c, const char *needle)
{
    pthread_mutex_lock(&c->lock);
    int found = strstr(c->text, needle) != NULL;
    pthread_mutex_unlock(&c->lock);
    return found;
}

static void base_params(vh_session_params *p, log_capture *capture)
{
    vh_session_params_init(p);
    p->model_path = model_dir;
    p->backends = "cpu_generic";
    p->n_threads = 2;
    p->warmup_frames = 0;
    if (capture) {
        p->log_fn = capture_log;
        p->log_user = capture;
        p->log_level = VH_LOG_DEBUG;
    }
}

/* Submit n frames one after the other, each polled before the next. */
static void run_frames(vh_session *s, int n)
{
    for (int i = 0; i < n; i++) {
        vh_frame f;
        small_frame(&f, i % 2 ? "open the drawer" : "pick up the red block", (uint64_t)i);
        uint64_t id = 0;
        ck_assert_msg(vh_submit_frame(s, &f, &id) == VH_OK, "%s", vh_session_last_error(s));
        vh_action a;
        vh_action_init(&a);
        ck_assert_int_eq(vh_poll_action(s, &a, WAIT_MS), VH_OK);
        ck_assert_uint_eq(a.frame_id, id);
        ck_assert_msg(a.status == VH_OK, "frame %d: %s", i, vh_status_string(a.status));
    }
}

/* The process's threads (/proc/self/task); returns how many, ids into tids[0 .. max). */
static int list_tasks(pid_t *tids, int max)
{
    DIR *d = opendir("/proc/self/task");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        if (n < max) tids[n] = (pid_t)atoi(e->d_name);
        n++;
    }
    closedir(d);
    ck_assert_int_le(n, max);
    return n;
}

static int count_tasks(void)
{
    pid_t tids[MAX_TASKS];
    return list_tasks(tids, MAX_TASKS);
}

/* The thread count once it is back to `want` (a joined thread leaves /proc/self/task a moment
 * after pthread_join returns), or whatever it is after a second. */
static int count_tasks_settled(int want)
{
    int n = count_tasks();
    for (int i = 0; i < 100 && n != want; i++) {
        sleep_ms(10);
        n = count_tasks();
    }
    return n;
}

static int contains_tid(const pid_t *tids, int n, pid_t tid)
{
    for (int i = 0; i < n; i++)
        if (tids[i] == tid) return 1;
    return 0;
}

static void *do_nothing(void *arg)
{
    return arg;
}

/* A thread started and joined before a "before" count: a runtime that starts threads of its own
 * on a process's first pthread_create (ThreadSanitizer's background thread, in check's forked
 * child) has them running by then, so they are not taken for the session's. */
static void start_runtime_threads(void)
{
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, do_nothing, NULL), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
}

/* A field of /proc/self/task/<tid>/status ("Cpus_allowed_list", "Name"), without the tab and
 * the newline; 0 when the thread is gone. */
static int task_status_field(pid_t tid, const char *field, char *out, size_t out_size)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int found = 0;
    size_t len = strlen(field);
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, field, len) || line[len] != ':') continue;
        const char *v = line + len + 1;
        while (*v == ' ' || *v == '\t') v++;
        snprintf(out, out_size, "%s", v);
        out[strcspn(out, "\n")] = '\0';
        found = 1;
    }
    fclose(f);
    return found;
}

/* ---------------------------------------------------------------------------------------------
 * 1. Silence, under two submitting and two polling threads
 */
typedef struct traffic {
    vh_session *s;
    pthread_mutex_t lock;
    int submitters_done;
    int accepted, answered;
    int accepted_by_id[MAX_IDS], answered_by_id[MAX_IDS];
    vh_status status_by_id[MAX_IDS];
    uint64_t tag_by_id[MAX_IDS], answered_tag_by_id[MAX_IDS];
    int failures;              /* anything unexpected in a thread: no ck_assert while redirected */
    char failure[256];
    const char *long_text;
    int64_t give_up_ns;        /* CLOCK_MONOTONIC: pollers stop here whatever is missing */
} traffic;

typedef struct submitter {
    traffic *t;
    int index;
} submitter;

static void traffic_fail(traffic *t, const char *what, uint64_t value)
{
    pthread_mutex_lock(&t->lock);
    if (!t->failures++) snprintf(t->failure, sizeof t->failure, "%s (%llu)", what, (unsigned long long)value);
    pthread_mutex_unlock(&t->lock);
}

static void *submit_main(void *arg)
{
    submitter *me = arg;
    traffic *t = me->t;
    for (int i = 0; i < FRAMES_PER_SUBMITTER; i++) {
        const uint64_t tag = (uint64_t)me->index * 1000 + (uint64_t)i;
        vh_frame f;
        /* submitter 0's 10th frame fails in the worker (its instruction does not fit the
         * prompt): the failure's report must stay silent too */
        small_frame(&f, me->index == 0 && i == 10 ? t->long_text : i % 2 ? "open the drawer" : "pick up the red block",
                    tag);
        uint64_t id = 0;
        vh_status st = vh_submit_frame(t->s, &f, &id);
        if (st != VH_OK || id == 0 || id >= MAX_IDS) {
            traffic_fail(t, "submit failed", (uint64_t)st);
            continue;
        }
        pthread_mutex_lock(&t->lock);
        t->accepted++;
        t->accepted_by_id[id]++;
        t->tag_by_id[id] = tag;
        pthread_mutex_unlock(&t->lock);
    }
    pthread_mutex_lock(&t->lock);
    t->submitters_done++;
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

static void *poll_main(void *arg)
{
    traffic *t = arg;
    for (;;) {
        pthread_mutex_lock(&t->lock);
        const int finished = t->submitters_done == 2 && t->answered == t->accepted, answered = t->answered;
        pthread_mutex_unlock(&t->lock);
        if (finished) return NULL;
        if (clock_ns(CLOCK_MONOTONIC) > t->give_up_ns) {
            traffic_fail(t, "pollers gave up waiting; answered so far", (uint64_t)answered);
            return NULL;
        }
        vh_action a;
        vh_action_init(&a);
        vh_status st = vh_poll_action(t->s, &a, 20);
        if (st == VH_ERR_TIMEOUT) continue;
        if (st != VH_OK || a.frame_id == 0 || a.frame_id >= MAX_IDS) {
            traffic_fail(t, "poll failed", (uint64_t)st);
            continue;
        }
        pthread_mutex_lock(&t->lock);
        t->answered++;
        t->answered_by_id[a.frame_id]++;
        t->status_by_id[a.frame_id] = a.status;
        t->answered_tag_by_id[a.frame_id] = a.tag; /* compared once all is done: the answer may
                                                      come before its submitter has noted the id */
        pthread_mutex_unlock(&t->lock);
    }
}

static char *read_all(int fd, size_t *size)
{
    struct stat st;
    ck_assert_int_eq(fstat(fd, &st), 0);
    *size = (size_t)st.st_size;
    char *text = calloc(1, *size + 1);
    ck_assert_ptr_nonnull(text);
    ssize_t got = pread(fd, text, *size, 0);
    ck_assert_int_eq(got, (ssize_t)*size);
    return text;
}

/* _i == 0: log callback at DEBUG, policy BLOCK; _i == 1: no callback, policy LATEST (frames are
 * displaced, and answered VH_ERR_DROPPED). */
START_TEST(test_silent_with_threads)
{
    const int with_log = _i == 0;
    log_capture log;
    capture_init(&log);
    traffic t;
    memset(&t, 0, sizeof t);
    pthread_mutex_init(&t.lock, NULL);
    char *long_text = malloc(LONG_INSTRUCTION + 1);
    ck_assert_ptr_nonnull(long_text);
    for (size_t i = 0; i < LONG_INSTRUCTION; i++) long_text[i] = i % 2 ? ' ' : 'a';
    long_text[LONG_INSTRUCTION] = '\0';
    t.long_text = long_text;
    t.give_up_ns = clock_ns(CLOCK_MONOTONIC) + (int64_t)WAIT_MS * 1000000;

    const char *tmpdir = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/vh_good_neighbour_XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    int out = mkstemp(tmpl);
    ck_assert_msg(out >= 0, "mkstemp %s: %s", tmpl, strerror(errno));
    unlink(tmpl); /* the descriptor keeps it */

    fflush(stdout);
    fflush(stderr);
    const int saved_out = dup(1), saved_err = dup(2);
    ck_assert(saved_out >= 0 && saved_err >= 0);
    ck_assert_int_eq(dup2(out, 1), 1);
    ck_assert_int_eq(dup2(out, 2), 2);

    /* ---- redirected: no ck_assert until the descriptors are back ---- */
    vh_session_params p;
    base_params(&p, with_log ? &log : NULL);
    p.queue_policy = with_log ? VH_QUEUE_BLOCK : VH_QUEUE_LATEST;
    p.queue_capacity = 2;
    vh_session *s = NULL;
    const vh_status create_st = vh_session_create(&p, &s);
    char create_error[512] = "";
    vh_status bad_frame_st = VH_OK;
    int threads_ok = 0;
    if (create_st == VH_OK) {
        t.s = s;
        /* a caller's mistake, refused at submit: logged (to the callback only) */
        vh_frame bad;
        small_frame(&bad, "x", 0);
        bad.stride = 1;
        bad_frame_st = vh_submit_frame(s, &bad, NULL);
        submitter sub[2] = {{&t, 0}, {&t, 1}};
        pthread_t submitters[2], pollers[2];
        int started = 0;
        for (int k = 0; k < 2; k++) started += pthread_create(&pollers[k], NULL, poll_main, &t) == 0;
        for (int k = 0; k < 2; k++) started += pthread_create(&submitters[k], NULL, submit_main, &sub[k]) == 0;
        threads_ok = started == 4;
        if (threads_ok) {
            for (int k = 0; k < 2; k++) pthread_join(submitters[k], NULL);
            for (int k = 0; k < 2; k++) pthread_join(pollers[k], NULL);
        }
        vh_session_destroy(s);
    } else {
        snprintf(create_error, sizeof create_error, "%s", vh_last_error());
    }
    fflush(stdout);
    fflush(stderr);
    /* ---- back ---- */
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    close(saved_out);
    close(saved_err);

    size_t size = 0;
    char *written = read_all(out, &size);
    close(out);
    ck_assert_msg(size == 0, "the library wrote %zu bytes to stdout/stderr: %.400s", size, written);
    free(written);
    ck_assert_msg(create_st == VH_OK, "create: %s", create_error);
    ck_assert_msg(threads_ok, "could not start the test's threads");
    ck_assert_int_eq(bad_frame_st, VH_ERR_BAD_FRAME);
    ck_assert_msg(t.failures == 0, "%d failures, the first: %s", t.failures, t.failure);
    ck_assert_int_eq(t.accepted, 2 * FRAMES_PER_SUBMITTER);
    ck_assert_int_eq(t.answered, t.accepted);
    int ok = 0, dropped = 0, bad = 0;
    for (int id = 0; id < MAX_IDS; id++) {
        ck_assert_msg(t.answered_by_id[id] == t.accepted_by_id[id], "frame %d: accepted %d times, answered %d times",
                      id, t.accepted_by_id[id], t.answered_by_id[id]);
        ck_assert_int_le(t.accepted_by_id[id], 1);
        if (!t.accepted_by_id[id]) continue;
        ck_assert_msg(t.answered_tag_by_id[id] == t.tag_by_id[id], "frame %d: answered with tag %llu, submitted with "
                      "%llu", id, (unsigned long long)t.answered_tag_by_id[id], (unsigned long long)t.tag_by_id[id]);
        const vh_status st = t.status_by_id[id];
        if (t.tag_by_id[id] == 10) { /* submitter 0's frame with the long instruction */
            ck_assert_msg(st == VH_ERR_BAD_FRAME || st == VH_ERR_DROPPED, "frame %d: %s", id, vh_status_string(st));
            bad += st == VH_ERR_BAD_FRAME;
            dropped += st == VH_ERR_DROPPED;
            continue;
        }
        ck_assert_msg(st == VH_OK || (!with_log && st == VH_ERR_DROPPED), "frame %d: %s", id, vh_status_string(st));
        ok += st == VH_OK;
        dropped += st == VH_ERR_DROPPED;
    }
    ck_assert_int_ge(ok, 1);
    if (with_log) {
        ck_assert_int_eq(bad, 1);
        ck_assert_msg(capture_contains(&log, "session ready"), "log: %s", log.text);
        ck_assert_msg(capture_contains(&log, "too long"), "log: %s", log.text); /* the worker's report */
        ck_assert_int_ge(log.n_by_level[VH_LOG_ERROR], 2);
    }
    fprintf(stderr, "silent (%s, policy %s): %d frames answered, %d actions, %d dropped, %d failed; %d messages "
            "to the callback\n", with_log ? "log callback" : "no callback", with_log ? "block" : "latest", t.answered,
            ok, dropped, bad, log.n_messages);
    free(long_text);
    pthread_mutex_destroy(&t.lock);
    capture_free(&log);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 2. The log callback receives messages
 */
START_TEST(test_log_callback_receives)
{
    log_capture log;
    capture_init(&log);
    vh_session_params p;
    base_params(&p, &log);
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    run_frames(s, 1);
    vh_session_destroy(s);
    pthread_mutex_lock(&log.lock);
    /* the core: its INFO summary, and its DEBUG note on the plugin it loaded */
    ck_assert_msg(strstr(log.text, "session ready") != NULL, "log: %s", log.text);
    ck_assert_msg(strstr(log.text, "loaded backend 'cpu_generic'") != NULL, "log: %s", log.text);
    /* the plugin, through vh_executor_params.log_fn: its executor, with the threads it was given */
    ck_assert_msg(strstr(log.text, "cpu_generic: blocks ") != NULL, "no message from the plugin; log: %s", log.text);
    ck_assert_msg(strstr(log.text, ", 2 threads") != NULL, "the plugin's thread count; log: %s", log.text);
    ck_assert_int_ge(log.n_by_level[VH_LOG_INFO], 2);
    ck_assert_int_ge(log.n_by_level[VH_LOG_DEBUG], 1);
    ck_assert_int_eq(log.n_by_level[VH_LOG_ERROR], 0);
    ck_assert_int_eq(log.n_by_level[VH_LOG_WARN], 0);
    fprintf(stderr, "log callback: %d messages (%d info, %d debug):\n%s", log.n_messages, log.n_by_level[VH_LOG_INFO],
            log.n_by_level[VH_LOG_DEBUG], log.text);
    pthread_mutex_unlock(&log.lock);
    capture_free(&log);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 3. Idle workers sleep
 */
/* Each thread's time on a CPU so far (/proc/self/task/<tid>/schedstat, ns). */
typedef struct thread_times {
    int n;
    pid_t tid[MAX_TASKS];
    int64_t ns[MAX_TASKS];
} thread_times;

static void read_thread_times(thread_times *t)
{
    t->n = list_tasks(t->tid, MAX_TASKS);
    for (int i = 0; i < t->n; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", (int)t->tid[i]);
        FILE *f = fopen(path, "r");
        long long ns = -1;
        if (f) {
            if (fscanf(f, "%lld", &ns) != 1) ns = -1;
            fclose(f);
        }
        t->ns[i] = ns;
    }
}

/* "thread <tid> (<name>): <x> ms" for each thread that ran over 1 ms between a and b. */
static void describe_busy_threads(const thread_times *a, const thread_times *b, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < b->n; i++) {
        int64_t before = 0;
        for (int j = 0; j < a->n; j++)
            if (a->tid[j] == b->tid[i]) before = a->ns[j];
        if (b->ns[i] < 0 || b->ns[i] - before < 1000000) continue;
        char name[64] = "?";
        task_status_field(b->tid[i], "Name", name, sizeof name);
        int n = snprintf(out + used, size - used, "%sthread %d (%s): %.2f ms", used ? ", " : "", (int)b->tid[i], name,
                         (b->ns[i] - before) / 1e6);
        if (n < 0 || (size_t)n >= size - used) break;
        used += (size_t)n;
    }
}

START_TEST(test_idle_session_sleeps)
{
    vh_session_params p;
    base_params(&p, NULL);
    p.n_threads = 2; /* a worker pool */
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    run_frames(s, 3);
    /* Two seconds of this thread asleep: the first from the last poll on, reported only (it holds
     * the spin-down of threads that busy-wait a while after their last job: OpenBLAS's server
     * threads poll for about 2^28 cycles, ~0.1 s, after each sgemm); the second, the idle
     * session's steady state, held to the bound. */
    static thread_times t0, t1, t2;
    read_thread_times(&t0);
    const int64_t cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID), wall0 = clock_ns(CLOCK_MONOTONIC);
    sleep_ms(1000);
    const int64_t cpu1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID), wall1 = clock_ns(CLOCK_MONOTONIC);
    read_thread_times(&t1);
    sleep_ms(1000);
    const int64_t cpu2 = clock_ns(CLOCK_PROCESS_CPUTIME_ID), wall2 = clock_ns(CLOCK_MONOTONIC);
    read_thread_times(&t2);
    const double first_ms = (cpu1 - cpu0) / 1e6, first_wall_ms = (wall1 - wall0) / 1e6;
    const double cpu_ms = (cpu2 - cpu1) / 1e6, wall_ms = (wall2 - wall1) / 1e6;
    char busy_first[1024], busy[1024];
    describe_busy_threads(&t0, &t1, busy_first, sizeof busy_first);
    describe_busy_threads(&t1, &t2, busy, sizeof busy);
    fprintf(stderr, "idle session (n_threads 2, %d threads in the process): CPU time in the first second after "
            "the last frame (%.0f ms) %.2f ms [%s], in the next %.0f ms %.2f ms [%s]\n", t2.n, first_wall_ms, first_ms,
            busy_first, wall_ms, cpu_ms, busy);
    vh_session_destroy(s);
    ck_assert_msg(cpu_ms < 100.0, "an idle session used %.2f ms of CPU time in %.0f ms (%s)", cpu_ms, wall_ms, busy);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 4. No signal handlers, no signal mask changed
 */
typedef struct signal_state {
    int rc[NSIG];
    struct sigaction action[NSIG];
    sigset_t mask;
} signal_state;

static void read_signals(signal_state *st)
{
    memset(st, 0, sizeof *st);
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        st->rc[sig] = sigaction(sig, NULL, &st->action[sig]); /* -1 for glibc's own (32, 33) */
    }
    ck_assert_int_eq(pthread_sigmask(SIG_BLOCK, NULL, &st->mask), 0);
}

static void same_signals(const signal_state *a, const signal_state *b, const char *when)
{
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP) continue;
        ck_assert_msg(a->rc[sig] == b->rc[sig], "%s: sigaction(%d) now returns %d", when, sig, b->rc[sig]);
        if (a->rc[sig]) continue;
        const struct sigaction *x = &a->action[sig], *y = &b->action[sig];
        ck_assert_msg(x->sa_flags == y->sa_flags, "%s: signal %d (%s): flags %#x, were %#x", when, sig, strsignal(sig),
                      (unsigned)y->sa_flags, (unsigned)x->sa_flags);
        if (x->sa_flags & SA_SIGINFO)
            ck_assert_msg(x->sa_sigaction == y->sa_sigaction, "%s: signal %d (%s): another handler", when, sig,
                          strsignal(sig));
        else
            ck_assert_msg(x->sa_handler == y->sa_handler, "%s: signal %d (%s): another handler", when, sig,
                          strsignal(sig));
        for (int m = 1; m < NSIG; m++)
            ck_assert_msg(sigismember(&x->sa_mask, m) == sigismember(&y->sa_mask, m),
                          "%s: signal %d (%s): its handler's mask changed at %d", when, sig, strsignal(sig), m);
    }
    for (int sig = 1; sig < NSIG; sig++)
        ck_assert_msg(sigismember(&a->mask, sig) == sigismember(&b->mask, sig),
                      "%s: the calling thread's signal mask changed at signal %d (%s)", when, sig, strsignal(sig));
}

START_TEST(test_no_signal_handlers)
{
    signal_state before, during, after;
    read_signals(&before);
    vh_session_params p;
    base_params(&p, NULL);
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    read_signals(&during);
    same_signals(&before, &during, "after create");
    run_frames(s, 2);
    read_signals(&during);
    same_signals(&before, &during, "after frames");
    vh_session_destroy(s);
    read_signals(&after);
    same_signals(&before, &after, "after destroy");
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 5. cpu_affinity
 */
START_TEST(test_cpu_affinity_one_cpu)
{
    cpu_set_t mine;
    ck_assert_int_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
    int cpu = -1;
    for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
        if (CPU_ISSET(c, &mine)) cpu = c;
    ck_assert_int_ge(cpu, 0);
    char list[16];
    snprintf(list, sizeof list, "%d", cpu);

    pid_t before[MAX_TASKS], now[MAX_TASKS];
    start_runtime_threads();
    const int n_before = list_tasks(before, MAX_TASKS);
    vh_session_params p;
    base_params(&p, NULL);
    p.n_threads = 2;
    p.cpu_affinity = list;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    cpu_set_t after_create;
    ck_assert_int_eq(sched_getaffinity(0, sizeof after_create, &after_create), 0);
    ck_assert_msg(CPU_EQUAL(&mine, &after_create), "vh_session_create changed the calling thread's affinity");
    run_frames(s, 1);

    const int n_now = list_tasks(now, MAX_TASKS);
    int n_new = 0;
    for (int i = 0; i < n_now; i++) {
        if (contains_tid(before, n_before, now[i])) continue;
        char allowed[256], name[64] = "?";
        if (!task_status_field(now[i], "Cpus_allowed_list", allowed, sizeof allowed)) continue; /* ended */
        task_status_field(now[i], "Name", name, sizeof name);
        ck_assert_msg(!strcmp(allowed, list), "thread %d (%s) may run on CPUs %s, not only on cpu_affinity \"%s\"",
                      (int)now[i], name, allowed, list);
        n_new++;
    }
    /* at least the intake thread and the pool's worker */
    ck_assert_int_ge(n_new, 2);
    cpu_set_t after_frames;
    ck_assert_int_eq(sched_getaffinity(0, sizeof after_frames, &after_frames), 0);
    ck_assert_msg(CPU_EQUAL(&mine, &after_frames), "the calling thread's affinity changed");
    fprintf(stderr, "cpu_affinity \"%s\": %d threads added, each on CPU %s only\n", list, n_new, list);
    vh_session_destroy(s);
    ck_assert_int_eq(count_tasks_settled(n_before), n_before);
}
END_TEST

START_TEST(test_cpu_affinity_lists)
{
    vh_session_params p;
    base_params(&p, NULL);
    vh_session *s = (vh_session *)&p;
    /* malformed: refused with a message naming it, before anything is loaded */
    p.cpu_affinity = "not-a-list";
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(vh_last_error(), "not-a-list") != NULL, "message: %s", vh_last_error());
    ck_assert_msg(strstr(vh_last_error(), "cpu_affinity") != NULL, "message: %s", vh_last_error());
    /* "": the default (the calling thread's CPUs) */
    p.cpu_affinity = "";
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "cpu_affinity \"\": %s", vh_last_error());
    ck_assert_ptr_nonnull(s);
    run_frames(s, 1);
    vh_session_destroy(s);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * 6. Threads from params
 */
START_TEST(test_thread_count)
{
    enum { N_THREADS = 3, OWN_THREADS = 4 }; /* the library's own: intake, stage threads */
    start_runtime_threads();
    const int before = count_tasks();
    vh_session_params p;
    base_params(&p, NULL);
    p.n_threads = N_THREADS;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    run_frames(s, 1);
    const int during = count_tasks();
    vh_session_destroy(s);
    const int after = count_tasks_settled(before);
    fprintf(stderr, "n_threads %d: %d threads before create, %d with the session (+%d), %d after destroy; "
            "%ld CPUs online\n", N_THREADS, before, during, during - before, after, sysconf(_SC_NPROCESSORS_ONLN));
    /* cpu_generic's sgemm runs on OpenBLAS's own pool (pthread build), which OpenBLAS sizes when it
     * is first loaded: one thread fewer than the loading thread's CPUs (doc/api.md, "A good
     * neighbour"). The session's own threads are bounded by n_threads. */
    cpu_set_t mine;
    ck_assert_int_eq(sched_getaffinity(0, sizeof mine, &mine), 0);
    const int openblas_threads = CPU_COUNT(&mine) - 1;
    ck_assert_msg(during - before <= N_THREADS + OWN_THREADS + openblas_threads, "n_threads %d: the session added %d "
                  "threads (%d CPUs usable)", N_THREADS, during - before, CPU_COUNT(&mine));
    ck_assert_msg(after == before, "%d threads left after destroy", after - before);
}
END_TEST

int main(void)
{
    model_dir = vh_test_source_path(MODEL_DIR);
    Suite *suite = suite_create("good_neighbour");

    TCase *quiet = tcase_create("quiet");
    tcase_set_timeout(quiet, 300);
    tcase_add_loop_test(quiet, test_silent_with_threads, 0, 2);
    tcase_add_test(quiet, test_log_callback_receives);
    suite_add_tcase(suite, quiet);

    TCase *process = tcase_create("process");
    tcase_set_timeout(process, 300);
    tcase_add_test(process, test_idle_session_sleeps);
    tcase_add_test(process, test_no_signal_handlers);
    tcase_add_test(process, test_cpu_affinity_one_cpu);
    tcase_add_test(process, test_cpu_affinity_lists);
    tcase_add_test(process, test_thread_count);
    suite_add_tcase(suite, process);

    int rc = vh_test_run_suite(suite);
    free(model_dir);
    return rc;
}
