/*
 * vh-bench: time a model folder on a stream of frames, in one configuration or a sweep of them.
 *
 *   vh-bench [--model DIR] [--image FILE] [--frames N] [--warmup N] [--backend NAME[,NAME...]]
 *            [--threads N] [--inflight K | --rate HZ] [--plugin-path P] [--instruction TEXT] [--unnorm-key KEY]
 *            [--split N[,N...]] [--mode M[,M...]] [--frames-in-flight K[,K...]] [--rounds R]
 *            [--format text|table|csv|json] [--json] [--gpu-mem-budget BYTES] [--zone N] [--trace PATH]
 *            [--session-warmup N] [--seed S] [--frame-source tokens|cameras] [--cameras] [--camera-size WxH]
 *
 * One run submits N copies of one image after W warm-up frames (on top of the session's own warm-up
 * inside vh_session_create, --session-warmup: -1 the session's default, 0 none), keeping K frames
 * submitted and not yet polled (default: the session's frames in flight, so a pipeline is kept
 * full), or one frame every 1/HZ seconds (--rate: a camera's arrivals, whatever the results), and
 * reports frames/s in the steady state (the timed frames finished before the last submission, over
 * that time) and per phase (vision = preprocessing + towers + projector, prefill, decode) and end
 * to end (submitted -> action ready), the mean, p50, p95 and max in milliseconds. With two stages it
 * also reports each stage's busy time per frame, the hand-off time per frame, the overlap
 * efficiency (frames/s x the slower stage's time per frame: the share of the time that stage works)
 * and the GPU stage's memory, over the same window as frames/s; and always the process's resident
 * memory (the mapped checkpoint's touched pages included, not only the backends' allocations).
 * Defaults: the bundled tiny model and its first frame.
 *
 * Sweeps (sweep.h): --split, --mode and --frames-in-flight take comma-separated lists and every
 * combination runs, splits outermost. --rounds R runs every combination R times: the sessions of
 * one split are then created once and kept while the rounds alternate their order, so that a
 * drift of the machine does not favour one configuration, and the table gives each one's median,
 * its spread, and its ratio to the first mode of the list as the median of the ratios within a
 * round (a paired comparison: on a VM whose memory bandwidth moves by a third within a minute,
 * separate runs minutes apart cannot show a 3% difference).
 *
 * Output (--format): text (one run: the detailed report; a sweep: the table), table, csv (a row a
 * run), json (an object a run, one a line; a sweep ends with a {"sweep": [...]} line of the table's
 * rows). --json is --format json.
 *
 * An Orion or MindDrive model (config.json model_type "orion" or "minddrive", tools/orion/convert_orion.py's
 * and tools/minddrive/convert_minddrive.py's format, or
 * vh-synth-checkpoint --family orion|minddrive) runs on synthetic frames instead of the image: vision tokens
 * of the config's shape (vision_tokens x text_config.hidden_size), normal with standard deviation 1
 * from --seed S (default 0), ORION_TOKEN_SETS different sets used in turn; the commands cycle
 * 0, 1, ..., 5, 0, ...; the planner's noise is the library's draw from the session seed (--seed) and
 * each frame's sequence. Everything else (modes, --split, --frames-in-flight, --rate, the report)
 * is the same; Orion has no decode steps (one prefill a frame, then the planner).
 *
 * An Orion or MindDrive folder converted with the camera front end (config.json's front_end; or
 * vh-synth-checkpoint --front-end) runs on camera frames instead, unless --frame-source tokens says
 * tokens (--frame-source cameras, or --cameras,
 * asks for them and is refused on a folder without a front end): six RGB images of --camera-size
 * (default 1600x900, the agent's), pixels from --seed, CAMERA_IMAGE_SETS sets used in turn, with a
 * fixed rig's lidar2img, an ego driving a circle, can_bus to match and timestamp_ns 0.5 s apart
 * (tools/camera_rig.h), the commands and noise as above, stream 0. Every run is one episode from
 * the rig's frame 0 (a session kept over rounds is reset first), so the rounds time the same work.
 * The front end runs on the stage of the ViT's blocks (cuda, cpu_amx or cpu_generic; doc/api.md).
 */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_sweep.h"
#include "bundled_data.h"
#include "camera_rig.h"
#include "image_file.h"
#include "json_line.h"
#include "orion_inputs.h"
#include "stage_options.h"
#include "tool_cli.h"
#include "vlahybrid/vlahybrid.h"

#define ORION_TOKEN_SETS 4  /* distinct synthetic frames an Orion benchmark cycles over */
#define CAMERA_IMAGE_SETS 3 /* distinct camera frames: 6 x 4.3 MB each at 1600 x 900 */

/* What a driving model's frames carry: --frame-source, or (auto) cameras where the folder has a
 * camera front end, else tokens. */
typedef enum frame_source { SOURCE_AUTO, SOURCE_TOKENS, SOURCE_CAMERAS } frame_source;

typedef enum output_format { FORMAT_TEXT, FORMAT_TABLE, FORMAT_CSV, FORMAT_JSON } output_format;

typedef struct options {
    const char *model, *image, *backends, *plugin_path, *instruction, *unnorm_key;
    uint64_t seed;                                /* --seed: a driving model's synthetic tokens, images, noise */
    frame_source source;                          /* --frame-source, --cameras */
    uint32_t camera_w, camera_h;                  /* --camera-size */
    int camera_size_given;
    int frames, warmup, threads, inflight;        /* inflight 0: the session's frames in flight */
    double rate;                                  /* frames/s arriving; 0: closed loop (inflight) */
    output_format format;
    vh_session_params stage;                      /* --gpu-mem-budget, --zone, --trace, ... */
    vh_bench_sweep sweep;                         /* --split, --mode, --frames-in-flight, --rounds */
} options;

/* What one run (one configuration, one round) measured. */
typedef struct run_result {
    int timed, failures;
    double fps, load_s;
    vh_bench_summary vision, prefill, decode, step, e2e;
    vh_session_info info, end;         /* at create, and at the run's end */
    double stage_ms[4], stage_passes[4], stage_handoff_ms[4]; /* a frame, over the throughput window */
    double handoff_ms, overlap;
    uint64_t rss_bytes, rss_peak_bytes; /* the process's resident memory at the run's end, and peak */
    const char *mode;
} run_result;

/* The frames one run submits: an image with an instruction, or a driving model's (Orion's, MindDrive's)
 * synthetic tokens or cameras. */
typedef struct bench_input {
    int orion, cameras;
    vh_orion_shape shape;
    vh_camera_rig rig; /* cameras */
    uint8_t *rgb;
    uint32_t width, height;
    float *tokens[ORION_TOKEN_SETS];
} bench_input;

static int parse_int(const char *flag, const char *s, int lo, int hi, int *out)
{
    long v;
    if (vh_tool_parse_long("vh-bench", flag, s, lo, hi, &v)) return -1;
    *out = (int)v;
    return 0;
}

/* The library is silent; a benchmark shows its warnings (and, with VH_CUDA_PROFILE=1 or
 * VH_CPU_PROFILE=1, the backend's profile table, logged at INFO) on stderr. Errors it reports itself. */
static void log_to_stderr(void *user, vh_log_level level, const char *message)
{
    (void)user;
    if (level == VH_LOG_ERROR) return;
    static const char *const names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "vh-bench: %s: %s\n", names[level <= VH_LOG_DEBUG ? level : VH_LOG_DEBUG], message);
}

/* Options that take a value; any other word starting with "--" is unknown (and says so, rather
 * than "needs a value"). */
static const char *const valued_options[] = {"--model", "--image", "--backend", "--plugin-path", "--instruction",
                                             "--unnorm-key", "--frames", "--warmup", "--session-warmup",
                                             "--threads", "--inflight", "--seed", "--rate", "--rounds", "--format",
                                             "--split", "--mode", "--frames-in-flight", "--gpu-mem-budget", "--zone",
                                             "--trace", "--frame-source", "--camera-size", NULL};

/* --camera-size WxH, each 1..16384 (what the library takes for an image) */
static int parse_camera_size(const char *v, options *o)
{
    char *x = NULL, *end = NULL;
    const unsigned long w = strtoul(v, &x, 10);
    /* digits on both sides of the x: no signs or spaces, which strtoul would take */
    const int shaped = isdigit((unsigned char)*v) && *x == 'x' && isdigit((unsigned char)x[1]);
    const unsigned long h = shaped ? strtoul(x + 1, &end, 10) : 0;
    if (!shaped || *end || w < 1 || h < 1 || w > 16384 || h > 16384) {
        fprintf(stderr, "vh-bench: --camera-size needs WIDTHxHEIGHT, each 1..16384 pixels (e.g. 1600x900), "
                        "not \"%s\"\n", v);
        return -1;
    }
    o->camera_w = (uint32_t)w;
    o->camera_h = (uint32_t)h;
    o->camera_size_given = 1;
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.frames = 10, .warmup = 2, .inflight = 0, .instruction = "pick up the red block",
                   .camera_w = 1600, .camera_h = 900};
    vh_session_params_init(&o->stage);
    vh_bench_sweep_init(&o->sweep);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) { o->format = FORMAT_JSON; continue; }
        if (!strcmp(a, "--cameras")) { o->source = SOURCE_CAMERAS; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!strcmp(a, "--version")) {
            vh_tool_print_version(stdout, "vh-bench");
            exit(0);
        }
        if (vh_tool_check_option("vh-bench", argc, argv, i, valued_options)) return -1;
        const char *v = argv[++i];
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--image")) o->image = v;
        else if (!strcmp(a, "--backend")) o->backends = v;
        else if (!strcmp(a, "--plugin-path")) o->plugin_path = v;
        else if (!strcmp(a, "--instruction")) o->instruction = v;
        else if (!strcmp(a, "--unnorm-key")) o->unnorm_key = v;
        else if (!strcmp(a, "--frames")) { if (parse_int(a, v, 1, 1000000, &o->frames)) return -1; }
        else if (!strcmp(a, "--warmup")) { if (parse_int(a, v, 0, 1000000, &o->warmup)) return -1; }
        else if (!strcmp(a, "--session-warmup")) { if (parse_int(a, v, -1, 64, &o->stage.warmup_frames)) return -1; }
        else if (!strcmp(a, "--threads")) { if (parse_int(a, v, 0, 4096, &o->threads)) return -1; }
        else if (!strcmp(a, "--inflight")) { if (parse_int(a, v, 1, 64, &o->inflight)) return -1; }
        else if (!strcmp(a, "--rounds")) { if (parse_int(a, v, 1, 1000, &o->sweep.rounds)) return -1; }
        else if (!strcmp(a, "--seed")) {
            char *end;
            o->seed = strtoull(v, &end, 10);
            if (*end || end == v || *v == '-') {
                fprintf(stderr, "vh-bench: --seed needs a whole number >= 0, not \"%s\"\n", v);
                return -1;
            }
            o->stage.seed = o->seed;
        }
        else if (!strcmp(a, "--rate")) {
            char *end;
            o->rate = strtod(v, &end);
            if (*end || end == v || !(o->rate > 0 && o->rate <= 10000)) {
                fprintf(stderr, "vh-bench: --rate needs frames a second in (0, 10000], not \"%s\"\n", v);
                return -1;
            }
        }
        else if (!strcmp(a, "--frame-source")) {
            if (!strcmp(v, "tokens")) o->source = SOURCE_TOKENS;
            else if (!strcmp(v, "cameras")) o->source = SOURCE_CAMERAS;
            else { fprintf(stderr, "vh-bench: --frame-source is tokens or cameras, not \"%s\"\n", v); return -1; }
        }
        else if (!strcmp(a, "--camera-size")) { if (parse_camera_size(v, o)) return -1; }
        else if (!strcmp(a, "--format")) {
            if (!strcmp(v, "text")) o->format = FORMAT_TEXT;
            else if (!strcmp(v, "table")) o->format = FORMAT_TABLE;
            else if (!strcmp(v, "csv")) o->format = FORMAT_CSV;
            else if (!strcmp(v, "json")) o->format = FORMAT_JSON;
            else { fprintf(stderr, "vh-bench: --format is text, table, csv or json\n"); return -1; }
        }
        else {
            /* the swept options (lists), then the other stage options (--gpu-mem-budget, ...) */
            int taken = vh_bench_sweep_parse("vh-bench", a, v, &o->sweep);
            if (!taken) taken = vh_parse_stage_option("vh-bench", a, v, &o->stage);
            if (taken <= 0) return -1;
        }
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The process's resident and peak resident bytes (/proc/self/status; 0 where it is not there). */
static void resident_bytes(uint64_t *now, uint64_t *peak)
{
    *now = *peak = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    unsigned long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) *now = kb * 1024;
        else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) *peak = kb * 1024;
    }
    fclose(f);
}

static vh_status create_session(const options *o, const vh_bench_config *c, vh_session **s, double *load_s)
{
    vh_session_params p = o->stage;
    p.model_path = o->model;
    p.backends = o->backends;
    p.plugin_path = o->plugin_path;
    p.unnorm_key = o->unnorm_key;
    p.n_threads = o->threads;
    p.queue_policy = VH_QUEUE_BLOCK;
    p.log_fn = log_to_stderr;
    if (c->llm_split >= 0) p.llm_split = c->llm_split;
    if (c->has_mode) p.execution_mode = c->mode;
    if (c->frames_in_flight) p.frames_in_flight = c->frames_in_flight;
    /* each as its backend reads it (backends/common/backend_knobs.c) */
    const char *cuda_profile = getenv("VH_CUDA_PROFILE"), *cpu_profile = getenv("VH_CPU_PROFILE");
    const int profiling = (cuda_profile && !strcmp(cuda_profile, "1")) ||
                          (cpu_profile && *cpu_profile && strcmp(cpu_profile, "0") != 0);
    p.log_level = profiling ? VH_LOG_INFO : VH_LOG_WARN;
    double t = now_s();
    vh_status st = vh_session_create(&p, s);
    *load_s = now_s() - t;
    if (st != VH_OK) fprintf(stderr, "vh-bench: %s\n", vh_last_error());
    return st;
}

/* One run: warm-up frames, then the timed ones, on a session already created (and perhaps used by
 * an earlier round). Returns 0, or -1 when nothing could be measured. */
static int run_frames(const options *o, const bench_input *in, vh_session *s, run_result *r)
{
    memset(r, 0, sizeof *r);
    vh_session_info_init(&r->info);
    vh_session_get_info(s, &r->info);
    vh_session_info at_warmup = r->info, at_last_submit = r->info;
    const int inflight = o->inflight ? o->inflight : (int)r->info.frames_in_flight;
    /* camera frames: the heads' memory from the rig's frame 0, whatever an earlier round left */
    if (in->cameras && vh_session_reset(s, 0) != VH_OK) {
        fprintf(stderr, "vh-bench: %s\n", vh_last_error());
        return -1;
    }

    vh_frame f;
    vh_frame_init(&f);
    vh_rig_state rig_state; /* the camera frame's ego pose and can_bus, copied at each submit */
    if (in->orion && !in->cameras) {
        f.n_vision_tokens = in->shape.n_tokens;
        f.vision_token_width = in->shape.width;
    } else if (!in->orion) {
        f.rgb = in->rgb;
        f.width = in->width;
        f.height = in->height;
        f.instruction = o->instruction;
    }

    const int total = o->warmup + o->frames;
    if (o->rate <= 0 && o->frames <= inflight)
        fprintf(stderr, "vh-bench: warning: %d timed frames with %d kept in flight: no steady state is timed "
                        "(the frames are submitted at once); give --frames well above %d\n", o->frames, inflight,
                inflight);
    double *samples = calloc((size_t)o->frames * 5, sizeof(double));
    if (!samples) {
        fprintf(stderr, "vh-bench: out of memory\n");
        return -1;
    }
    double *vision = samples, *prefill = samples + o->frames, *decode = samples + 2 * o->frames;
    double *e2e = samples + 3 * o->frames, *step = samples + 4 * o->frames; /* step: decode / (tokens - 1) */
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
        while (submitted < total && (o->rate > 0 ? now_s() >= next_arrival : submitted - polled < inflight)) {
            if (in->orion) { /* frame k: token or image set k mod sets, command k mod 6, noise from (seed, k) */
                if (in->cameras) vh_camera_rig_frame(&in->rig, (uint64_t)submitted, &rig_state, &f);
                else f.vision_tokens = in->tokens[submitted % ORION_TOKEN_SETS];
                f.command = (int32_t)((uint32_t)submitted % in->shape.n_commands);
                f.sequence = (uint64_t)submitted;
            }
            if (vh_submit_frame(s, &f, NULL) != VH_OK) {
                fprintf(stderr, "vh-bench: %s\n", vh_last_error());
                failures++;
                break;
            }
            submitted++;
            next_arrival += o->rate > 0 ? 1.0 / o->rate : 0;
            if (submitted == total) {
                t_last_submit = now_s();
                finished_by_last_submit = timed;
                vh_session_info_init(&at_last_submit);
                vh_session_get_info(s, &at_last_submit);
            }
        }
        if (submitted == polled && (o->rate <= 0 || submitted == total)) break;
        int32_t wait_ms = -1;
        if (o->rate > 0 && submitted < total) {
            double ahead = next_arrival - now_s();
            wait_ms = ahead > 0 ? (int32_t)(ahead * 1e3) + 1 : 0;
        }
        vh_action a;
        vh_action_init(&a);
        if (vh_poll_action(s, &a, wait_ms) != VH_OK) continue;
        polled++;
        if (a.status != VH_OK) {
            if (!failures++) /* the first one's reason (e.g. a camera frame on a GPU first stage) */
                fprintf(stderr, "vh-bench: a frame failed: %s%s%s\n",
                        vh_status_string(a.status), a.message[0] ? ": " : "", a.message);
            continue;
        }
        if (polled == o->warmup) { /* throughput and stage times: after the warm-up */
            t_first = a.finished_ns / 1e9;
            vh_session_get_info(s, &at_warmup);
        }
        if (polled > o->warmup && timed < o->frames) {
            vision[timed] = a.vision_ns / 1e6;
            prefill[timed] = a.prefill_ns / 1e6;
            decode[timed] = a.decode_ns / 1e6;
            step[timed] = a.action_dim > 1 ? decode[timed] / (a.action_dim - 1) : 0;
            e2e[timed] = (a.finished_ns - a.submitted_ns) / 1e6;
            t_last = a.finished_ns / 1e9;
            if (o->warmup == 0 && timed == 0) t_first = a.started_ns / 1e9;
            timed++;
        }
    }
    r->timed = timed;
    r->failures = failures;
    r->vision = vh_bench_summarise(vision, timed);
    r->prefill = vh_bench_summarise(prefill, timed);
    r->decode = vh_bench_summarise(decode, timed);
    r->e2e = vh_bench_summarise(e2e, timed);
    r->step = vh_bench_summarise(step, timed);
    free(samples);
    r->fps = finished_by_last_submit > 0 && t_last_submit > t_first ? finished_by_last_submit / (t_last_submit - t_first)
             : timed && t_last > t_first                          ? timed / (t_last - t_first)
                                                                   : 0;

    /* Per-stage busy time per frame and how well the stages overlap, over the window frames/s is
     * counted in (the last warm-up frame's answer to the last submission, the frames finished in
     * it): with many frames in flight, the run's end would count the work of frames begun before
     * the window and the drain after it. Short runs (no frame finished in the window): the whole
     * run after the warm-up, over the timed frames. */
    vh_session_info_init(&r->end);
    vh_session_get_info(s, &r->end);
    const int in_window = finished_by_last_submit > 0 && t_last_submit > t_first;
    const vh_session_info *stop = in_window ? &at_last_submit : &r->end;
    const int frames = in_window ? finished_by_last_submit : timed;
    double slowest_ms = 0;
    for (uint32_t i = 0; i < r->end.n_stages && i < 4 && frames; i++) {
        r->stage_ms[i] = (stop->stages[i].busy_ns - at_warmup.stages[i].busy_ns) / 1e6 / frames;
        r->stage_passes[i] = (double)(stop->stages[i].passes - at_warmup.stages[i].passes) / frames;
        r->stage_handoff_ms[i] = (stop->stages[i].handoff_ns - at_warmup.stages[i].handoff_ns) / 1e6 / frames;
        if (r->stage_ms[i] > slowest_ms) slowest_ms = r->stage_ms[i];
    }
    r->handoff_ms = frames ? (stop->handoff_ns - at_warmup.handoff_ns) / 1e6 / frames : 0;
    r->overlap = r->fps * slowest_ms / 1e3; /* 1: the slowest stage never waits */
    r->mode = r->end.execution_mode == VH_EXECUTION_PIPELINE ? "pipeline"
              : r->end.execution_mode == VH_EXECUTION_PACKED ? "packed"
                                                              : "serial";
    resident_bytes(&r->rss_bytes, &r->rss_peak_bytes);
    return 0;
}

static json_t *summary_json(const vh_bench_summary *s)
{
    return json_pack("{s:f, s:f, s:f, s:f}", "mean", s->mean, "p50", s->p50, "p95", s->p95, "max", s->max);
}

/* What the synthetic driving frames were: the source, the model's token shape, and for camera frames
 * the cameras' count and size. */
static json_t *orion_frames_json(const options *o, const bench_input *in)
{
    json_t *j = json_pack("{s:s, s:i, s:i, s:i, s:I}", "source", in->cameras ? "cameras" : "tokens", "vision_tokens",
                          (int)in->shape.n_tokens, "width", (int)in->shape.width, "commands",
                          (int)in->shape.n_commands, "seed", (json_int_t)o->seed);
    if (in->cameras) {
        json_object_set_new(j, "cameras", json_integer(VH_RIG_CAMERAS));
        json_object_set_new(j, "camera_width", json_integer(in->rig.width));
        json_object_set_new(j, "camera_height", json_integer(in->rig.height));
        json_object_set_new(j, "image_sets", json_integer(in->rig.n_sets));
    } else {
        json_object_set_new(j, "token_sets", json_integer(ORION_TOKEN_SETS));
    }
    return j;
}

static void print_json(const options *o, const bench_input *in, const run_result *r, int round)
{
    json_t *j = json_pack("{s:s, s:s?, s:s, s:i, s:i, s:f, s:f, s:I, s:I}", "model", o->model, "image", o->image,
                          "backends", r->info.backends, "frames", r->timed, "failures", r->failures, "frames_per_s",
                          r->fps, "load_s", r->load_s, "backend_weight_bytes", (json_int_t)r->info.backend_weight_bytes,
                          "backend_work_bytes", (json_int_t)r->info.backend_work_bytes);
    const char *names[] = {"vision_ms", "prefill_ms", "decode_ms", "decode_step_ms", "end_to_end_ms"};
    const vh_bench_summary *all[] = {&r->vision, &r->prefill, &r->decode, &r->step, &r->e2e};
    for (int i = 0; i < 5; i++) json_object_set_new(j, names[i], summary_json(all[i]));
    json_object_set_new(j, "family", json_string(in->orion ? in->shape.family : "openvla"));
    if (in->orion) json_object_set_new(j, "orion_frames", orion_frames_json(o, in));
    json_object_set_new(j, "mode", json_string(r->mode));
    json_object_set_new(j, "round", json_integer(round));
    json_object_set_new(j, "arrival_rate_hz", json_real(o->rate));
    json_object_set_new(j, "frames_in_flight", json_integer(r->end.frames_in_flight));
    json_object_set_new(j, "llm_split", json_integer(r->end.llm_split));
    json_object_set_new(j, "split_min", json_integer(r->end.split_min));
    json_object_set_new(j, "split_max", json_integer(r->end.split_max));
    json_object_set_new(j, "split_changes", json_integer(r->end.split_changes));
    json_object_set_new(j, "gpu_bytes", json_integer((json_int_t)r->end.gpu_bytes));
    json_object_set_new(j, "rss_bytes", json_integer((json_int_t)r->rss_bytes));
    json_object_set_new(j, "rss_peak_bytes", json_integer((json_int_t)r->rss_peak_bytes));
    json_object_set_new(j, "handoff_ms_per_frame", json_real(r->handoff_ms));
    json_object_set_new(j, "overlap_efficiency", json_real(r->overlap));
    json_t *stages = json_array();
    for (uint32_t i = 0; i < r->end.n_stages && i < 4; i++)
        json_array_append_new(stages, json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:I, s:I}", "backend",
                                                r->end.stages[i].backend, "first_block",
                                                (int)r->end.stages[i].first_block, "n_blocks",
                                                (int)r->end.stages[i].n_blocks, "busy_ms_per_frame", r->stage_ms[i],
                                                "passes_per_frame", r->stage_passes[i], "handoff_ms_per_frame",
                                                r->stage_handoff_ms[i], "prefill_block_ns",
                                                (json_int_t)r->end.stages[i].prefill_block_ns, "decode_block_ns",
                                                (json_int_t)r->end.stages[i].decode_block_ns));
    json_object_set_new(j, "stages", stages);
    if (vh_json_print_line(stdout, j)) printf("{}\n");
    fflush(stdout);
    json_decref(j);
}

static void print_text(const options *o, const bench_input *in, const run_result *r)
{
    const vh_session_info *info = &r->info, *end = &r->end;
    printf("model    %s (%u LLM layers, %u image tokens)\n", o->model, info->n_llm_layers, info->n_prompt_image_tokens);
    if (in->cameras)
        printf("input    %s: synthetic camera frames, %d cameras %u x %u (%u image sets, seed %llu), a moving ego "
               "0.5 s a frame, commands 0..%u in turn, noise from the seed and each frame's sequence\n",
               in->shape.label, VH_RIG_CAMERAS, in->rig.width, in->rig.height, in->rig.n_sets,
               (unsigned long long)o->seed, in->shape.n_commands - 1);
    else if (in->orion)
        printf("input    %s: synthetic vision tokens %u x %u (normal, std 1, %d sets, seed %llu), commands "
               "0..%u in turn, noise from the seed and each frame's sequence\n", in->shape.label, in->shape.n_tokens,
               in->shape.width,
               ORION_TOKEN_SETS, (unsigned long long)o->seed, in->shape.n_commands - 1);
    printf("backend  %s; load %.2f s; backend memory (all of it, allocated at load): weights %.1f MB, "
           "KV cache + activations + workspace %.1f MB\n", info->backends, r->load_s,
           info->backend_weight_bytes / 1e6, info->backend_work_bytes / 1e6);
    printf("memory   process resident %.1f MB (peak %.1f MB; the mapped checkpoint's pages included)\n",
           r->rss_bytes / 1e6, r->rss_peak_bytes / 1e6);
    char arrivals[64];
    if (o->rate > 0) snprintf(arrivals, sizeof arrivals, "arriving at %.1f Hz", o->rate);
    else snprintf(arrivals, sizeof arrivals, "%d submitted ahead", o->inflight ? o->inflight : (int)end->frames_in_flight);
    printf("frames   %d timed after %d warm-up, %d failed; %.3f frames/s (%s, %u in flight, %s)\n", r->timed,
           o->warmup, r->failures, r->fps, r->mode, end->frames_in_flight, arrivals);
    if (end->n_stages > 1) {
        printf("split    %d LLM blocks on %s (zone %u..%u, %u changes); GPU stage memory %.1f MB\n", end->llm_split,
               end->stages[0].backend, end->split_min, end->split_max, end->split_changes, end->gpu_bytes / 1e6);
        for (uint32_t i = 0; i < end->n_stages && i < 4; i++)
            printf("stage %u  %-12s blocks %u..%u, busy %.2f ms a frame in %.2f passes; one LLM block: prefill "
                   "%.3f ms, decode step %.3f ms\n", i, end->stages[i].backend, end->stages[i].first_block,
                   end->stages[i].first_block + end->stages[i].n_blocks - 1, r->stage_ms[i], r->stage_passes[i],
                   end->stages[i].prefill_block_ns / 1e6, end->stages[i].decode_block_ns / 1e6);
        printf("overlap  %.3f (frames/s x slowest stage's busy time); hand-off %.3f ms a frame\n", r->overlap,
               r->handoff_ms);
    }
    printf("%-14s %10s %10s %10s %10s\n", "ms", "mean", "p50", "p95", "max");
    const char *names[] = {"vision", "prefill", "decode", "decode step", "end-to-end"};
    const vh_bench_summary *all[] = {&r->vision, &r->prefill, &r->decode, &r->step, &r->e2e};
    for (int i = 0; i < 5; i++)
        printf("%-14s %10.2f %10.2f %10.2f %10.2f\n", names[i], all[i]->mean, all[i]->p50, all[i]->p95, all[i]->max);
}

static void print_csv_row(const run_result *r, int round)
{
    printf("%d,%s,%u,%d,%d,%d,%.4f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.4f,%.1f,%.1f\n", r->end.llm_split, r->mode,
           r->end.frames_in_flight, round, r->timed, r->failures, r->fps, r->e2e.p50, r->e2e.p95, r->stage_ms[0],
           r->end.n_stages > 1 ? r->stage_ms[1] : 0.0, r->end.n_stages > 1 ? r->stage_passes[1] : r->stage_passes[0],
           r->overlap, r->load_s, r->rss_bytes / 1e6, r->end.gpu_bytes / 1e6);
    fflush(stdout);
}

/* A run's figures as the sweep table keeps them. */
static vh_bench_sample sample_of(const run_result *r)
{
    return (vh_bench_sample){.fps = r->fps,
                             .e2e_p50_ms = r->e2e.p50,
                             .stage_ms = {r->stage_ms[0], r->stage_ms[1]},
                             .passes = r->end.n_stages > 1 ? r->stage_passes[1] : r->stage_passes[0],
                             .overlap = r->overlap,
                             .rss_mb = r->rss_bytes / 1e6,
                             .failures = r->failures,
                             .n_stages = (int)r->end.n_stages,
                             .llm_split = r->end.llm_split,
                             .frames_in_flight = r->end.frames_in_flight};
}

/* Whether the driving model's frames are cameras (in->cameras), from --frame-source and the
 * folder's front end; -1 (said) where the options do not fit the model. */
static int choose_frame_source(const options *o, bench_input *in)
{
    if (o->source != SOURCE_AUTO && !in->orion) {
        fprintf(stderr, "vh-bench: --frame-source and --cameras are for driving models (Orion, MindDrive); %s is not "
                        "one\n", o->model);
        return -1;
    }
    if (o->source == SOURCE_CAMERAS && !in->shape.front_end) {
        fprintf(stderr, "vh-bench: %s has no camera front end (config.json's front_end): camera frames need a "
                        "folder converted with it (convert_orion.py / convert_minddrive.py --front-end)\n", o->model);
        return -1;
    }
    in->cameras = in->orion && in->shape.front_end && o->source != SOURCE_TOKENS;
    if (o->camera_size_given && !in->cameras) {
        fprintf(stderr, "vh-bench: --camera-size is for camera frames; %s runs on %s\n", o->model,
                !in->orion ? "images" : in->shape.front_end ? "vision tokens here (--frame-source tokens)"
                                                            : "vision tokens (it has no camera front end)");
        return -1;
    }
    return 0;
}

/* The synthetic driving frames, made before the session (and the clock) starts: vision tokens, or
 * the camera rig's images. */
static int make_driving_frames(const options *o, bench_input *in)
{
    if (in->cameras) {
        if (vh_camera_rig_init(&in->rig, o->camera_w, o->camera_h, CAMERA_IMAGE_SETS, o->seed) == 0) return 0;
        fprintf(stderr, "vh-bench: out of memory for %d camera images of %u x %u\n",
                CAMERA_IMAGE_SETS * VH_RIG_CAMERAS, o->camera_w, o->camera_h);
        return -1;
    }
    const size_t n_token_floats = (size_t)in->shape.n_tokens * in->shape.width;
    for (int k = 0; k < ORION_TOKEN_SETS; k++) {
        if (!(in->tokens[k] = malloc(n_token_floats * sizeof(float)))) {
            fprintf(stderr, "vh-bench: out of memory for the vision tokens\n");
            return -1;
        }
        vh_seeded_normals(o->seed, (uint64_t)k, in->tokens[k], n_token_floats);
    }
    return 0;
}

static int load_input(options *o, bench_input *in)
{
    char why[1024];
    memset(in, 0, sizeof *in);
    const int orion = vh_orion_model_shape(o->model, &in->shape, why, sizeof why);
    if (orion < 0) {
        fprintf(stderr, "vh-bench: %s\n", why);
        return -1;
    }
    in->orion = orion;
    if (choose_frame_source(o, in)) return -1;
    if (orion && o->image) {
        fprintf(stderr, "vh-bench: %s is a%s %s model: it runs on synthetic %s, not --image\n", o->model,
                in->shape.label[0] == 'O' ? "n" : "", in->shape.label, in->cameras ? "camera frames" : "vision tokens");
        return -1;
    }
    if (orion) return make_driving_frames(o, in);
    static char default_image[4096];
    if (!o->image) {
        snprintf(default_image, sizeof default_image, "%s/frame_0.png", VH_BUNDLED_FRAMES_DIR);
        o->image = default_image;
    }
    if (vh_image_load(o->image, &in->rgb, &in->width, &in->height, why, sizeof why) != VH_OK) {
        fprintf(stderr, "vh-bench: %s\n", why);
        return -1;
    }
    return 0;
}

static void free_input(bench_input *in)
{
    free(in->rgb);
    for (int k = 0; k < ORION_TOKEN_SETS; k++) free(in->tokens[k]);
    vh_camera_rig_free(&in->rig);
}

int main(int argc, char **argv)
{
    options o;
    const int parsed = parse_args(argc, argv, &o);
    if (parsed) {
        fprintf(parsed > 0 ? stdout : stderr,
                "usage: vh-bench [options]   (every option is optional)\n"
                "  --model DIR           model folder (default: the bundled tiny OpenVLA)\n"
                "  --image FILE          PNG/JPEG frame submitted again and again (default: the first bundled frame)\n"
                "  --instruction TEXT    (default \"pick up the red block\")\n"
                "  --unnorm-key KEY      norm_stats dataset (default: the model's only one)\n"
                "  --backend NAMES       \"cpu_generic\", \"cuda,cpu_amx\", ... (default: the best available)\n"
                "  --plugin-path P       plugin file or folder searched first\n"
                "  --threads N           CPU threads a CPU backend (default 0: the library's choice)\n"
                "  --frames N            timed frames a run (default 10)\n"
                "  --warmup N            frames a run before the clock starts (default 2)\n"
                "  --session-warmup N    frames the session runs inside create (-1: its default)\n"
                "  --inflight K          closed loop: frames kept submitted and not polled (default: the\n"
                "                        session's frames in flight)\n"
                "  --rate HZ             open loop: a frame every 1/HZ s instead\n"
                "  --seed S              Orion, MindDrive: synthetic tokens, camera images and noise (default 0)\n"
                "  --frame-source tokens|cameras  Orion, MindDrive: what a frame carries (default: cameras where\n"
                "                        the folder has a camera front end, else tokens); --cameras is\n"
                "                        --frame-source cameras\n"
                "  --camera-size WxH     camera frames: each of the six images' size (default 1600x900)\n"
                "  --split N[,N...]      with two backends: LLM blocks on the first (default: chosen at start)\n"
                "  --mode M[,M...]       serial | pipeline (default with two backends) | packed\n"
                "  --frames-in-flight K[,K...]  pipeline, packed: frames in flight (1..32; default: the mode's)\n"
                "  --rounds R            run every combination of the lists R times, alternating their order\n"
                "                        (default 1); the table gives medians and paired ratios\n"
                "  --format F            text (default) | table | csv | json;  --json is --format json\n"
                "  --gpu-mem-budget B    bytes the GPU stage may hold (K, M, G suffixes)\n"
                "  --zone N              blocks each side of the split both stages hold (default 0 with --split, else 2)\n"
                "  --trace PATH          Chrome/Perfetto trace of the stages' work\n"
                "  --version, --help\n"
                "Orion and MindDrive models: synthetic frames (vision tokens normal from --seed, commands 0..5 in turn,\n"
                "noise drawn from --seed and the frame's sequence); --image does not apply. A folder of either with a\n"
                "camera front end: six synthetic camera images a frame instead (a fixed rig, a moving ego,\n"
                "0.5 s apart).\n");
        return parsed > 0 ? 0 : 2;
    }
    if (!o.model) o.model = VH_BUNDLED_MODEL_DIR;
    bench_input in;
    if (load_input(&o, &in)) {
        free_input(&in);
        return 2;
    }

    vh_bench_config configs[VH_BENCH_MAX_CONFIGS];
    const int n_configs = vh_bench_sweep_configs(&o.sweep, configs);
    if (n_configs < 0) {
        free_input(&in);
        return 2;
    }
    const int sweep = n_configs > 1 || o.sweep.rounds > 1;
    vh_bench_table table;
    vh_bench_table_init(&table, configs, n_configs, o.sweep.rounds);
    if (o.format == FORMAT_CSV)
        printf("llm_split,mode,frames_in_flight,round,frames,failures,actions_per_s,end_to_end_p50_ms,"
               "end_to_end_p95_ms,stage0_busy_ms,stage1_busy_ms,last_stage_passes,overlap,load_s,rss_mb,gpu_mb\n");

    int failed = 0;
    /* Groups of configurations that share a split: with rounds, their sessions live together. */
    for (int g = 0; g < n_configs && !failed;) {
        int g_end = g + 1;
        while (g_end < n_configs && configs[g_end].llm_split == configs[g].llm_split) g_end++;
        const int keep = o.sweep.rounds > 1;
        vh_session *sessions[VH_BENCH_MAX_CONFIGS] = {NULL};
        double load_s[VH_BENCH_MAX_CONFIGS] = {0};
        for (int round = 1; round <= o.sweep.rounds && !failed; round++) {
            for (int k = 0; k < g_end - g && !failed; k++) {
                /* odd rounds in list order, even rounds backwards */
                const int i = round % 2 ? g + k : g_end - 1 - k;
                if (!sessions[i] && create_session(&o, &configs[i], &sessions[i], &load_s[i]) != VH_OK) {
                    failed = 1;
                    break;
                }
                run_result r;
                if (run_frames(&o, &in, sessions[i], &r)) {
                    failed = 1;
                    break;
                }
                r.load_s = load_s[i];
                vh_bench_table_add(&table, i, round, sample_of(&r));
                if (o.format == FORMAT_JSON) print_json(&o, &in, &r, round);
                else if (o.format == FORMAT_CSV) print_csv_row(&r, round);
                else if (o.format == FORMAT_TEXT && !sweep) print_text(&o, &in, &r);
                if (r.failures) failed = 2;
                if (sweep && o.format == FORMAT_TEXT)
                    fprintf(stderr, "vh-bench: split %d, %s, %u in flight, round %d: %.3f frames/s\n",
                            r.end.llm_split, r.mode, r.end.frames_in_flight, round, r.fps);
                if (!keep) {
                    vh_session_destroy(sessions[i]);
                    sessions[i] = NULL;
                }
            }
        }
        for (int i = g; i < g_end; i++) vh_session_destroy(sessions[i]);
        g = g_end;
    }
    if (failed != 1) {
        if (o.format == FORMAT_TABLE || (o.format == FORMAT_TEXT && sweep)) vh_bench_table_print(&table, stdout);
        else if (o.format == FORMAT_JSON && sweep) vh_bench_table_print_json(&table, stdout);
    }
    vh_bench_table_free(&table);
    free_input(&in);
    return failed ? 1 : 0;
}
