/* The execution modes through the public API: two-stage plans, the cross-frame pipeline and
 * packed passes. For a stream of the
 * fixtures' frames with varying instructions, at every split, the pipelined session must give
 * exactly the serial session's actions, and both must match the float64 reference
 * (tests/fixtures/make_openvla_fixtures.py) wherever its margins allow; on CPU-only stages
 * (cpu_generic twice, the default build, run in CI) every split must moreover equal the one-stage
 * session exactly, and so must a chosen split that moves inside its zone. Also: the Chrome trace
 * shows the two stages working on different frames at the same time, and a session destroyed
 * with frames in flight answers or cancels every one.
 *
 * Built again for the GPU machine (tests/cuda/meson.build) with cuda + cpu_amx stages. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image_file.h"
#include "test_support.h"

#ifndef PIPELINE_STAGES
#define PIPELINE_STAGES "cpu_generic,cpu_generic"
#define PIPELINE_FIRST "cpu_generic"
#define PIPELINE_SECOND "cpu_generic"
#define ONE_STAGE "cpu_generic"
#define EXACT_ACROSS_SPLITS 1 /* the same fp32 kernels on both stages: the cut changes no bit */
#define MIN_MARGIN 2e-3       /* fp32 against float64 (as openvla_fixtures) */
#endif
#define MAX_FRAMES 64
#define THREADS 2      /* every session alike: results must not hang on thread counts */

typedef struct stream {
    const char *model;                 /* under the source root */
    const char *reference;             /* under tests/fixtures */
    uint32_t n_layers;
} stream;

static const stream streams[] = {
    {"models/openvla-tiny", "reference/openvla-tiny.json", 2},
    {"tests/fixtures/models/openvla-tiny-b", "reference/openvla-tiny-b.json", 3},
};

typedef struct frames {
    uint32_t n;
    uint8_t *rgb[MAX_FRAMES];
    uint32_t w[MAX_FRAMES], h[MAX_FRAMES];
    const char *instruction[MAX_FRAMES];
    const json_t *reference[MAX_FRAMES];
    json_t *root;
} frames;

typedef struct actions {
    int32_t ids[MAX_FRAMES][VH_MAX_ACTION_DIM];
    double values[MAX_FRAMES][VH_MAX_ACTION_DIM];
    vh_session_info info;
} actions;

/* The reference's bridge_orig cases in file order: four instructions, interleaved. */
static void load_frames(const stream *st, frames *f)
{
    memset(f, 0, sizeof *f);
    char *path = vh_test_fixture_path(st->reference);
    json_error_t jerr;
    f->root = json_load_file(path, 0, &jerr);
    ck_assert_msg(f->root, "%s: %s", path, jerr.text);
    free(path);
    const json_t *cases = json_object_get(f->root, "cases");
    /* VH_TEST_FRAMES=N (16 or more): the stream's first N frames (the sanitizer jobs: every split and
     * mode still runs, on half the frames) */
    const char *cap = getenv("VH_TEST_FRAMES");
    const uint32_t max_frames = cap && atoi(cap) >= 16 && atoi(cap) < MAX_FRAMES ? (uint32_t)atoi(cap) : MAX_FRAMES;
    for (size_t i = 0; i < json_array_size(cases) && f->n < max_frames; i++) {
        const json_t *c = json_array_get(cases, i);
        if (strcmp(json_string_value(json_object_get(c, "dataset")), "bridge_orig")) continue;
        char *image = vh_test_source_path(json_string_value(json_object_get(c, "image_path")));
        char why[512];
        ck_assert_msg(vh_image_load(image, &f->rgb[f->n], &f->w[f->n], &f->h[f->n], why, sizeof why) == VH_OK, "%s", why);
        free(image);
        f->instruction[f->n] = json_string_value(json_object_get(c, "instruction"));
        f->reference[f->n] = c;
        f->n++;
    }
    ck_assert_uint_ge(f->n, 16);
}

/* VH_TEST_THREADS_ONLY=1 (the ThreadSanitizer job): only the runs whose threads race in new ways,
 * the interior splits (both stages hold LLM blocks) and the packed runs with two stages or many
 * frames in flight; the rest repeat one thread's arithmetic, which the native and ASan runs check. */
static int threads_only(void)
{
    const char *v = getenv("VH_TEST_THREADS_ONLY");
    return v && atoi(v) > 0;
}

static void free_frames(frames *f)
{
    for (uint32_t i = 0; i < f->n; i++) free(f->rgb[i]);
    json_decref(f->root);
}

/* Parameters every session of these tests shares; *dir is the model folder (free it). */
static void stream_params(const stream *st, const char *backends, vh_session_params *p, char **dir)
{
    *dir = vh_test_source_path(st->model);
    vh_session_params_init(p);
    p->model_path = *dir;
    p->backends = backends;
    p->unnorm_key = "bridge_orig";
    p->n_threads = THREADS;
}

/* How the frames arrive. */
typedef enum arrival {
    BURST,                             /* all submitted at once (policy BLOCK paces the submitter) */
    ONE_AT_A_TIME,                     /* each polled before the next is submitted */
    GROUPS_WITH_GAPS                   /* groups of 3, 15 ms apart */
} arrival;

static void submit(vh_session *s, const frames *f, uint32_t i)
{
    vh_frame fr;
    vh_frame_init(&fr);
    fr.rgb = f->rgb[i];
    fr.width = f->w[i];
    fr.height = f->h[i];
    fr.instruction = f->instruction[i];
    fr.tag = i;
    ck_assert_int_eq(vh_submit_frame(s, &fr, NULL), VH_OK);
}

static void poll_into(vh_session *s, uint32_t i, actions *out)
{
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, 60000), VH_OK);
    ck_assert_msg(a.status == VH_OK, "frame %u: %s", i, vh_status_string(a.status));
    ck_assert_uint_eq(a.tag, i); /* in submission order */
    ck_assert_uint_eq(a.action_dim, 7);
    memcpy(out->ids[i], a.token_ids, sizeof out->ids[i]);
    memcpy(out->values[i], a.values, sizeof out->values[i]);
}

/* Run the stream through one session. */
static void run_stream(const stream *st, const frames *f, const char *backends, int32_t split, int32_t zone,
                       vh_execution_mode mode, uint32_t in_flight, arrival how, const char *trace, actions *out)
{
    char *dir;
    vh_session_params p;
    stream_params(st, backends, &p, &dir);
    p.llm_split = split;
    p.split_zone = zone;
    p.execution_mode = mode;
    p.trace_path = trace;
    p.frames_in_flight = in_flight;
    p.queue_policy = VH_QUEUE_BLOCK;
    p.queue_capacity = 4;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s (%s split %d)", vh_last_error(), backends, split);
    uint32_t polled = 0;
    for (uint32_t i = 0; i < f->n; i++) {
        submit(s, f, i);
        if (how == ONE_AT_A_TIME) poll_into(s, polled++, out);
        if (how == GROUPS_WITH_GAPS && i % 3 == 2) usleep(15000);
    }
    while (polled < f->n) poll_into(s, polled++, out);
    vh_session_info_init(&out->info);
    ck_assert_int_eq(vh_session_get_info(s, &out->info), VH_OK);
    vh_session_destroy(s);
    free(dir);
}

static int ids_equal(const json_t *list, const int32_t *ids)
{
    for (size_t k = 0; k < 7; k++)
        if (json_integer_value(json_array_get(list, k)) != ids[k]) return 0;
    return 1;
}

static void assert_same_actions(const frames *f, const actions *want, const actions *got, const char *what)
{
    for (uint32_t i = 0; i < f->n; i++)
        for (uint32_t k = 0; k < 7; k++) {
            ck_assert_msg(got->ids[i][k] == want->ids[i][k], "%s: frame %u token %u: %d, one stage %d", what, i, k,
                          got->ids[i][k], want->ids[i][k]);
            ck_assert_msg(got->values[i][k] == want->values[i][k], "%s: frame %u value %u differs", what, i, k);
        }
}

static char *cache_dir;

/* Where the reference's margin is wide enough for the backends' precision, the tokens must be
 * the reference's. bf16 backends are only held to bf16 checkpoints (see openvla_fixtures). */
static void assert_reference_tokens(const frames *f, const actions *got, const char *what)
{
#ifdef BF16_ONLY
    const char *dtype = json_string_value(json_object_get(f->root, "weights_dtype"));
    if (!dtype || strcmp(dtype, "bfloat16")) return;
#endif
    uint32_t compared = 0;
    for (uint32_t i = 0; i < f->n; i++) {
        const json_t *c = f->reference[i];
        if (json_real_value(json_object_get(c, "min_margin")) < MIN_MARGIN) continue;
        ck_assert_msg(ids_equal(json_object_get(c, "action_ids"), got->ids[i]), "%s: frame %u: action ids differ "
                      "from the reference", what, i);
        compared++;
    }
    ck_assert_uint_gt(compared, 0);
}

START_TEST(test_every_split_and_mode)
{
    const stream *st = &streams[_i];
    frames f;
    load_frames(st, &f);

    actions one, serial, got;
    run_stream(st, &f, ONE_STAGE, -1, -1, VH_EXECUTION_SERIAL, 0, BURST, NULL, &one);
    assert_reference_tokens(&f, &one, "one stage");

    char what[96];
    for (int32_t split = 0; split <= (int32_t)st->n_layers; split++) {
        if (threads_only() && (split == 0 || split == (int32_t)st->n_layers)) continue;
        run_stream(st, &f, PIPELINE_STAGES, split, -1, VH_EXECUTION_SERIAL, 0, BURST, NULL, &serial);
        snprintf(what, sizeof what, "serial split %d", split);
        if (EXACT_ACROSS_SPLITS) assert_same_actions(&f, &one, &serial, what);
        else assert_reference_tokens(&f, &serial, what);
        run_stream(st, &f, PIPELINE_STAGES, split, -1, VH_EXECUTION_PIPELINE, 0, BURST, NULL, &got);
        snprintf(what, sizeof what, "pipeline split %d", split);
        assert_same_actions(&f, &serial, &got, what);
        for (int m = 0; m < 2; m++) {
            const vh_session_info *info = m ? &got.info : &serial.info;
            ck_assert_uint_eq(info->n_stages, 2);
            ck_assert_int_eq(info->llm_split, split);
            ck_assert_uint_eq(info->split_min, (uint32_t)split); /* explicit: no zone */
            ck_assert_uint_eq(info->split_max, (uint32_t)split);
            ck_assert_int_eq(info->execution_mode, m ? VH_EXECUTION_PIPELINE : VH_EXECUTION_SERIAL);
            ck_assert_uint_eq(info->frames_in_flight, m ? 2 : 1);
            ck_assert_uint_eq(info->frames_completed, f.n);
            ck_assert_uint_eq(info->stages[1].first_block + info->stages[1].n_blocks,
                              info->stages[0].n_blocks + (st->n_layers - (uint32_t)split) + 1);
            ck_assert_uint_gt(info->stages[0].busy_ns, 0);
            ck_assert_uint_gt(info->stages[1].busy_ns, 0);
            /* every pass visits both stages: the prefill and a pass per further token */
            ck_assert_uint_eq(info->stages[0].passes, info->stages[1].passes);
            ck_assert_uint_ge(info->stages[0].passes, 2 * f.n);
        }
    }
    /* chosen split, zone of 1 each side: the cut may move from frame to frame; three frames in
     * flight (more than stages) */
    run_stream(st, &f, PIPELINE_STAGES, -1, 1, VH_EXECUTION_PIPELINE, 3, BURST, NULL, &got);
    ck_assert_uint_eq(got.info.frames_in_flight, 3);
    if (EXACT_ACROSS_SPLITS) assert_same_actions(&f, &one, &got, "pipeline, chosen split");
    else assert_reference_tokens(&f, &got, "pipeline, chosen split");
    ck_assert(got.info.llm_split >= 0 && (uint32_t)got.info.llm_split <= st->n_layers);
    ck_assert(got.info.split_min <= (uint32_t)got.info.llm_split && (uint32_t)got.info.llm_split <= got.info.split_max);
    ck_assert_uint_ge(got.info.split_max - got.info.split_min, 1);
    fprintf(stderr, "%s: chosen split %d (zone %u..%u, %u moves)\n", st->model, got.info.llm_split,
            got.info.split_min, got.info.split_max, got.info.split_changes);
    free_frames(&f);
}
END_TEST

/* Packed passes: for bursts, one frame at a time (passes of decode rows only, so actions finish
 * without new frames) and groups with gaps, frames of four instructions (prompt lengths) mixed,
 * fewer frames in flight than tokens, one and two stages: the tokens equal the serial one-stage
 * session's (and the reference's) wherever the reference margin is clear of the backends'
 * precision: the rows of other frames in a pass change a row's arithmetic path at most. */
START_TEST(test_packed_equals_serial)
{
    const stream *st = &streams[_i];
    frames f;
    load_frames(st, &f);
    actions one, got;
    run_stream(st, &f, ONE_STAGE, -1, -1, VH_EXECUTION_SERIAL, 0, BURST, NULL, &one);
    static const struct {
        const char *backends;
        int32_t split;
        uint32_t in_flight;
        arrival how;
        const char *what;
    } runs[] = {
        {ONE_STAGE, -1, 0, BURST, "burst"},
        {ONE_STAGE, -1, 0, ONE_AT_A_TIME, "one at a time"},
        {ONE_STAGE, -1, 0, GROUPS_WITH_GAPS, "groups with gaps"},
        {ONE_STAGE, -1, 2, BURST, "burst, 2 in flight"},
        {ONE_STAGE, -1, 14, BURST, "burst, 14 in flight (2 new frames a pass)"},
        {ONE_STAGE, -1, 20, GROUPS_WITH_GAPS, "groups with gaps, 20 in flight (3 new frames a pass)"},
        {PIPELINE_STAGES, 1, 0, BURST, "two stages, burst"},
        {PIPELINE_STAGES, 1, 1, BURST, "two stages, 1 in flight (nothing staged beside a pass)"},
        {PIPELINE_STAGES, 1, 3, GROUPS_WITH_GAPS, "two stages, 3 in flight (one staged beside a pass of 2)"},
        {PIPELINE_STAGES, 1, 24, GROUPS_WITH_GAPS, "two stages, 24 in flight (3 new frames a pass)"},
    };
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        if (threads_only() && !strchr(runs[r].backends, ',') && runs[r].in_flight < 14) continue;
        run_stream(st, &f, runs[r].backends, runs[r].split, -1, VH_EXECUTION_PACKED, runs[r].in_flight, runs[r].how,
                   NULL, &got);
        uint32_t compared = 0, equal = 0;
        for (uint32_t i = 0; i < f.n; i++) {
            int same = !memcmp(got.ids[i], one.ids[i], sizeof got.ids[i]);
            equal += same;
            if (json_real_value(json_object_get(f.reference[i], "min_margin")) < MIN_MARGIN) continue;
            ck_assert_msg(same, "packed, %s: frame %u: tokens differ from serial", runs[r].what, i);
            compared++;
        }
        ck_assert_uint_gt(compared, 0);
        ck_assert_int_eq(got.info.execution_mode, VH_EXECUTION_PACKED);
        const uint32_t default_in_flight = strchr(runs[r].backends, ',') ? 16 : 7; /* two stages: 2 x (7 + 1) */
        ck_assert_uint_eq(got.info.frames_in_flight, runs[r].in_flight ? runs[r].in_flight : default_in_flight);
        ck_assert_uint_eq(got.info.frames_completed, f.n);
        /* How many frames share a pass depends on how fast the intake prepares frames against how
         * fast a pass runs, so only what holds at any speed is asserted (vh-bench reports the
         * passes a frame; test_packed_logits packs fixed compositions): every frame takes its 7
         * passes, a pass carries at most `in flight` frames and at least one, and each pass
         * visits every stage once. One frame at a time nothing can share: exactly 7 a frame. */
        const uint64_t passes = got.info.stages[0].passes;
        ck_assert_uint_le(passes, 7 * f.n);
        ck_assert_uint_ge(passes * got.info.frames_in_flight, 7 * f.n);
        if (got.info.n_stages == 2) ck_assert_uint_eq(got.info.stages[1].passes, passes);
        if (runs[r].how == ONE_AT_A_TIME) ck_assert_uint_eq(passes, 7 * f.n);
        fprintf(stderr, "%s packed, %s: %u passes for %u frames, %u/%u frames equal to serial\n", st->model,
                runs[r].what, (unsigned)got.info.stages[0].passes, f.n, equal, f.n);
    }
    free_frames(&f);
}
END_TEST

/* The trace: valid JSON, spans on both stage tracks, and a stage-0 span of one frame overlapping
 * in time a stage-1 span of another (the cross-frame overlap the pipeline exists for): pipelined
 * frames, and packed passes (the next pass's new frames staged on stage 0 while stage 1 runs). */
START_TEST(test_trace_shows_the_overlap)
{
    const int packed = _i == 1;
    const stream *st = &streams[0];
    frames f;
    load_frames(st, &f);
    char *dir = vh_test_make_temp_dir();
    char path[4096];
    snprintf(path, sizeof path, "%s/trace.json", dir);
    actions got;
    run_stream(st, &f, PIPELINE_STAGES, 1, -1, packed ? VH_EXECUTION_PACKED : VH_EXECUTION_PIPELINE, 0, BURST, path,
               &got);

    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    ck_assert_msg(root, "%s: %s", path, jerr.text);
    const json_t *events = json_object_get(root, "traceEvents");
    size_t n = json_array_size(events), spans[2] = {0, 0}, overlaps = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_array_get(events, i);
        if (strcmp(json_string_value(json_object_get(a, "ph")), "X")) continue;
        int tid = (int)json_integer_value(json_object_get(a, "tid"));
        if (tid > 1) continue;
        spans[tid]++;
        if (tid != 0) continue;
        double a0 = json_number_value(json_object_get(a, "ts")), a1 = a0 + json_number_value(json_object_get(a, "dur"));
        json_int_t fa = json_integer_value(json_object_get(json_object_get(a, "args"), "frame"));
        for (size_t j = 0; j < n; j++) {
            const json_t *b = json_array_get(events, j);
            if (strcmp(json_string_value(json_object_get(b, "ph")), "X") ||
                json_integer_value(json_object_get(b, "tid")) != 1)
                continue;
            double b0 = json_number_value(json_object_get(b, "ts")), b1 = b0 + json_number_value(json_object_get(b, "dur"));
            json_int_t fb = json_integer_value(json_object_get(json_object_get(b, "args"), "frame"));
            if (fa != fb && a0 < b1 && b0 < a1) overlaps++;
        }
    }
    /* stage 0: vision + prefill + a step per token; stage 1: prefill + a step per token (packed:
     * a span per pass, a pass per new frame or so) */
    ck_assert_uint_ge(spans[0], packed ? f.n : 3 * f.n);
    ck_assert_uint_ge(spans[1], packed ? f.n / 2 : 2 * f.n);
    ck_assert_msg(overlaps > 0, "no stage-0 span overlaps a stage-1 span of another frame");
    fprintf(stderr, "trace (%s): %zu events, %zu / %zu spans on the stages, %zu cross-frame overlaps\n",
            packed ? "packed" : "pipeline", n, spans[0], spans[1], overlaps);
    json_decref(root);
    unlink(path);
    rmdir(dir);
    free(dir);
    free_frames(&f);
}
END_TEST

/* Destroy with frames queued and in flight, pipelined and packed: every accepted frame is
 * answered (computed or cancelled), nothing hangs. */
START_TEST(test_destroy_with_frames_in_flight)
{
    const stream *st = &streams[0];
    frames f;
    load_frames(st, &f);
    char *dir;
    vh_session_params p;
    stream_params(st, PIPELINE_STAGES, &p, &dir);
    p.llm_split = 1;
    p.queue_policy = VH_QUEUE_REJECT;
    p.queue_capacity = 8;
    for (int round = 0; round < 6; round++) {
        vh_session *s = NULL;
        p.execution_mode = round % 2 ? VH_EXECUTION_PACKED : VH_EXECUTION_PIPELINE;
        ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
        for (uint32_t i = 0; i < 6; i++) {
            vh_frame fr;
            vh_frame_init(&fr);
            fr.rgb = f.rgb[i];
            fr.width = f.w[i];
            fr.height = f.h[i];
            fr.instruction = f.instruction[i];
            ck_assert_int_eq(vh_submit_frame(s, &fr, NULL), VH_OK);
        }
        if (round > 1) usleep(10000u * (unsigned)round); /* let some frames get going */
        vh_session_destroy(s);
    }
    free(dir);
    free_frames(&f);
}
END_TEST

#ifdef SKIP_WITHOUT_DEVICE
/* A GPU first stage under a memory budget: as many LLM blocks as fit, counted as the backend
 * counts them. The budget that exactly holds split s gets split s; one byte less gets s - 1; too
 * small for the vision side alone is a clear VH_ERR_DEVICE_OUT_OF_MEMORY. */
START_TEST(test_gpu_budget_split)
{
    const stream *st = &streams[1]; /* 3 layers */
    char *dir;
    vh_session_params p;
    stream_params(st, PIPELINE_STAGES, &p, &dir);
    p.execution_mode = VH_EXECUTION_SERIAL;
    p.split_zone = 0;
    uint64_t held[4];
    for (int32_t split = 0; split <= 3; split++) {
        vh_session *s = NULL;
        p.llm_split = split;
        p.gpu_memory_budget = 0;
        ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
        vh_session_info info;
        vh_session_info_init(&info);
        ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
        held[split] = info.gpu_bytes;
        vh_session_destroy(s);
        if (split) ck_assert_uint_gt(held[split], held[split - 1]);
    }
    p.llm_split = -1;
    for (int32_t split = 0; split <= 3; split++) {
        for (int less = 0; less < 2 && !(split == 0 && less); less++) {
            vh_session *s = NULL;
            p.gpu_memory_budget = held[split] - (uint64_t)less;
            ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
            vh_session_info info;
            vh_session_info_init(&info);
            ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
            ck_assert_int_eq(info.llm_split, split - less);
            ck_assert_uint_le(info.gpu_bytes, p.gpu_memory_budget);
            vh_session_destroy(s);
        }
    }
    vh_session *s = NULL;
    p.gpu_memory_budget = held[0] - 1;
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_DEVICE_OUT_OF_MEMORY);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(vh_last_error(), "budget") != NULL, "%s", vh_last_error());
    free(dir);
}
END_TEST
#endif

int main(void)
{
#ifdef SKIP_WITHOUT_DEVICE
    if (!vh_test_backend_usable(PIPELINE_FIRST) || !vh_test_backend_usable(PIPELINE_SECOND)) return 77;
#else
    if (!vh_test_backend_usable(PIPELINE_FIRST) || !vh_test_backend_usable(PIPELINE_SECOND)) return 1;
#endif
    /* the chosen split's cost measurements are cached: keep them out of the user's cache */
    cache_dir = vh_test_make_temp_dir();
    setenv("VH_CACHE_DIR", cache_dir, 1);
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("pipeline");
    tcase_set_timeout(tc, 900);
    /* VH_TEST_STREAMS=1: the first fixture stream only (the ThreadSanitizer job, scripts/check-sanitizers.sh,
     * where one stream already drives every thread and every mode, at 10-20x the cost) */
    int n_streams = (int)(sizeof streams / sizeof streams[0]);
    const char *limit = getenv("VH_TEST_STREAMS");
    if (limit && atoi(limit) > 0 && atoi(limit) < n_streams) n_streams = atoi(limit);
    tcase_add_loop_test(tc, test_every_split_and_mode, 0, n_streams);
    tcase_add_loop_test(tc, test_packed_equals_serial, 0, n_streams);
    tcase_add_loop_test(tc, test_trace_shows_the_overlap, 0, 2);
    tcase_add_test(tc, test_destroy_with_frames_in_flight);
#ifdef SKIP_WITHOUT_DEVICE
    tcase_add_test(tc, test_gpu_budget_split);
#endif
    suite_add_tcase(s, tc);
    int rc = vh_test_run_suite(s);
    char cache_file[4096];
    snprintf(cache_file, sizeof cache_file, "%s/split-costs-v1.tsv", cache_dir);
    unlink(cache_file);
    rmdir(cache_dir);
    free(cache_dir);
    return rc;
}
