/*
 * Orion from six cameras through a session (tests/fixtures/orion/model-front: the tiny Orion LLM and
 * planner with a tiny camera front end, tiny_weights.EVA_TINY and HEADS_FRONT). The front end's parts
 * are checked against the released code elsewhere (test_eva_fixtures, test_camera_preprocess,
 * test_petr_position, test_petr_heads); here the family's wiring of them:
 *   - camera frames of a moving ego are answered with a trajectory, in every execution mode the
 *     same one (the heads' banks carried frame to frame in submission order);
 *   - the memory matters: the third frame's answer differs from the same frame's in a fresh session,
 *     and after vh_session_reset (a new episode) it equals the fresh session's;
 *   - several streams (vh_frame.stream) interleaved in one session each answer as alone; past the
 *     session's 16 streams the least recent one's memory is dropped (its next frame as a first);
 *   - a frame of vision tokens on this checkpoint gives the tokens-only checkpoint's answer (the same
 *     decision half), and leaves the banks alone;
 *   - bad camera frames are refused at submit, naming what is missing;
 *   - end to end, the front end's tokens of the rig's first two frames (vision_tokens_fn) are the
 *     released code's: tests/fixtures/orion/make_front_fixtures.py ran the agent's pipeline, EVAViT,
 *     Orion.position_embeding and both heads, composed as Orion.simple_test does, on the same images.
 * The same checks run on MindDrive (CAMERAS_MODEL minddrive/model-front, the released MindDrive
 * code's tokens from tests/fixtures/minddrive/make_front_fixtures.py: its map head first).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#ifndef CAMERAS_BACKEND
#define CAMERAS_BACKEND "cpu_generic"
#endif
/* Frames of the released run checked: both in fp32; on bf16 backends the first (frame 1 reads
 * the banks frame 0's top-k filled, which rounding may reorder: a bad test, as test_petr_heads.c's) */
#ifndef CAMERAS_FRAMES_CHECKED
#define CAMERAS_FRAMES_CHECKED 2
#endif
#ifndef CAMERAS_TOL
#define CAMERAS_TOL 1e-4 /* fp32 against the released code in float32: the bound */
#endif
/* The model (the family's tiny one with the front end), the same decision half without it, the
 * released code's tokens, the planners' noise floats and the trajectory's points: Orion's unless
 * meson says MindDrive's (test_minddrive_cameras: the same front end, out_dims the LLM's 64). */
#ifndef CAMERAS_MODEL
#define CAMERAS_MODEL "orion/model-front"
#define CAMERAS_TOKENS_MODEL "orion/model"
#define CAMERAS_REFERENCE "orion/front_tokens.f32"
#define CAMERAS_LATENT 32
#define CAMERAS_POINTS 6
#endif
enum { CAMS = 6, W = 400, H = 225, FRAMES = 3, LATENT = CAMERAS_LATENT, POINTS = CAMERAS_POINTS };

typedef struct rig {
    uint8_t *rgb[FRAMES][CAMS];
    vh_camera_image cams[FRAMES][CAMS];
    float lidar2img[CAMS * 16], ego_pose[FRAMES][16], can_bus[FRAMES][VH_CAN_BUS_FLOATS], noise[LATENT];
} rig;

static uint64_t next_u64(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Six cameras around the ego (yaw 60 degrees apart), 1600 x 900 intrinsics scaled to the images'
 * width as the agent's resize takes 1600 x 900; the ego drives forward and turns. */
static void make_rig(rig *r)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int t = 0; t < FRAMES; t++)
        for (int c = 0; c < CAMS; c++) {
            r->rgb[t][c] = malloc((size_t)W * H * 3);
            for (size_t i = 0; i < (size_t)W * H * 3; i++) r->rgb[t][c][i] = (uint8_t)(next_u64(&seed) >> 56);
            r->cams[t][c] = (vh_camera_image){.rgb = r->rgb[t][c], .width = W, .height = H};
        }
    for (int c = 0; c < CAMS; c++) {
        const double yaw = c * M_PI / 3, f = 1266.0, cx = 800, cy = 450;
        /* lidar (x forward, y left, z up) to camera (x right, y down, z forward), rotated by yaw */
        const double R[9] = {sin(yaw), -cos(yaw), 0, 0, 0, -1, cos(yaw), sin(yaw), 0};
        double l2c[16] = {R[0], R[1], R[2], 0, R[3], R[4], R[5], 1.5, R[6], R[7], R[8], 0.2, 0, 0, 0, 1};
        const double K[16] = {f, 0, cx, 0, 0, f, cy, 0, 0, 0, 1, 0, 0, 0, 0, 1};
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                double acc = 0;
                for (int k = 0; k < 4; k++) acc += K[i * 4 + k] * l2c[k * 4 + j];
                r->lidar2img[c * 16 + i * 4 + j] = (float)acc;
            }
    }
    for (int t = 0; t < FRAMES; t++) {
        const double yaw = 0.1 * t, x = 3.0 * t, y = 0.2 * t * t;
        const float pose[16] = {(float)cos(yaw), (float)-sin(yaw), 0, (float)x, (float)sin(yaw), (float)cos(yaw), 0,
                                (float)y, 0, 0, 1, 1.8f, 0, 0, 0, 1};
        memcpy(r->ego_pose[t], pose, sizeof pose);
        for (int k = 0; k < VH_CAN_BUS_FLOATS; k++) r->can_bus[t][k] = (float)(0.1 * k + 0.5 * t);
    }
    for (int k = 0; k < LATENT; k++) r->noise[k] = (float)(0.05 * k - 0.8);
}

static void free_rig(rig *r)
{
    for (int t = 0; t < FRAMES; t++)
        for (int c = 0; c < CAMS; c++) free(r->rgb[t][c]);
}

static void frame_of(rig *r, int t, vh_frame *f)
{
    vh_frame_init(f);
    f->n_cameras = CAMS;
    f->cameras = r->cams[t];
    f->lidar2img = r->lidar2img;
    f->ego_pose = r->ego_pose[t];
    f->can_bus = r->can_bus[t];
    f->command = 2;
    f->timestamp_ns = 1000000000ll + 500000000ll * t;
    f->noise = r->noise;
    f->n_noise = LATENT;
}

static vh_session *open_session(const char *model, vh_execution_mode mode)
{
    char *dir = vh_test_fixture_path(model);
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = CAMERAS_BACKEND;
    p.execution_mode = mode;
    p.queue_policy = VH_QUEUE_BLOCK;
    p.queue_capacity = 16;
    p.n_threads = 2;
    p.warmup_frames = 0;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    free(dir);
    return s;
}

/* Submit frame t and wait for its trajectory. */
static void answer(vh_session *s, rig *r, int t, float *trajectory)
{
    vh_frame f;
    frame_of(r, t, &f);
    ck_assert_msg(vh_submit_frame(s, &f, NULL) == VH_OK, "frame %d: %s", t, vh_last_error());
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, -1), VH_OK);
    ck_assert_msg(a.status == VH_OK, "frame %d: status %d (%s)", t, a.status, vh_session_last_error(s));
    ck_assert_uint_eq(a.n_points, POINTS);
    for (int i = 0; i < 2 * POINTS; i++) ck_assert_msg(isfinite(a.trajectory[i]), "frame %d: a waypoint not finite", t);
    memcpy(trajectory, a.trajectory, sizeof(float) * 2 * POINTS);
}

static int same(const float *a, const float *b) { return !memcmp(a, b, sizeof(float) * 2 * POINTS); }

/* VH_TEST_STREAMS=1 (the sanitizer job, scripts/check-sanitizers.sh): the modes compared with serial
 * are packed alone (the pipelined run repeats the same code; the native run has both). */
static int quick(void)
{
    const char *v = getenv("VH_TEST_STREAMS");
    return v && !strcmp(v, "1");
}

START_TEST(test_cameras_to_trajectory)
{
    rig r;
    make_rig(&r);
    float serial[FRAMES][2 * POINTS], got[2 * POINTS], fresh[2 * POINTS];
    vh_session *s = open_session(CAMERAS_MODEL, VH_EXECUTION_SERIAL);
    for (int t = 0; t < FRAMES; t++) answer(s, &r, t, serial[t]);
    /* a reset: the third frame as the first of a new episode */
    ck_assert_int_eq(vh_session_reset(s, 0), VH_OK);
    answer(s, &r, 2, got);
    vh_session_destroy(s);
    s = open_session(CAMERAS_MODEL, VH_EXECUTION_SERIAL);
    answer(s, &r, 2, fresh);
    vh_session_destroy(s);
    ck_assert_msg(!same(fresh, serial[2]), "the third frame's answer does not depend on the frames before it");
    ck_assert_msg(same(fresh, got), "after a reset the answer is not a fresh session's");
    /* the other modes: frame by frame the same answers */
    const vh_execution_mode modes[2] = {VH_EXECUTION_PACKED, VH_EXECUTION_PIPELINE};
    for (int m = 0; m < (quick() ? 1 : 2); m++) {
        s = open_session(CAMERAS_MODEL, modes[m]);
        for (int t = 0; t < FRAMES; t++) {
            answer(s, &r, t, got);
            ck_assert_msg(same(got, serial[t]), "mode %d frame %d differs from serial", m, t);
        }
        vh_session_destroy(s);
    }
    free_rig(&r);
}
END_TEST

#ifdef CAMERAS_GRAPHS
/* cuda: the heads' runs replayed as CUDA graphs (from a key's second run) give the bits of every
 * kernel launched one by one (VH_CUDA_GRAPHS=0); both sessions keep cuBLASLt's first heuristic
 * choice (VH_CUDA_GEMM_TUNE=0), which timing could otherwise change between sessions. Six frames:
 * each run's key eager, captured, then replayed four times. */
START_TEST(test_graphs_replay_eager_bits)
{
    rig r;
    make_rig(&r);
    float eager[2 * FRAMES][2 * POINTS], got[2 * POINTS];
    setenv("VH_CUDA_GEMM_TUNE", "0", 1);
    setenv("VH_CUDA_GRAPHS", "0", 1);
    vh_session *s = open_session(CAMERAS_MODEL, VH_EXECUTION_SERIAL);
    for (int t = 0; t < 2 * FRAMES; t++) answer(s, &r, t % FRAMES, eager[t]);
    vh_session_destroy(s);
    unsetenv("VH_CUDA_GRAPHS");
    s = open_session(CAMERAS_MODEL, VH_EXECUTION_SERIAL);
    for (int t = 0; t < 2 * FRAMES; t++) {
        answer(s, &r, t % FRAMES, got);
        ck_assert_msg(same(got, eager[t]), "frame %d: the graphs' answer differs from the launched kernels'", t);
    }
    vh_session_destroy(s);
    unsetenv("VH_CUDA_GEMM_TUNE");
    free_rig(&r);
}
END_TEST
#endif

/* vision_tokens_fn: the tokens of the session's frames 1 and 2 (frame ids), in order. */
typedef struct collected {
    float tokens[2][529 * 64];
    uint64_t ids[2];
    uint32_t n, rows, width;
} collected;

static void collect_tokens(void *user, uint64_t frame_id, const float *tokens, uint32_t rows, uint32_t width)
{
    collected *c = user;
    if (c->n < 2 && rows * width <= 529 * 64) memcpy(c->tokens[c->n], tokens, sizeof(float) * rows * width);
    if (c->n < 2) c->ids[c->n] = frame_id;
    c->n++, c->rows = rows, c->width = width;
}

/* The rig's frames 0 and 1 against the released code's tokens (fp32 within 1e-4 of the largest). */
START_TEST(test_tokens_match_released_front_end)
{
    rig r;
    make_rig(&r);
    static collected got;
    memset(&got, 0, sizeof got);
    char *dir = vh_test_fixture_path(CAMERAS_MODEL), *ref_path = vh_test_fixture_path(CAMERAS_REFERENCE);
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = CAMERAS_BACKEND;
    p.execution_mode = VH_EXECUTION_PIPELINE;
    p.n_threads = 2;
    p.warmup_frames = 1; /* warm-up frames are not reported */
    p.vision_tokens_fn = collect_tokens;
    p.vision_tokens_user = &got;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    float traj[2 * POINTS];
    answer(s, &r, 0, traj);
    answer(s, &r, 1, traj);
    vh_session_destroy(s);
    ck_assert_uint_eq(got.n, 2);
    ck_assert_uint_eq(got.ids[0], 1);
    ck_assert_uint_eq(got.ids[1], 2);
    ck_assert_uint_eq(got.rows, 529);
    ck_assert_uint_eq(got.width, 64);
    size_t size = 0;
    float *ref = (float *)vh_test_read_file(ref_path, &size);
    ck_assert_msg(ref && size == sizeof(float) * 2 * 529 * 64, "%s: %zu bytes", ref_path, size);
    for (int t = 0; t < CAMERAS_FRAMES_CHECKED; t++) {
        const float *want = ref + (size_t)t * 529 * 64;
        const double e = vh_test_rel_error_of_largest_f32(got.tokens[t], want, 529 * 64);
        const double det = vh_test_rel_error_of_largest_f32(got.tokens[t], want, 273 * 64);
        const double map = vh_test_rel_error_of_largest_f32(got.tokens[t] + 273 * 64, want + 273 * 64, 256 * 64);
        printf("%s: frame %d's 529 tokens against the released front end: error %.3g of the largest value "
               "(det's 273 %.3g, map's 256 %.3g of their own)\n", CAMERAS_BACKEND, t, e, det, map);
        fflush(stdout);
        ck_assert_msg(e <= CAMERAS_TOL, "frame %d: error %g", t, e);
    }
    free(ref);
    free(ref_path);
    free(dir);
    free_rig(&r);
}
END_TEST

/* Submit frame t of `stream` (tag = stream * 16 + t), no wait. */
static void submit_of(vh_session *s, rig *r, int t, uint64_t stream)
{
    vh_frame f;
    frame_of(r, t, &f);
    f.stream = stream;
    f.tag = stream * 16 + (uint64_t)t;
    ck_assert_msg(vh_submit_frame(s, &f, NULL) == VH_OK, "stream %llu frame %d: %s", (unsigned long long)stream, t,
                  vh_last_error());
}

/* Two vehicles in one session, their frames interleaved and in flight together (pipelined and
 * packed): each stream's answers are the serial single-stream ones, so no bank is shared. */
START_TEST(test_streams_keep_their_own_memory)
{
    rig r;
    make_rig(&r);
    float alone[FRAMES][2 * POINTS];
    vh_session *s = open_session(CAMERAS_MODEL, VH_EXECUTION_SERIAL);
    for (int t = 0; t < FRAMES; t++) answer(s, &r, t, alone[t]);
    vh_session_destroy(s);
    const uint64_t ids[2] = {7, 1ull << 40};
    /* stream 7 runs two frames ahead: 7:0 7:1 B:0 7:2 B:1 B:2 */
    const int order[6][2] = {{0, 0}, {0, 1}, {1, 0}, {0, 2}, {1, 1}, {1, 2}};
    const vh_execution_mode modes[3] = {VH_EXECUTION_PACKED, VH_EXECUTION_SERIAL, VH_EXECUTION_PIPELINE};
    for (int m = 0; m < (quick() ? 1 : 3); m++) {
        s = open_session(CAMERAS_MODEL, modes[m]);
        for (int i = 0; i < 6; i++) submit_of(s, &r, order[i][1], ids[order[i][0]]);
        for (int i = 0; i < 6; i++) {
            vh_action a;
            vh_action_init(&a);
            ck_assert_int_eq(vh_poll_action(s, &a, -1), VH_OK);
            ck_assert_msg(a.status == VH_OK, "mode %d: status %d (%s)", m, a.status, vh_session_last_error(s));
            const int t = (int)(a.tag % 16);
            ck_assert_msg(a.tag / 16 == ids[0] || a.tag / 16 == ids[1], "an unknown tag");
            ck_assert_msg(same(a.trajectory, alone[t]), "mode %d: stream %llu frame %d is not its answer alone", m,
                          (unsigned long long)(a.tag / 16), t);
        }
        vh_session_destroy(s);
    }
    free_rig(&r);
}
END_TEST

/* Seventeen streams, a frame each: the first one's memory gives way to the seventeenth, so its next
 * frame answers as a first frame; stream 2's (seen more recently) is kept. */
START_TEST(test_least_recent_stream_gives_way)
{
    rig r;
    make_rig(&r);
    float alone[2][2 * POINTS], first[2 * POINTS], got[2][2 * POINTS];
    vh_session *s = open_session(CAMERAS_MODEL, VH_EXECUTION_SERIAL);
    answer(s, &r, 0, alone[0]);
    answer(s, &r, 1, alone[1]);
    vh_session_destroy(s);
    s = open_session(CAMERAS_MODEL, VH_EXECUTION_SERIAL);
    answer(s, &r, 1, first); /* frame 1's inputs as a first frame */
    vh_session_destroy(s);
    ck_assert_msg(!same(first, alone[1]), "frame 1 does not depend on frame 0");

    s = open_session(CAMERAS_MODEL, VH_EXECUTION_SERIAL);
    vh_action a;
    const uint64_t then[2] = {0, 2}; /* after 17 first frames: stream 0 (dropped), stream 2 (kept) */
    for (uint64_t i = 0; i < 19; i++) {
        const uint64_t id = i < 17 ? i : then[i - 17];
        submit_of(s, &r, i < 17 ? 0 : 1, id);
        vh_action_init(&a);
        ck_assert_int_eq(vh_poll_action(s, &a, -1), VH_OK);
        ck_assert_msg(a.status == VH_OK, "stream %llu: %s", (unsigned long long)id, vh_session_last_error(s));
        if (i >= 17) memcpy(got[i - 17], a.trajectory, sizeof got[0]);
    }
    vh_session_destroy(s);
    ck_assert_msg(same(got[0], first), "stream 0, dropped for the seventeenth, did not start afresh");
    ck_assert_msg(same(got[1], alone[1]), "stream 2 lost its memory");
    free_rig(&r);
}
END_TEST

/* Vision tokens on the front-end checkpoint: the tokens-only checkpoint's answer (the same LLM and
 * planner), and the banks untouched (the camera frame after it answers as without it). */
START_TEST(test_tokens_on_the_front_end_checkpoint)
{
    rig r;
    make_rig(&r);
    const size_t n = (size_t)529 * 64;
    float *tokens = malloc(sizeof(float) * n), a_traj[2 * POINTS], b_traj[2 * POINTS], cams[2][2 * POINTS];
    uint64_t seed = 7;
    for (size_t i = 0; i < n; i++) tokens[i] = (float)((double)(next_u64(&seed) >> 11) / 9007199254740992.0 - 0.5);
    vh_frame f;
    vh_frame_init(&f);
    f.vision_tokens = tokens, f.n_vision_tokens = 529, f.vision_token_width = 64, f.command = 1;
    f.noise = r.noise, f.n_noise = LATENT;
    vh_session *only = open_session(CAMERAS_TOKENS_MODEL, VH_EXECUTION_SERIAL);
    vh_session *front = open_session(CAMERAS_MODEL, VH_EXECUTION_SERIAL);
    vh_action a;
    ck_assert_int_eq(vh_submit_frame(only, &f, NULL), VH_OK);
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(only, &a, -1), VH_OK);
    ck_assert_int_eq(a.status, VH_OK);
    memcpy(a_traj, a.trajectory, sizeof a_traj);
    answer(front, &r, 0, cams[0]);
    ck_assert_int_eq(vh_submit_frame(front, &f, NULL), VH_OK);
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(front, &a, -1), VH_OK);
    ck_assert_int_eq(a.status, VH_OK);
    memcpy(b_traj, a.trajectory, sizeof b_traj);
    ck_assert_msg(same(a_traj, b_traj), "the front-end checkpoint's decision half differs from the tokens-only one");
    answer(front, &r, 1, cams[1]);
    vh_session_destroy(front);
    /* frames 0, 1 without the token frame between them */
    front = open_session(CAMERAS_MODEL, VH_EXECUTION_SERIAL);
    float want[2 * POINTS];
    answer(front, &r, 0, want);
    answer(front, &r, 1, want);
    ck_assert_msg(same(want, cams[1]), "a token frame changed the front end's memory");
    vh_session_destroy(front);
    vh_session_destroy(only);
    free(tokens);
    free_rig(&r);
}
END_TEST

/* Two stages of the CPU backend with the split chosen by measurement (llm_split -1): the
 * calibration times the front end's ViT on one image batch and leaves the heads on query sets out
 * (it once ran them too, without frames, and the session was refused); the answer is one stage's. */
START_TEST(test_two_stages_with_a_measured_split)
{
    setenv("VH_CACHE_DIR", "off", 1); /* measured now, not read from an earlier run's cache */
    rig r;
    make_rig(&r);
    float one[2 * POINTS], two[2 * POINTS];
    vh_session *s = open_session(CAMERAS_MODEL, VH_EXECUTION_SERIAL);
    answer(s, &r, 0, one);
    vh_session_destroy(s);
    char *dir = vh_test_fixture_path(CAMERAS_MODEL);
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = CAMERAS_BACKEND "," CAMERAS_BACKEND;
    p.execution_mode = VH_EXECUTION_PIPELINE;
    p.n_threads = 2;
    p.warmup_frames = 0;
    ck_assert_int_eq(p.llm_split, -1);
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    answer(s, &r, 0, two);
    ck_assert_msg(same(one, two), "two stages answer otherwise than one");
    vh_session_destroy(s);
    free(dir);
    free_rig(&r);
}
END_TEST

START_TEST(test_bad_camera_frames)
{
    rig r;
    make_rig(&r);
    vh_session *s = open_session(CAMERAS_MODEL, VH_EXECUTION_SERIAL);
    float nan_pose[16];
    struct { const char *what, *in_message; } bad[] = {
        {"five cameras", "6 camera images"}, {"no calibration", "calibration"}, {"no ego pose", "frame->ego_pose"},
        {"no can_bus", "frame->can_bus"}, {"NaN pose", "frame->ego_pose"}, {"a camera without pixels", "cameras[3]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        vh_frame f;
        frame_of(&r, 0, &f);
        vh_camera_image cams[CAMS];
        memcpy(cams, r.cams[0], sizeof cams);
        switch (i) {
        case 0: f.n_cameras = 5; break;
        case 1: f.lidar2img = NULL; break;
        case 2: f.ego_pose = NULL; break;
        case 3: f.can_bus = NULL; break;
        case 4: memcpy(nan_pose, r.ego_pose[0], sizeof nan_pose); nan_pose[3] = NAN; f.ego_pose = nan_pose; break;
        case 5: cams[3].rgb = NULL; f.cameras = cams; break;
        }
        ck_assert_msg(vh_submit_frame(s, &f, NULL) == VH_ERR_BAD_FRAME, "%s accepted", bad[i].what);
        ck_assert_msg(strstr(vh_last_error(), bad[i].in_message), "%s: '%s'", bad[i].what, vh_last_error());
    }
    float t0[2 * POINTS];
    answer(s, &r, 0, t0); /* the session goes on */
    vh_session_destroy(s);
    free_rig(&r);
}
END_TEST

int main(void)
{
    if (!vh_test_backend_usable(CAMERAS_BACKEND)) return 77;
    Suite *s = suite_create("orion_cameras");
    TCase *tc = tcase_create("cameras");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_tokens_match_released_front_end);
    tcase_add_test(tc, test_bad_camera_frames);
#ifdef CAMERAS_GRAPHS
    tcase_add_test(tc, test_graphs_replay_eager_bits);
#endif
#ifdef CAMERAS_RELEASED_ONLY
    const int exact_backend = 0;
#else
    const int exact_backend = 1;
#endif
    if (exact_backend) { /* the checks of exact equality between modes and sessions (the fp32 backends) */
        tcase_add_test(tc, test_cameras_to_trajectory);
        tcase_add_test(tc, test_streams_keep_their_own_memory);
        tcase_add_test(tc, test_least_recent_stream_gives_way);
        tcase_add_test(tc, test_tokens_on_the_front_end_checkpoint);
        tcase_add_test(tc, test_two_stages_with_a_measured_split);
    }
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
