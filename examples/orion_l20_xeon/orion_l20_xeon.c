/*
 * Orion or MindDrive from six cameras on a GPU + a server CPU (an NVIDIA L20 beside a Xeon), on
 * vlahybrid's public API: the program a driving-stack engineer starts from. README.md beside this
 * file says how to build, convert and run it, and what the split buys on an L20.
 *
 * What it does:
 *  - reads driving frames, one JSON line each (frame_reader.h: six images with their calibration,
 *    ego pose, can_bus, command, timestamp, noise, stream), from a file, a folder's frames.jsonl or
 *    standard input, and submits each as it is read;
 *  - keeps up to --in-flight frames in the session at once, so the GPU stage works on frame t+1
 *    while the CPU stage finishes frame t (VH_QUEUE_BLOCK: no frame is ever dropped);
 *  - several streams (vehicles) may be interleaved: each stream's frames go in in file order, and
 *    the front end keeps each stream's memory apart (vh_frame.stream);
 *  - a bad line (not JSON, a missing image) or a frame the library refuses is reported and skipped;
 *    every accepted frame is answered, and printed: the trajectory's first points and its latency;
 *  - at the end: the session's per-stage latencies and the memory it holds.
 *
 *   orion_l20_xeon [--model DIR] --frames FILE|DIR|- [--backend LIST] [--gpu-budget-gb GB] [--split N]
 *                  [--mode pipeline|serial|packed] [--in-flight K] [--threads N] [--command C]
 *                  [--seed S] [--points N] [--trace FILE] [--quiet] [--verbose]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vlahybrid/vlahybrid.h>

#include "frame_reader.h"

#define MAX_IN_FLIGHT 32
#define MAX_STREAMS 64

typedef struct options {
    const char *model, *frames, *backend, *trace;
    double gpu_budget_gb;
    int split, in_flight, threads, command, points, quiet, verbose;
    vh_execution_mode mode;
    unsigned long long seed;
} options;

/* What the program remembers of a frame until its answer comes (answers come in submission order). */
typedef struct submitted {
    uint64_t id, stream;
    long line;
} submitted;

typedef struct run {
    vh_session *session;
    const options *opt;
    submitted fifo[MAX_IN_FLIGHT];
    unsigned head, count;
    uint64_t answered, ok, failed;
} run;

/* Per stream: frames seen (a frame's default sequence, from which a sampling model draws its noise)
 * and the last timestamp (a stream's frames must not go back in time: the front end's memory ages by it). */
typedef struct stream_state {
    uint64_t stream, frames;
    int64_t last_timestamp_ns;
} stream_state;

/* Warnings and notes of the library (a budget too small for a split, a slow path). Its errors are not
 * repeated here: they come back as statuses and messages, printed where the frame is named. */
static void log_to_stderr(void *user, vh_log_level level, const char *message)
{
    (void)user;
    if (level == VH_LOG_ERROR) return;
    static const char *const names[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "vlahybrid [%s] %s\n", names[level <= VH_LOG_DEBUG ? level : VH_LOG_DEBUG], message);
}

static void print_answer(run *r, const vh_action *a)
{
    const submitted s = r->fifo[r->head];
    r->head = (r->head + 1) % MAX_IN_FLIGHT;
    r->count--;
    r->answered++;
    if (a->frame_id != s.id) fprintf(stderr, "orion_l20_xeon: answer for frame %llu, expected %llu\n",
                                     (unsigned long long)a->frame_id, (unsigned long long)s.id);
    if (a->status != VH_OK) {
        r->failed++;
        fprintf(stderr, "orion_l20_xeon: frame %llu (line %ld, stream %llu): %s: %s\n", (unsigned long long)a->frame_id,
                s.line, (unsigned long long)s.stream, vh_status_string(a->status), a->message);
        printf("frame %llu line %ld stream %llu: status %d (%s)\n", (unsigned long long)a->frame_id, s.line,
               (unsigned long long)s.stream, (int)a->status, vh_status_string(a->status));
        return;
    }
    r->ok++;
    if (r->opt->quiet) return;
    printf("frame %llu line %ld stream %llu seq %llu: status 0, %u points", (unsigned long long)a->frame_id, s.line,
           (unsigned long long)s.stream, (unsigned long long)a->sequence, a->n_points);
    const uint32_t shown = a->n_points < (uint32_t)r->opt->points ? a->n_points : (uint32_t)r->opt->points;
    for (uint32_t p = 0; p < shown; p++) printf(" (%+.3f, %+.3f)", a->trajectory[2 * p], a->trajectory[2 * p + 1]);
    if (a->n_points > shown) printf(" ...");
    if (a->action_dim == 1) printf(", speed decision %.0f", a->values[0]); /* MindDrive's meta-action */
    printf("; %.1f ms (queue %.1f, vision %.1f, prefill %.1f)\n", (a->finished_ns - a->submitted_ns) / 1e6,
           (a->started_ns - a->submitted_ns) / 1e6, a->vision_ns / 1e6, a->prefill_ns / 1e6);
    fflush(stdout);
}

/* Take answers: one at least when `wait`, then whatever is ready. */
static int take_answers(run *r, int wait)
{
    for (int first = 1; r->count; first = 0) {
        vh_action a;
        vh_action_init(&a);
        const vh_status s = vh_poll_action(r->session, &a, wait && first ? -1 : 0);
        if (s == VH_ERR_TIMEOUT) return 0;
        if (s != VH_OK) return fprintf(stderr, "orion_l20_xeon: poll: %s\n", vh_last_error()), -1;
        print_answer(r, &a);
    }
    return 0;
}

static stream_state *stream_of(stream_state *streams, unsigned *n, uint64_t id)
{
    for (unsigned i = 0; i < *n; i++)
        if (streams[i].stream == id) return &streams[i];
    if (*n == MAX_STREAMS) return NULL;
    streams[*n] = (stream_state){.stream = id, .last_timestamp_ns = INT64_MIN};
    return &streams[(*n)++];
}

/* Submit one read frame; 0 accepted, -1 refused (reported, the run goes on). */
static int submit(run *r, driving_frame *df, stream_state *st)
{
    vh_frame f;
    vh_frame_init(&f);
    f.n_cameras = df->n_cameras;
    f.cameras = df->cameras;
    f.lidar2img = df->has_lidar2img ? df->lidar2img : NULL;
    f.intrinsics = df->has_intrinsics ? df->intrinsics : NULL;
    f.extrinsics = df->has_extrinsics ? df->extrinsics : NULL;
    f.ego_pose = df->has_ego_pose ? df->ego_pose : NULL;
    f.can_bus = df->has_can_bus ? df->can_bus : NULL;
    f.command = df->command >= 0 ? df->command : r->opt->command;
    f.noise = df->noise;
    f.n_noise = df->n_noise;
    f.timestamp_ns = df->timestamp_ns;
    f.sequence = df->has_sequence ? df->sequence : st->frames;
    f.tag = df->has_tag ? df->tag : (uint64_t)df->line;
    f.stream = df->stream;
    uint64_t id;
    if (vh_submit_frame(r->session, &f, &id) != VH_OK) {
        fprintf(stderr, "orion_l20_xeon: line %ld (stream %llu) refused: %s\n", df->line,
                (unsigned long long)df->stream, vh_last_error());
        return -1;
    }
    r->fifo[(r->head + r->count++) % MAX_IN_FLIGHT] = (submitted){.id = id, .stream = df->stream, .line = df->line};
    st->frames++;
    if (df->has_timestamp) st->last_timestamp_ns = df->timestamp_ns;
    return 0;
}

static void print_latency(const char *name, const vh_latency *l)
{
    if (!l->count || !l->max_ns) return; /* a part the model has not (the driving models' decode) */
    printf("  %-26s p50 %8.1f ms  p95 %8.1f ms  max %8.1f ms  mean %8.1f ms  (%llu)\n", name, l->p50_ns / 1e6,
           l->p95_ns / 1e6, l->max_ns / 1e6, l->mean_ns / 1e6, (unsigned long long)l->count);
}

static void print_summary(vh_session *session)
{
    vh_session_stats st;
    vh_session_stats_init(&st);
    vh_session_info info;
    vh_session_info_init(&info);
    if (vh_session_get_stats(session, &st) != VH_OK || vh_session_get_info(session, &info) != VH_OK) {
        fprintf(stderr, "orion_l20_xeon: statistics: %s\n", vh_session_last_error(session));
        return;
    }
    printf("statistics: %llu submitted, %llu completed, %llu failed, %llu cancelled\n",
           (unsigned long long)st.submitted, (unsigned long long)st.completed, (unsigned long long)st.failed,
           (unsigned long long)st.cancelled);
    print_latency("submit -> trajectory", &st.end_to_end);
    print_latency("queue wait", &st.queue_wait);
    print_latency("compute", &st.compute);
    print_latency("vision (front end)", &st.vision);
    print_latency("prefill + planner", &st.prefill);
    print_latency("decode", &st.decode);
    for (uint32_t i = 0; i < st.n_stages && i < info.n_stages && i < 4; i++) {
        const vh_stage_stats *s = &info.stages[i];
        char name[64];
        snprintf(name, sizeof name, "stage %u %s pass", i, s->backend);
        print_latency(name, &st.stage_pass[i]);
        printf("    executor blocks %u..%u, %llu passes, busy %.1f ms (hand-off %.1f)", s->first_block,
               s->first_block + s->n_blocks - 1, (unsigned long long)s->passes, s->busy_ns / 1e6, s->handoff_ns / 1e6);
        if (s->prefill_block_ns) printf(", an LLM block %.2f ms a prefill", s->prefill_block_ns / 1e6);
        printf("\n");
    }
    /* vh_session_info is what the API says of memory: gpu_bytes is the GPU stage's whole holding */
    printf("memory: GPU %.2f GB (weights, KV and work space of the GPU stages), backends' weights %.2f GB, "
           "work %.2f GB, checkpoint mapped %.2f GB\n", info.gpu_bytes / 1e9, info.backend_weight_bytes / 1e9,
           info.backend_work_bytes / 1e9, info.host_weight_bytes / 1e9);
    if (info.n_stages > 1)
        printf("split: %d of %u LLM blocks on the first stage (zone %u..%u, moved %u times)\n", info.llm_split,
               info.n_llm_layers, info.split_min, info.split_max, info.split_changes);
}

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.backend = "cuda,cpu_amx", .gpu_budget_gb = 12, .split = -1, .in_flight = 2, .command = 3,
                   .points = 3, .mode = VH_EXECUTION_PIPELINE};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--quiet")) { o->quiet = 1; continue; }
        if (!strcmp(a, "--verbose")) { o->verbose = 1; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        if (!v) return fprintf(stderr, "orion_l20_xeon: %s needs a value\n", a), -1;
        i++;
        if (!strcmp(a, "--model")) o->model = v;
        else if (!strcmp(a, "--frames")) o->frames = v;
        else if (!strcmp(a, "--backend")) o->backend = v;
        else if (!strcmp(a, "--trace")) o->trace = v;
        else if (!strcmp(a, "--gpu-budget-gb")) o->gpu_budget_gb = strtod(v, &end);
        else if (!strcmp(a, "--split")) o->split = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--in-flight")) o->in_flight = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--threads")) o->threads = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--command")) o->command = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--points")) o->points = (int)strtol(v, &end, 10);
        else if (!strcmp(a, "--seed")) o->seed = strtoull(v, &end, 10);
        else if (!strcmp(a, "--mode")) {
            if (!strcmp(v, "pipeline")) o->mode = VH_EXECUTION_PIPELINE;
            else if (!strcmp(v, "serial")) o->mode = VH_EXECUTION_SERIAL;
            else if (!strcmp(v, "packed")) o->mode = VH_EXECUTION_PACKED;
            else return fprintf(stderr, "orion_l20_xeon: --mode is pipeline, serial or packed, not '%s'\n", v), -1;
        } else return fprintf(stderr, "orion_l20_xeon: unknown option %s\n", a), -1;
        if (end && (*end || end == v)) return fprintf(stderr, "orion_l20_xeon: %s: not a number: '%s'\n", a, v), -1;
    }
    if (!o->frames) return fprintf(stderr, "orion_l20_xeon: give --frames FILE, DIR or -\n"), -1;
    if (o->in_flight < 1 || o->in_flight > MAX_IN_FLIGHT || o->gpu_budget_gb < 0 || o->split < -1 || o->points < 0 ||
        o->threads < 0)
        return fprintf(stderr, "orion_l20_xeon: --in-flight is 1..%d; --gpu-budget-gb, --points, --threads >= 0; "
                       "--split >= -1\n", MAX_IN_FLIGHT), -1;
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    const int parsed = parse(argc, argv, &o);
    if (parsed) {
        fprintf(parsed > 0 ? stdout : stderr,
                "usage: orion_l20_xeon [--model DIR] --frames FILE|DIR|- [--backend LIST (cuda,cpu_amx)]\n"
                "                      [--gpu-budget-gb GB (12; 0: the whole card)] [--split N (-1: from the budget)]\n"
                "                      [--mode pipeline|serial|packed] [--in-flight K (2)] [--threads N]\n"
                "                      [--command C (3, for lines without one)] [--seed S] [--points N (3)]\n"
                "                      [--trace FILE] [--quiet] [--verbose]\n");
        return parsed > 0 ? 0 : 2;
    }
    char err[1024];
    frame_reader *reader = frame_reader_open(o.frames, err, sizeof err);
    if (!reader) return fprintf(stderr, "orion_l20_xeon: %s\n", err), 1;

    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = o.model ? o.model : VH_EXAMPLE_MODEL_DIR; /* default: the tiny Orion with its front end */
    p.backends = o.backend;
    p.gpu_memory_budget = (uint64_t)(o.gpu_budget_gb * 1e9);
    p.llm_split = o.split;
    p.execution_mode = o.mode;
    p.n_threads = o.threads;
    p.seed = o.seed;
    p.trace_path = o.trace;
    p.queue_capacity = (uint32_t)o.in_flight;
    p.queue_policy = VH_QUEUE_BLOCK; /* a driving log is not a live camera: every frame is computed */
    p.log_fn = log_to_stderr;
    p.log_level = o.verbose ? VH_LOG_INFO : VH_LOG_WARN;
    run r = {.opt = &o};
    if (vh_session_create(&p, &r.session) != VH_OK) {
        fprintf(stderr, "orion_l20_xeon: %s\n", vh_last_error());
        frame_reader_close(reader);
        return 1;
    }
    vh_session_info info;
    vh_session_info_init(&info);
    if (vh_session_get_info(r.session, &info) == VH_OK)
        printf("orion_l20_xeon: vlahybrid %s, backends %s, %u stage(s), %d of %u LLM blocks on the first, GPU "
               "%.2f GB, %d frame(s) in flight\n", vh_version(), info.backends, info.n_stages,
               info.n_stages > 1 ? info.llm_split : (int)info.n_llm_layers, info.n_llm_layers, info.gpu_bytes / 1e9,
               o.in_flight);

    static stream_state streams[MAX_STREAMS];
    unsigned n_streams = 0;
    uint64_t lines = 0, skipped = 0;
    int rc = 0, got;
    driving_frame df;
    while ((got = frame_reader_next(reader, &df, err, sizeof err)) != 0) {
        if (got == -2) {
            fprintf(stderr, "orion_l20_xeon: %s\n", err);
            rc = 1;
            break;
        }
        lines++;
        if (got < 0) { /* a bad line: said and skipped, the run goes on */
            fprintf(stderr, "orion_l20_xeon: skipped: %s\n", err);
            skipped++;
            continue;
        }
        stream_state *st = stream_of(streams, &n_streams, df.stream);
        if (!st) {
            fprintf(stderr, "orion_l20_xeon: line %ld: more than %d streams; skipped\n", df.line, MAX_STREAMS);
            skipped++;
        } else if (df.has_timestamp && df.timestamp_ns < st->last_timestamp_ns) {
            fprintf(stderr, "orion_l20_xeon: line %ld: stream %llu goes back in time; skipped\n", df.line,
                    (unsigned long long)df.stream);
            skipped++;
        } else {
            /* room for one more: wait for the oldest answer while K are in the session */
            if (r.count >= (unsigned)o.in_flight && take_answers(&r, 1)) rc = 1;
            else if (submit(&r, &df, st)) skipped++;
        }
        driving_frame_clear(&df);
        if (rc || take_answers(&r, 0)) {
            rc = 1;
            break;
        }
    }
    while (!rc && r.count) /* every accepted frame answered */
        if (take_answers(&r, 1)) rc = 1;
    printf("frames: %llu lines, %llu skipped, %llu answered (%llu ok, %llu failed), %u stream(s)\n",
           (unsigned long long)lines, (unsigned long long)skipped, (unsigned long long)r.answered,
           (unsigned long long)r.ok, (unsigned long long)r.failed, n_streams);
    print_summary(r.session);
    vh_session_destroy(r.session);
    frame_reader_close(reader);
    return rc || r.failed || !r.ok ? 1 : 0;
}
