/*
 * OpenVLA on a Jetson AGX Orin (or any machine): a robot's perception-to-action loop on
 * vlahybrid's public API. README.md beside this file says how to build and run it on JetPack 6.
 *
 * The real-time contract:
 *  - latest frame: a capture thread submits every frame it gets and never waits; the session keeps
 *    one pending frame (queue_capacity 1, VH_QUEUE_LATEST), so a newer frame displaces one that has
 *    not started (answered DROPPED): the model always works on the newest view of the world;
 *  - deadlines: each frame must start within --deadline-ms of its capture, or it is answered
 *    EXPIRED without being computed; an action whose frame is older than --deadline-ms when it
 *    arrives is counted late (a controller would discard it);
 *  - statistics every --stats-every seconds: frames, actions, dropped, expired, late, and the
 *    frame-to-action latency of that window (p50 / p95 / max), then the session's totals at the end.
 *
 *   openvla_orin [--model DIR (default: the bundled tiny model)] (--frames DIR [--rate HZ] | --camera /dev/videoN [--size WxH])
 *                [--backend NAME] [--gpu-budget-gb GB] [--deadline-ms MS] [--seconds S]
 *                [--stats-every S] [--instruction TEXT] [--quiet]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vlahybrid/vlahybrid.h>

#include "frame_source.h"

#define MAX_WINDOW 4096

typedef struct options {
    const char *model, *frames, *camera, *backend, *instruction;
    double rate_hz, deadline_ms, seconds, stats_every, gpu_budget_gb;
    uint32_t width, height;
    int quiet;
} options;

typedef struct capture {
    vh_session *session;
    frame_source *source;
    const options *opt;
    atomic_ullong submitted;
    atomic_int done, failed;
} capture;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
    int64_t wait = t - now_ns();
    if (wait > 0) nanosleep(&(struct timespec){wait / 1000000000, wait % 1000000000}, NULL);
}

/* The camera side: take the newest frame, stamp it, submit it, never wait on the model. */
static void *capture_main(void *arg)
{
    capture *c = arg;
    const options *o = c->opt;
    const int64_t start = now_ns(), period = o->rate_hz > 0 ? (int64_t)(1e9 / o->rate_hz) : 0;
    char err[512];
    for (uint64_t n = 0; now_ns() - start < (int64_t)(o->seconds * 1e9); n++) {
        const uint8_t *rgb;
        uint32_t w, h;
        int64_t captured;
        if (frame_source_next(c->source, &rgb, &w, &h, &captured, err, sizeof err)) {
            fprintf(stderr, "openvla_orin: frame source: %s\n", err);
            atomic_store(&c->failed, 1);
            break;
        }
        vh_frame f;
        vh_frame_init(&f);
        f.rgb = rgb, f.width = w, f.height = h, f.stride = w * 3;
        f.instruction = o->instruction;
        f.sequence = n, f.tag = n;
        f.timestamp_ns = captured;
        f.deadline_ns = captured + (int64_t)(o->deadline_ms * 1e6); /* must start by then */
        if (vh_submit_frame(c->session, &f, NULL) == VH_OK) atomic_fetch_add(&c->submitted, 1);
        else fprintf(stderr, "openvla_orin: submit: %s\n", vh_last_error());
        if (!frame_source_is_live(c->source)) sleep_until(start + (int64_t)(n + 1) * period);
    }
    atomic_store(&c->done, 1);
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted window. */
static double percentile_ms(const int64_t *sorted, uint32_t n, double p)
{
    if (!n) return 0;
    uint32_t rank = (uint32_t)(p / 100.0 * n + 0.999999);
    return sorted[(rank ? rank : 1) - 1] / 1e6;
}

typedef struct window {
    int64_t latency[MAX_WINDOW]; /* capture -> action, the window's actions */
    uint32_t n;
    uint64_t actions, dropped, expired, late, other;
} window;

static void print_window(window *w, double t, double seconds)
{
    qsort(w->latency, w->n, sizeof w->latency[0], cmp_i64);
    printf("stats t=%.1fs: %.2f actions/s, %llu actions (%llu late), %llu dropped, %llu expired, %llu failed; "
           "capture->action p50 %.1f ms p95 %.1f ms max %.1f ms\n", t, seconds > 0 ? w->actions / seconds : 0.0,
           (unsigned long long)w->actions, (unsigned long long)w->late, (unsigned long long)w->dropped,
           (unsigned long long)w->expired, (unsigned long long)w->other, percentile_ms(w->latency, w->n, 50),
           percentile_ms(w->latency, w->n, 95), w->n ? w->latency[w->n - 1] / 1e6 : 0.0);
    fflush(stdout);
    memset(w, 0, sizeof *w);
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.rate_hz = 10, .deadline_ms = 1000, .seconds = 10, .stats_every = 2, .width = 640, .height = 480,
                   .instruction = "pick up the red block"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quiet")) { o->quiet = 1; continue; }
        if (!v) return fprintf(stderr, "openvla_orin: %s needs a value\n", a), -1;
        i++;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--frames")) o->frames = v;
        else if (!strcmp(a, "--camera")) o->camera = v;
        else if (!strcmp(a, "--backend")) o->backend = v;
        else if (!strcmp(a, "--instruction")) o->instruction = v;
        else if (!strcmp(a, "--rate")) o->rate_hz = atof(v);
        else if (!strcmp(a, "--deadline-ms")) o->deadline_ms = atof(v);
        else if (!strcmp(a, "--seconds")) o->seconds = atof(v);
        else if (!strcmp(a, "--stats-every")) o->stats_every = atof(v);
        else if (!strcmp(a, "--gpu-budget-gb")) o->gpu_budget_gb = atof(v);
        else if (!strcmp(a, "--size")) {
            if (sscanf(v, "%ux%u", &o->width, &o->height) != 2 || !o->width || !o->height)
                return fprintf(stderr, "openvla_orin: --size wants WxH, not '%s'\n", v), -1;
        } else return fprintf(stderr, "openvla_orin: unknown option %s\n", a), -1;
    }
    if (!o->frames == !o->camera) return fprintf(stderr, "openvla_orin: give --frames DIR or --camera DEVICE\n"), -1;
    if (o->rate_hz <= 0 || o->deadline_ms <= 0 || o->seconds <= 0 || o->stats_every <= 0 || o->gpu_budget_gb < 0)
        return fprintf(stderr, "openvla_orin: --rate, --deadline-ms, --seconds and --stats-every must be > 0\n"), -1;
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: openvla_orin [--model DIR] (--frames DIR [--rate HZ] | --camera /dev/videoN "
                        "[--size WxH]) [--backend NAME] [--gpu-budget-gb GB] [--deadline-ms MS] [--seconds S] "
                        "[--stats-every S] [--instruction TEXT] [--quiet]\n");
        return 2;
    }
    char err[512];
    capture c = {.opt = &o};
    c.source = o.frames ? frame_source_open_folder(o.frames, err, sizeof err)
                        : frame_source_open_camera(o.camera, o.width, o.height, err, sizeof err);
    if (!c.source) {
        fprintf(stderr, "openvla_orin: %s\n", err);
        return 1;
    }
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = o.model ? o.model : VH_EXAMPLE_MODEL_DIR; /* default: the bundled tiny model */
    p.backends = o.backend;
    p.queue_capacity = 1;
    p.queue_policy = VH_QUEUE_LATEST;
    p.gpu_memory_budget = (uint64_t)(o.gpu_budget_gb * 1e9);
    if (vh_session_create(&p, &c.session) != VH_OK) {
        fprintf(stderr, "openvla_orin: %s\n", vh_last_error());
        frame_source_close(c.source);
        return 1;
    }
    vh_session_info info;
    vh_session_info_init(&info);
    if (vh_session_get_info(c.session, &info) == VH_OK)
        printf("openvla_orin: vlahybrid %s, %u stage(s), deadline %.0f ms, %s\n", vh_version(), info.n_stages,
               o.deadline_ms, o.frames ? "frames from a folder" : "frames from a camera");

    pthread_t thread;
    if (pthread_create(&thread, NULL, capture_main, &c) != 0) {
        fprintf(stderr, "openvla_orin: cannot start the capture thread\n");
        vh_session_destroy(c.session);
        frame_source_close(c.source);
        return 1;
    }
    static window w;
    const int64_t start = now_ns(), every = (int64_t)(o.stats_every * 1e9);
    int64_t next_stats = start + every, window_start = start;
    uint64_t answered = 0;
    /* every accepted frame is answered: poll until the capture thread stopped and all came back */
    while (!atomic_load(&c.done) || answered < atomic_load(&c.submitted)) {
        vh_action a;
        vh_action_init(&a);
        if (vh_poll_action(c.session, &a, 20) == VH_OK) {
            answered++;
            const int64_t age = now_ns() - a.timestamp_ns;
            if (a.status == VH_OK) {
                w.actions++;
                if (w.n < MAX_WINDOW) w.latency[w.n++] = age;
                const int late = age > (int64_t)(o.deadline_ms * 1e6);
                w.late += late;
                if (!o.quiet)
                    printf("frame %4llu: action [%+.3f %+.3f %+.3f %+.3f %+.3f %+.3f grip %.2f] %.1f ms after capture%s\n",
                           (unsigned long long)a.sequence, a.values[0], a.values[1], a.values[2], a.values[3],
                           a.values[4], a.values[5], a.values[6], age / 1e6, late ? " LATE" : "");
            } else if (a.status == VH_ERR_DROPPED) w.dropped++;
            else if (a.status == VH_ERR_EXPIRED) w.expired++;
            else {
                w.other++;
                fprintf(stderr, "openvla_orin: frame %llu: %s: %s\n", (unsigned long long)a.sequence,
                        vh_status_string(a.status), vh_session_last_error(c.session));
            }
        }
        if (now_ns() >= next_stats) {
            const int64_t t = now_ns();
            print_window(&w, (t - start) / 1e9, (t - window_start) / 1e9);
            window_start = t;
            next_stats += every;
        }
    }
    pthread_join(thread, NULL);
    if (w.actions + w.dropped + w.expired + w.other) { /* the last, partial window: over its own length */
        const int64_t t = now_ns();
        print_window(&w, (t - start) / 1e9, (t - window_start) / 1e9);
    }
    vh_session_stats st;
    vh_session_stats_init(&st);
    int failed = atomic_load(&c.failed);
    if (vh_session_get_stats(c.session, &st) == VH_OK) {
        printf("total: %llu frames, %llu actions, %llu dropped, %llu expired, %llu failed; compute p50 %.1f ms "
               "(vision %.1f, prefill %.1f, decode %.1f), submit->action p95 %.1f ms\n",
               (unsigned long long)st.submitted, (unsigned long long)st.completed, (unsigned long long)st.dropped,
               (unsigned long long)st.expired, (unsigned long long)st.failed, st.compute.p50_ns / 1e6,
               st.vision.p50_ns / 1e6, st.prefill.p50_ns / 1e6, st.decode.p50_ns / 1e6, st.end_to_end.p95_ns / 1e6);
        failed |= st.failed > 0 || st.completed == 0;
    }
    vh_session_destroy(c.session);
    frame_source_close(c.source);
    return failed ? 1 : 0;
}
