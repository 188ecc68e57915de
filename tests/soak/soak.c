/*
 * Soak: many frames through a session (public API only) with random submit and poll timing, for one
 * queue policy. Checks that every accepted frame id is answered exactly once (an action, or
 * DROPPED under DROP_OLDEST), that nothing else is answered, and that resident memory stays flat
 * (RSS after the first tenth of the frames against the end; slack 8 MiB).
 *
 *   soak MODEL_DIR FRAMES drop|reject|block [BACKENDS [MODE]]     (MODE: serial|pipeline|packed)
 *
 * Exit 0 when all holds. The test suite runs a short soak per policy; the 100,000-frame runs are
 * recorded in doc/hardening.md.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vlahybrid/vlahybrid.h>

/* Under AddressSanitizer freed memory sits in its quarantine, so resident memory grows by design:
 * there LeakSanitizer checks for leaks instead of the RSS bound. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_CHECKED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_CHECKED 0
#endif
#endif
#ifndef RSS_CHECKED
#define RSS_CHECKED 1
#endif

typedef struct soak {
    vh_session *session;
    uint32_t frames;
    uint8_t *answered;            /* [frames + 1] by frame id */
    uint8_t *accepted;            /* [frames + 1] */
    atomic_uint n_accepted, n_rejected, n_answered, n_ok, n_dropped, n_other;
    atomic_int submitting;
    atomic_uint max_id;
    int bad;
    long rss_early_kb;
} soak;

static long rss_kb(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static uint32_t rnd(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return *state >> 8;
}

static void sleep_us(uint32_t us)
{
    struct timespec t = {0, (long)us * 1000};
    nanosleep(&t, NULL);
}

static void *submitter(void *arg)
{
    soak *k = arg;
    enum { W = 48, H = 36 };
    static uint8_t rgb[W * H * 3];
    for (int i = 0; i < W * H * 3; i++) rgb[i] = (uint8_t)(i * 29);
    uint32_t state = 12345;
    for (uint32_t i = 0; i < k->frames; i++) {
        vh_frame f;
        vh_frame_init(&f);
        f.rgb = rgb, f.width = W, f.height = H, f.stride = W * 3, f.tag = i;
        f.instruction = i % 3 ? "pick up the red block" : "open the drawer";
        uint64_t id = 0;
        vh_status st = vh_submit_frame(k->session, &f, &id);
        if (st == VH_OK) {
            if (id == 0 || id > k->frames) {
                fprintf(stderr, "soak: id %llu out of range\n", (unsigned long long)id);
                k->bad = 1;
            } else {
                k->accepted[id] = 1;
                if (id > atomic_load(&k->max_id)) atomic_store(&k->max_id, (unsigned)id);
            }
            atomic_fetch_add(&k->n_accepted, 1);
        } else if (st == VH_ERR_BUSY) {
            atomic_fetch_add(&k->n_rejected, 1);
        } else {
            fprintf(stderr, "soak: submit: %s\n", vh_status_string(st));
            k->bad = 1;
        }
        if (rnd(&state) % 4 == 0) sleep_us(rnd(&state) % 40000); /* bursts, and gaps of up to a few frames */
        if (i == k->frames / 10) k->rss_early_kb = rss_kb();
    }
    atomic_store(&k->submitting, 0);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: soak MODEL_DIR FRAMES drop|reject|block [BACKENDS [MODE]]\n"
                        "  VH_SOAK_FRAMES=N overrides FRAMES (the sanitizer jobs run fewer)\n");
        return 2;
    }
    const char *frames = getenv("VH_SOAK_FRAMES");
    soak k = {.frames = (uint32_t)strtoul(frames && *frames ? frames : argv[2], NULL, 10)};
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = argv[1];
    p.backends = argc > 4 ? argv[4] : "cpu_generic";
    p.n_threads = 1;
    p.queue_capacity = 2;
    p.queue_policy = !strcmp(argv[3], "reject") ? VH_QUEUE_REJECT
                     : !strcmp(argv[3], "block") ? VH_QUEUE_BLOCK
                                                 : VH_QUEUE_DROP_OLDEST;
    if (argc > 5)
        p.execution_mode = !strcmp(argv[5], "serial")   ? VH_EXECUTION_SERIAL
                           : !strcmp(argv[5], "packed") ? VH_EXECUTION_PACKED
                                                        : VH_EXECUTION_PIPELINE;
    if (k.frames == 0 || vh_session_create(&p, &k.session) != VH_OK) {
        fprintf(stderr, "soak: %s\n", k.frames ? vh_last_error() : "FRAMES must be > 0");
        return 1;
    }
    k.answered = calloc(k.frames + 1, 1);
    k.accepted = calloc(k.frames + 1, 1);
    atomic_store(&k.submitting, 1);
    pthread_t thread;
    if (!k.answered || !k.accepted || pthread_create(&thread, NULL, submitter, &k) != 0) return 1;
    uint32_t state = 777;
    for (;;) {
        vh_action a;
        vh_action_init(&a);
        vh_status st = vh_poll_action(k.session, &a, (int32_t)(rnd(&state) % 6));
        if (st == VH_ERR_TIMEOUT) {
            if (!atomic_load(&k.submitting) && atomic_load(&k.n_answered) == atomic_load(&k.n_accepted)) break;
            continue;
        }
        if (st != VH_OK) {
            fprintf(stderr, "soak: poll: %s\n", vh_status_string(st));
            k.bad = 1;
            break;
        }
        if (a.frame_id == 0 || a.frame_id > k.frames || k.answered[a.frame_id]) {
            fprintf(stderr, "soak: frame %llu answered twice or out of range\n", (unsigned long long)a.frame_id);
            k.bad = 1;
            continue;
        }
        k.answered[a.frame_id] = 1;
        atomic_fetch_add(&k.n_answered, 1);
        if (a.status == VH_OK) atomic_fetch_add(&k.n_ok, 1);
        else if (a.status == VH_ERR_DROPPED && p.queue_policy == VH_QUEUE_DROP_OLDEST) atomic_fetch_add(&k.n_dropped, 1);
        else {
            fprintf(stderr, "soak: frame %llu: %s\n", (unsigned long long)a.frame_id, vh_status_string(a.status));
            atomic_fetch_add(&k.n_other, 1);
            k.bad = 1;
        }
        if (rnd(&state) % 8 == 0) sleep_us(rnd(&state) % 3000); /* a slow consumer now and then */
    }
    pthread_join(thread, NULL);
    const long rss_end = rss_kb();
    for (uint32_t id = 1; id <= k.frames; id++)
        if (k.accepted[id] != k.answered[id]) {
            fprintf(stderr, "soak: frame %u %s\n", id, k.accepted[id] ? "accepted but never answered" : "answered, never accepted");
            k.bad = 1;
        }
    const long growth = rss_end - k.rss_early_kb;
    if (RSS_CHECKED && k.rss_early_kb > 0 && growth > 8192) {
        fprintf(stderr, "soak: resident memory grew %ld KiB after the first tenth\n", growth);
        k.bad = 1;
    }
    printf("soak %s %s: %u frames offered, %u accepted, %u rejected busy; answered %u: %u actions, %u dropped, %u "
           "other; RSS %ld KiB at 10%% -> %ld KiB at the end (%+ld%s)\n",
           argv[3], p.backends, k.frames, atomic_load(&k.n_accepted), atomic_load(&k.n_rejected),
           atomic_load(&k.n_answered), atomic_load(&k.n_ok), atomic_load(&k.n_dropped), atomic_load(&k.n_other),
           k.rss_early_kb, rss_end, growth, RSS_CHECKED ? "" : ", not checked under ASan");
    vh_session_destroy(k.session);
    free(k.answered);
    free(k.accepted);
    return k.bad ? 1 : 0;
}
