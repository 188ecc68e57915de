/*
 * A minimal robot control loop on vlahybrid's public API.
 *
 * A camera thread submits a frame every 1/rate seconds (a synthetic scene whose red block moves
 * across the table) and never blocks: with the default policy ("latest") a newer frame displaces
 * one that has not started. Each frame carries its capture time and sequence number and a
 * deadline: an action computed from a frame older than 250 ms is useless to the controller, so a
 * frame that cannot start by then is answered "expired" instead of being computed. The control
 * thread polls actions, checks how old the frame behind each one is, and "applies" it (prints it).
 * Every frame gets exactly one answer, in order: an action, or the reason it has none. Two
 * episodes run back to back with a reset between them, and the session's statistics are printed
 * at the end.
 *
 *   control_loop [MODEL_DIR] [RATE_HZ] [SECONDS]      control_loop --help
 *
 * Defaults: the bundled tiny model, 5 Hz, 3 s. Run from the build tree with
 * `meson devenv -C build ./examples/control_loop`.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vlahybrid/vlahybrid.h>

enum { WIDTH = 320, HEIGHT = 240, EPISODES = 2 };
#define FRAME_BUDGET_NS 250000000 /* a frame must start within 250 ms of its capture */

typedef struct camera {
    vh_session *session;
    double rate_hz, seconds;
    atomic_int submitted;
    atomic_int done;
} camera;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A grey table with a red block at column x. */
static void render(uint8_t *rgb, int x)
{
    for (int y = 0; y < HEIGHT; y++) {
        for (int i = 0; i < WIDTH; i++) {
            uint8_t *p = rgb + 3 * (y * WIDTH + i);
            int in_block = i >= x && i < x + 40 && y >= 120 && y < 160;
            p[0] = in_block ? 200 : (uint8_t)(110 + y / 8);
            p[1] = in_block ? 30 : (uint8_t)(100 + y / 8);
            p[2] = in_block ? 30 : (uint8_t)(90 + y / 8);
        }
    }
}

static void *camera_main(void *arg)
{
    camera *cam = arg;
    uint8_t *rgb = malloc((size_t)WIDTH * HEIGHT * 3);
    if (!rgb) {
        atomic_store(&cam->done, 1);
        return NULL;
    }
    const int64_t period = (int64_t)(1e9 / cam->rate_hz), start = now_ns();
    for (int n = 0; now_ns() - start < (int64_t)(cam->seconds * 1e9); n++) {
        render(rgb, (n * 12) % (WIDTH - 40));
        vh_frame f;
        vh_frame_init(&f);
        f.rgb = rgb;
        f.width = WIDTH;
        f.height = HEIGHT;
        f.instruction = "pick up the red block";
        f.tag = (uint64_t)n;
        f.sequence = (uint64_t)n;
        f.timestamp_ns = now_ns(); /* capture time: comes back with the action */
        f.deadline_ns = f.timestamp_ns + FRAME_BUDGET_NS;
        if (vh_submit_frame(cam->session, &f, NULL) == VH_OK) atomic_fetch_add(&cam->submitted, 1);
        else fprintf(stderr, "camera: %s\n", vh_last_error());
        int64_t next = start + (int64_t)(n + 1) * period, wait = next - now_ns();
        if (wait > 0) nanosleep(&(struct timespec){wait / 1000000000, wait % 1000000000}, NULL);
    }
    free(rgb);
    atomic_store(&cam->done, 1);
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: control_loop [MODEL_DIR] [RATE_HZ] [SECONDS]\n"
                 "A robot control loop on the public API: a camera thread submits a synthetic frame every\n"
                 "1/RATE_HZ s for SECONDS s, twice (two episodes), and the control thread applies each action.\n"
                 "  MODEL_DIR  a Hugging Face OpenVLA checkpoint folder (default: the bundled tiny model)\n"
                 "  RATE_HZ    frames per second, > 0 (default 5)\n"
                 "  SECONDS    length of an episode, > 0 (default 3)\n");
}

/* A number > 0 from the whole of text, else 0. */
static double positive(const char *text)
{
    char *end;
    const double v = strtod(text, &end);
    return end != text && !*end && v > 0 && v < 1e9 ? v : 0;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) { /* options are not model folders */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (argv[i][0] == '-' && argv[i][1] && !positive(argv[i])) {
            fprintf(stderr, "control_loop: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = argc > 1 ? argv[1] : VH_EXAMPLE_MODEL_DIR;
    p.queue_capacity = 1; /* newest frame wins */
    camera cam = {.rate_hz = argc > 2 ? positive(argv[2]) : 5.0, .seconds = argc > 3 ? positive(argv[3]) : 3.0};
    if (argc > 4 || cam.rate_hz <= 0 || cam.seconds <= 0) {
        usage(stderr);
        return 2;
    }
    if (vh_session_create(&p, &cam.session) != VH_OK) {
        fprintf(stderr, "control_loop: %s\n", vh_last_error());
        return 1;
    }
    int answered = 0, applied = 0;
    for (int episode = 0; episode < EPISODES; episode++) {
        if (episode > 0) vh_session_reset(cam.session, 0); /* between episodes: nothing reloaded */
        atomic_store(&cam.submitted, 0);
        atomic_store(&cam.done, 0);
        pthread_t thread;
        if (pthread_create(&thread, NULL, camera_main, &cam) != 0) break;
        int answered_now = 0;
        while (!atomic_load(&cam.done) || answered_now < atomic_load(&cam.submitted)) {
            vh_action a;
            vh_action_init(&a);
            if (vh_poll_action(cam.session, &a, 50) != VH_OK) continue; /* nothing yet: keep the loop alive */
            answered_now++;
            double age_ms = (now_ns() - a.timestamp_ns) / 1e6;
            if (a.status != VH_OK) {
                printf("episode %llu frame %3llu: %s\n", (unsigned long long)a.episode,
                       (unsigned long long)a.sequence, vh_status_string(a.status));
                continue;
            }
            applied++;
            printf("episode %llu frame %3llu: dx %+.4f dy %+.4f dz %+.4f droll %+.4f dpitch %+.4f dyaw %+.4f "
                   "grip %.3f  (frame age %.1f ms, compute %.1f ms)\n", (unsigned long long)a.episode,
                   (unsigned long long)a.sequence, a.values[0], a.values[1], a.values[2], a.values[3], a.values[4],
                   a.values[5], a.values[6], age_ms, (a.finished_ns - a.started_ns) / 1e6);
        }
        pthread_join(thread, NULL);
        answered += answered_now;
    }
    printf("%d frames, %d actions applied, %d answered without an action\n", answered, applied, answered - applied);
    vh_session_stats st;
    vh_session_stats_init(&st);
    if (vh_session_get_stats(cam.session, &st) == VH_OK)
        printf("statistics: %llu completed, %llu dropped, %llu expired, %llu failed; submitted -> action "
               "p50 %.1f ms, p95 %.1f ms, max %.1f ms\n", (unsigned long long)st.completed,
               (unsigned long long)st.dropped, (unsigned long long)st.expired, (unsigned long long)st.failed,
               st.end_to_end.p50_ns / 1e6, st.end_to_end.p95_ns / 1e6, st.end_to_end.max_ns / 1e6);
    vh_session_destroy(cam.session);
    return 0;
}
