/*
 * vh-bench: time a model folder on a stream of frames.
 *
 *   vh-bench [--model DIR] [--image FILE] [--frames N] [--warmup N] [--backend NAME[,NAME...]]
 *            [--threads N] [--inflight K | --rate HZ] [--plugin-path P] [--instruction TEXT] [--unnorm-key KEY]
 *            [--json]
 *            [--split N] [--mode serial|pipeline|packed] [--gpu-mem-budget BYTES] [--zone N] [--trace PATH]
 *            [--session-warmup N] [--seed S]
 *
 * Submits N copies of one image after W warm-up frames (on top of the session's own warm-up inside
 * vh_session_create, --session-warmup: -1 the session's default, 0 none), keeping K frames submitted and not yet
 * polled (default: the session's frames in flight, so a pipeline is kept full), or one frame every
 * 1/HZ seconds (--rate: a camera's arrivals, whatever the results), and reports frames/s in the
 * steady state (the timed frames finished before the last submission, over that time) and
 * per phase (vision = preprocessing + towers + projector,
 * prefill, decode) and end to end (submitted -> action ready), the mean, p50, p95 and max in
 * milliseconds. With two stages it also reports each stage's busy time per frame, the hand-off
 * time per frame, the overlap efficiency (frames/s x the slower stage's time per frame: the share
 * of the time that stage works) and the GPU stage's memory, over the same window as frames/s. Defaults: the bundled tiny model and its first frame.
 *
 * An Orion model (config.json model_type "orion", tools/orion/convert_orion.py's format or
 * vh-synth-checkpoint --family orion) runs on synthetic frames instead of the image: vision tokens
 * of the config's shape (vision_tokens x text_config.hidden_size), normal with standard deviation 1
 * from --seed S (default 0), ORION_TOKEN_SETS different sets used in turn; the commands cycle
 * 0, 1, ..., 5, 0, ...; the planner's noise is the library's draw from the session seed (--seed) and
 * each frame's sequence. Everything else (modes, --split, --frames-in-flight, --rate, the report)
 * is the same; Orion has no decode steps (one prefill a frame, then the planner).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bundled_data.h"
#include "image_file.h"
#include "orion_inputs.h"
#include "stage_options.h"
#include "vlahybrid/vlahybrid.h"

#define ORION_TOKEN_SETS 4 /* distinct synthetic frames an Orion benchmark cycles over */

typedef struct options {
    const char *model, *image, *backends, *plugin_path, *instruction, *unnorm_key;
    uint64_t seed;                                /* --seed: Orion's synthetic tokens and noise */
    int frames, warmup, threads, inflight, json; /* inflight 0: the session's frames in flight */
    double rate;                                  /* frames/s arriving; 0: closed loop (inflight) */
    vh_session_params stage;                      /* --split, --mode, --gpu-mem-budget, --zone, --trace */
} options;

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* The library is silent; a benchmark shows its warnings (and, with VH_CUDA_PROFILE=1, the cuda
 * backend's profile table, logged at INFO) on stderr. Errors it reports itself. */
static void log_to_stderr(void *user, vh_log_level level, const char *message)
{
    (void)user;
    if (level == VH_LOG_ERROR) return;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "vh-bench: %s: %s\n", names[level <= VH_LOG_DEBUG ? level : VH_LOG_DEBUG], message);
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.frames = 10, .warmup = 2, .inflight = 0, .instruction = "pick up the red block"};
    vh_session_params_init(&o->stage);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) { o->json = 1; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return -1;
        if (i + 1 >= argc) { fprintf(stderr, "vh-bench: %s needs a value\n", a); return -1; }
        const char *v = argv[++i];
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--image")) o->image = v;
        else if (!strcmp(a, "--backend")) o->backends = v;
        else if (!strcmp(a, "--plugin-path")) o->plugin_path = v;
        else if (!strcmp(a, "--instruction")) o->instruction = v;
        else if (!strcmp(a, "--unnorm-key")) o->unnorm_key = v;
        else if (!strcmp(a, "--frames")) { if (parse_int(v, 1, 1000000, &o->frames)) return -1; }
        else if (!strcmp(a, "--warmup")) { if (parse_int(v, 0, 1000000, &o->warmup)) return -1; }
        else if (!strcmp(a, "--session-warmup")) { if (parse_int(v, -1, 64, &o->stage.warmup_frames)) return -1; }
        else if (!strcmp(a, "--threads")) { if (parse_int(v, 0, 4096, &o->threads)) return -1; }
        else if (!strcmp(a, "--inflight")) { if (parse_int(v, 1, 64, &o->inflight)) return -1; }
        else if (!strcmp(a, "--seed")) {
            char *end;
            o->seed = strtoull(v, &end, 10);
            if (*end || end == v || *v == '-') return -1;
            o->stage.seed = o->seed;
        }
        else if (!strcmp(a, "--rate")) {
            char *end;
            o->rate = strtod(v, &end);
            if (*end || !(o->rate > 0 && o->rate <= 10000)) return -1;
        }
        else {
            int taken = vh_parse_stage_option("vh-bench", a, v, &o->stage); /* --split, --mode, ... */
            if (taken < 0) return -1;
            if (!taken) { fprintf(stderr, "vh-bench: unknown option %s\n", a); return -1; }
        }
    }
    return 0;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct summary { double mean, p50, p95, max; } summary;

/* Nearest-rank percentiles of n values (sorted in place). */
static summary summarise(double *v, int n)
{
    summary s = {0};
    if (n == 0) return s;
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    for (int i = 0; i < n; i++) s.mean += v[i] / n;
    s.p50 = v[(int)((n - 1) * 0.50 + 0.5)];
    s.p95 = v[(int)((n - 1) * 0.95 + 0.5)];
    s.max = v[n - 1];
    return s;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o)) {
        fprintf(stderr, "usage: vh-bench [--model DIR] [--image FILE] [--frames N] [--warmup N] [--backend NAMES]\n"
                        "                [--threads N] [--inflight K | --rate HZ] [--plugin-path P] [--instruction TEXT]\n"
                        "                [--unnorm-key KEY] [--json] [--split N] [--mode serial|pipeline|packed]\n"
                        "                [--gpu-mem-budget BYTES] [--zone N] [--trace PATH] [--session-warmup N] [--seed S]\n"
                        VH_STAGE_OPTIONS_USAGE
                        "Orion models: synthetic frames (vision tokens normal from --seed, commands 0..5 in turn,\n"
                        "noise drawn from --seed and the frame's sequence); --image does not apply.\n");
        return 2;
    }
    if (!o.model) o.model = VH_BUNDLED_MODEL_DIR;
    char why[1024];
    vh_orion_shape shape = {0};
    const int orion = vh_orion_model_shape(o.model, &shape, why, sizeof why);
    if (orion < 0) {
        fprintf(stderr, "vh-bench: %s\n", why);
        return 2;
    }
    if (orion && o.image) {
        fprintf(stderr, "vh-bench: %s is an Orion model: it runs on synthetic vision tokens, not --image\n", o.model);
        return 2;
    }
    char default_image[4096];
    if (!o.image && !orion) {
        snprintf(default_image, sizeof default_image, "%s/frame_0.png",
                 VH_BUNDLED_FRAMES_DIR);
        o.image = default_image;
    }
    uint8_t *rgb = NULL;
    uint32_t w = 0, h = 0;
    if (!orion && vh_image_load(o.image, &rgb, &w, &h, why, sizeof why) != VH_OK) {
        fprintf(stderr, "vh-bench: %s\n", why);
        return 2;
    }
    /* Orion: the synthetic frames' vision tokens, made before the session (and the clock) starts */
    float *tokens[ORION_TOKEN_SETS] = {NULL};
    const size_t n_token_floats = (size_t)shape.n_tokens * shape.width;
    for (int k = 0; orion && k < ORION_TOKEN_SETS; k++) {
        if (!(tokens[k] = malloc(n_token_floats * sizeof(float)))) {
            fprintf(stderr, "vh-bench: out of memory for the vision tokens\n");
            return 2;
        }
        vh_seeded_normals(o.seed, (uint64_t)k, tokens[k], n_token_floats);
    }

    vh_session_params p = o.stage;
    p.model_path = o.model;
    p.backends = o.backends;
    p.plugin_path = o.plugin_path;
    p.unnorm_key = o.unnorm_key;
    p.n_threads = o.threads;
    p.queue_policy = VH_QUEUE_BLOCK;
    p.log_fn = log_to_stderr;
    const char *profile = getenv("VH_CUDA_PROFILE");
    p.log_level = profile && !strcmp(profile, "1") ? VH_LOG_INFO : VH_LOG_WARN;
    double t_load = now_s();
    vh_session *s = NULL;
    if (vh_session_create(&p, &s) != VH_OK) {
        fprintf(stderr, "vh-bench: %s\n", vh_last_error());
        free(rgb);
        for (int k = 0; k < ORION_TOKEN_SETS; k++) free(tokens[k]);
        return 2;
    }
    t_load = now_s() - t_load;
    vh_session_info info, at_warmup, at_last_submit;
    vh_session_info_init(&info);
    vh_session_get_info(s, &info);
    at_warmup = info;
    if (o.inflight == 0) o.inflight = (int)info.frames_in_flight;

    vh_frame f;
    vh_frame_init(&f);
    if (orion) {
        f.n_vision_tokens = shape.n_tokens;
        f.vision_token_width = shape.width;
    } else {
        f.rgb = rgb;
        f.width = w;
        f.height = h;
        f.instruction = o.instruction;
    }

    const int total = o.warmup + o.frames;
    double *vision = calloc((size_t)o.frames, sizeof(double)), *prefill = calloc((size_t)o.frames, sizeof(double));
    double *decode = calloc((size_t)o.frames, sizeof(double)), *e2e = calloc((size_t)o.frames, sizeof(double));
    double *step = calloc((size_t)o.frames, sizeof(double)); /* one decode step: decode / (tokens - 1) */
    int failures = 0, timed = 0, submitted = 0, polled = 0;
    double t_first = 0, t_last = 0;
    /* Throughput is counted up to the last submission: after it the frames in flight drain with
     * nothing new beside them (a packed pass of decode rows alone is far cheaper than a full one),
     * which would overstate the steady rate. */
    double t_last_submit = 0;
    int finished_by_last_submit = 0;
    /* Closed loop: keep `inflight` frames submitted and not yet polled (1: each frame's latency is
     * its own). Open loop (--rate): a frame every 1/rate s whatever the results (policy BLOCK: a
     * submit waits while the queue is full), polling in between. */
    double next_arrival = now_s();
    while (polled < total) {
        while (submitted < total &&
               (o.rate > 0 ? now_s() >= next_arrival : submitted - polled < o.inflight)) {
            if (orion) { /* frame k: token set k mod sets, command k mod 6, noise from (seed, k) */
                f.vision_tokens = tokens[submitted % ORION_TOKEN_SETS];
                f.command = (int32_t)((uint32_t)submitted % shape.n_commands);
                f.sequence = (uint64_t)submitted;
            }
            if (vh_submit_frame(s, &f, NULL) != VH_OK) {
                fprintf(stderr, "vh-bench: %s\n", vh_last_error());
                failures++;
                break;
            }
            submitted++;
            next_arrival += o.rate > 0 ? 1.0 / o.rate : 0;
            if (submitted == total) {
                t_last_submit = now_s();
                finished_by_last_submit = timed;
                vh_session_info_init(&at_last_submit);
                vh_session_get_info(s, &at_last_submit);
            }
        }
        if (submitted == polled && (o.rate <= 0 || submitted == total)) break;
        int32_t wait_ms = -1;
        if (o.rate > 0 && submitted < total) {
            double ahead = next_arrival - now_s();
            wait_ms = ahead > 0 ? (int32_t)(ahead * 1e3) + 1 : 0;
        }
        vh_action a;
        vh_action_init(&a);
        if (vh_poll_action(s, &a, wait_ms) != VH_OK) continue;
        polled++;
        if (a.status != VH_OK) {
            failures++;
            continue;
        }
        if (polled == o.warmup) { /* throughput and stage times: after the warm-up */
            t_first = a.finished_ns / 1e9;
            vh_session_get_info(s, &at_warmup);
        }
        if (polled > o.warmup && timed < o.frames) {
            vision[timed] = a.vision_ns / 1e6;
            prefill[timed] = a.prefill_ns / 1e6;
            decode[timed] = a.decode_ns / 1e6;
            step[timed] = a.action_dim > 1 ? decode[timed] / (a.action_dim - 1) : 0;
            e2e[timed] = (a.finished_ns - a.submitted_ns) / 1e6;
            t_last = a.finished_ns / 1e9;
            if (o.warmup == 0 && timed == 0) t_first = a.started_ns / 1e9;
            timed++;
        }
    }
    summary sv = summarise(vision, timed), sp = summarise(prefill, timed), sd = summarise(decode, timed);
    summary se = summarise(e2e, timed), ss = summarise(step, timed);
    double fps = finished_by_last_submit > 0 && t_last_submit > t_first
                     ? finished_by_last_submit / (t_last_submit - t_first)
                     : timed && t_last > t_first ? timed / (t_last - t_first) : 0;

    /* Per-stage busy time per frame and how well the stages overlap, over the window frames/s is
     * counted in (the last warm-up frame's answer to the last submission, the frames finished in
     * it): with many frames in flight, the run's end would count the work of frames begun before
     * the window and the drain after it. Short runs (no frame finished in the window): the whole
     * run after the warm-up, over the timed frames. */
    vh_session_info end;
    vh_session_info_init(&end);
    vh_session_get_info(s, &end);
    const int in_window = finished_by_last_submit > 0 && t_last_submit > t_first;
    const vh_session_info *stop = in_window ? &at_last_submit : &end;
    const int frames = in_window ? finished_by_last_submit : timed;
    double stage_ms[4] = {0}, slowest_ms = 0, stage_passes[4] = {0}; /* passes a frame (packed: < tokens) */
    for (uint32_t i = 0; i < end.n_stages && i < 4 && frames; i++) {
        stage_ms[i] = (stop->stages[i].busy_ns - at_warmup.stages[i].busy_ns) / 1e6 / frames;
        stage_passes[i] = (double)(stop->stages[i].passes - at_warmup.stages[i].passes) / frames;
        if (stage_ms[i] > slowest_ms) slowest_ms = stage_ms[i];
    }
    const double handoff_ms = frames ? (stop->handoff_ns - at_warmup.handoff_ns) / 1e6 / frames : 0;
    const double overlap = fps * slowest_ms / 1e3; /* 1: the slowest stage never waits */
    const char *mode = end.execution_mode == VH_EXECUTION_PIPELINE ? "pipeline"
                       : end.execution_mode == VH_EXECUTION_PACKED ? "packed" : "serial";

    if (o.json) {
        json_t *j = json_pack("{s:s, s:s?, s:s, s:i, s:i, s:f, s:f, s:I, s:I}", "model", o.model, "image", o.image,
                              "backends", info.backends, "frames", timed, "failures", failures, "frames_per_s", fps,
                              "load_s", t_load, "backend_weight_bytes", (json_int_t)info.backend_weight_bytes,
                              "backend_work_bytes", (json_int_t)info.backend_work_bytes);
        const char *names[] = {"vision_ms", "prefill_ms", "decode_ms", "decode_step_ms", "end_to_end_ms"};
        summary *all[] = {&sv, &sp, &sd, &ss, &se};
        for (int i = 0; i < 5; i++)
            json_object_set_new(j, names[i], json_pack("{s:f, s:f, s:f, s:f}", "mean", all[i]->mean, "p50",
                                                       all[i]->p50, "p95", all[i]->p95, "max", all[i]->max));
        json_object_set_new(j, "family", json_string(orion ? "orion" : "openvla"));
        if (orion)
            json_object_set_new(j, "orion_frames", json_pack("{s:i, s:i, s:i, s:i, s:I}", "vision_tokens",
                                                             (int)shape.n_tokens, "width", (int)shape.width,
                                                             "token_sets", ORION_TOKEN_SETS, "commands",
                                                             (int)shape.n_commands, "seed", (json_int_t)o.seed));
        json_object_set_new(j, "mode", json_string(mode));
        json_object_set_new(j, "arrival_rate_hz", json_real(o.rate));
        json_object_set_new(j, "frames_in_flight", json_integer(end.frames_in_flight));
        json_object_set_new(j, "llm_split", json_integer(end.llm_split));
        json_object_set_new(j, "split_min", json_integer(end.split_min));
        json_object_set_new(j, "split_max", json_integer(end.split_max));
        json_object_set_new(j, "split_changes", json_integer(end.split_changes));
        json_object_set_new(j, "gpu_bytes", json_integer((json_int_t)end.gpu_bytes));
        json_object_set_new(j, "handoff_ms_per_frame", json_real(handoff_ms));
        json_object_set_new(j, "overlap_efficiency", json_real(overlap));
        json_t *stages = json_array();
        for (uint32_t i = 0; i < end.n_stages && i < 4; i++)
            json_array_append_new(stages, json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:I, s:I}", "backend", end.stages[i].backend,
                                                    "first_block", (int)end.stages[i].first_block, "n_blocks",
                                                    (int)end.stages[i].n_blocks, "busy_ms_per_frame", stage_ms[i],
                                                    "passes_per_frame", stage_passes[i],
                                                    "handoff_ms_per_frame", frames ? (stop->stages[i].handoff_ns -
                                                    at_warmup.stages[i].handoff_ns) / 1e6 / frames : 0.0,
                                                    "prefill_block_ns", (json_int_t)end.stages[i].prefill_block_ns,
                                                    "decode_block_ns", (json_int_t)end.stages[i].decode_block_ns));
        json_object_set_new(j, "stages", stages);
        char *text = json_dumps(j, JSON_COMPACT);
        printf("%s\n", text ? text : "{}");
        free(text);
        json_decref(j);
    } else {
        printf("model    %s (%u LLM layers, %u image tokens)\n", o.model, info.n_llm_layers, info.n_prompt_image_tokens);
        if (orion)
            printf("input    Orion: synthetic vision tokens %u x %u (normal, std 1, %d sets, seed %llu), commands "
                   "0..%u in turn, noise from the seed and each frame's sequence\n", shape.n_tokens, shape.width,
                   ORION_TOKEN_SETS, (unsigned long long)o.seed, shape.n_commands - 1);
        printf("backend  %s; load %.2f s; backend memory (all of it, allocated at load): weights %.1f MB, "
               "KV cache + activations + workspace %.1f MB\n", info.backends,
               t_load, info.backend_weight_bytes / 1e6, info.backend_work_bytes / 1e6);
        char arrivals[64];
        if (o.rate > 0) snprintf(arrivals, sizeof arrivals, "arriving at %.1f Hz", o.rate);
        else snprintf(arrivals, sizeof arrivals, "%d submitted ahead", o.inflight);
        printf("frames   %d timed after %d warm-up, %d failed; %.3f frames/s (%s, %u in flight, %s)\n", timed,
               o.warmup, failures, fps, mode, end.frames_in_flight, arrivals);
        if (end.n_stages > 1) {
            printf("split    %d LLM blocks on %s (zone %u..%u, %u changes); GPU stage memory %.1f MB\n", end.llm_split,
                   end.stages[0].backend, end.split_min, end.split_max, end.split_changes, end.gpu_bytes / 1e6);
            for (uint32_t i = 0; i < end.n_stages && i < 4; i++)
                printf("stage %u  %-12s blocks %u..%u, busy %.2f ms a frame in %.2f passes; one LLM block: prefill "
                       "%.3f ms, decode step %.3f ms\n", i, end.stages[i].backend, end.stages[i].first_block,
                       end.stages[i].first_block + end.stages[i].n_blocks - 1, stage_ms[i], stage_passes[i],
                       end.stages[i].prefill_block_ns / 1e6, end.stages[i].decode_block_ns / 1e6);
            printf("overlap  %.3f (frames/s x slowest stage's busy time); hand-off %.3f ms a frame\n", overlap,
                   handoff_ms);
        }
        printf("%-14s %10s %10s %10s %10s\n", "ms", "mean", "p50", "p95", "max");
        const char *names[] = {"vision", "prefill", "decode", "decode step", "end-to-end"};
        summary *all[] = {&sv, &sp, &sd, &ss, &se};
        for (int i = 0; i < 5; i++)
            printf("%-14s %10.2f %10.2f %10.2f %10.2f\n", names[i], all[i]->mean, all[i]->p50, all[i]->p95, all[i]->max);
    }
    vh_session_destroy(s);
    free(vision);
    free(prefill);
    free(decode);
    free(e2e);
    free(step);
    free(rgb);
    for (int k = 0; k < ORION_TOKEN_SETS; k++) free(tokens[k]);
    return failures ? 1 : 0;
}
