/* MindDrive's decision half (the Qwen2 LLM with its two LoRA experts and the two planners, from the
 * 529 vision tokens on) against the references of tests/fixtures/minddrive/make_minddrive_fixtures.py:
 * transformers' Qwen2ForCausalLM with peft's two adapters and the released code's prompt pipeline,
 * add_special_token and read-out methods, and the released DistributionModule / PredictModel with
 * its named port of minddrive.py's planner lines, in float64, on a tiny MindDrive-architecture
 * checkpoint converted by tools/minddrive/convert_minddrive.py. Each case: both rounds' prompt ids,
 * the 7 speed log-probabilities and the decision, the three hidden rows, each planner's mu,
 * log_sigma, every mode's trajectory and the chosen one; through the frame runner and through the
 * public API serially, pipelined over two stages and packed; bad frames; seeded noise. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driving_fixture_harness.h"
#include "family/minddrive/minddrive_family.h"
#include "family/model_load.h"
#include "pipeline/frame_runner.h"
#include "reference_json.h"
#include "test_support.h"

#ifndef MD_BACKEND
#define MD_BACKEND "cpu_generic"
#endif
#ifndef MD_TOL
#define MD_TOL 1e-4 /* fp32 against the float64 reference, relative to the largest reference value */
#endif
#ifndef MD_TWO_STAGES
#define MD_TWO_STAGES MD_BACKEND "," MD_BACKEND
#endif
#ifndef MD_TWO_STAGE_TOL
#define MD_TWO_STAGE_TOL MD_TOL
#endif
#ifndef MD_EXACT_MODES
#define MD_EXACT_MODES 1 /* fp32 CPU: pipelined = serial to the bit */
#endif
#ifndef MD_MIN_MARGIN
#define MD_MIN_MARGIN 1e-3 /* the decision must match where the reference's best two differ by this */
#endif
#define MODES_TOL (MD_TOL < 1e-3 ? 1e-5f : (float)MD_TOL)

#define LATENT 32
#define SPEEDS 7
#define SPEED_STEPS 6
#define PATH_MODES 6
#define PATH_STEPS 20

typedef driving_fixture fixture;

static double dbl(const json_t *v) { return json_number_value(v); }
static const json_t *get(const json_t *o, const char *k) { return json_object_get(o, k); }
static void load_fixture(fixture *f) { driving_fixture_load(f, "minddrive"); }
static const json_t *cases(const fixture *f) { return driving_fixture_cases(f); }
static const char *case_name(const json_t *c) { return driving_case_name(c); }

/* A planner's every-mode trajectories from its reference per-step offsets, summed in float64. */
static void reference_modes(const json_t *planner, double *modes, uint32_t M, uint32_t T)
{
    const json_t *preds = get(planner, "preds");
    ck_assert_uint_eq(json_array_size(preds), (size_t)M * T * 2);
    driving_reference_modes(preds, modes, M, T);
}

static void check_extra(const vh_action *a, const char *extra, const json_t *want, uint32_t n, double tol,
                        const char *how, const json_t *c)
{
    uint32_t count = 0;
    const float *v = vh_action_extra(a, extra, &count);
    ck_assert_msg(v && count == n, "%s %s: extra %s has %u floats (%u wanted)", how, case_name(c), extra, count, n);
    const double e = reference_rel_error(v, want, n);
    ck_assert_msg(e <= tol, "%s %s: %s off by %g", how, case_name(c), extra, e);
}

static void check_planner(const vh_action *a, const json_t *planner, const char *prefix, uint32_t M, uint32_t T,
                          double tol, const char *how, const json_t *c)
{
    char name[32];
    uint32_t count = 0;
    snprintf(name, sizeof name, "%s_modes", prefix);
    const float *modes = vh_action_extra(a, name, &count);
    ck_assert_msg(modes && count == M * T * 2, "%s %s: %s", how, case_name(c), name);
    double *want = malloc(sizeof *want * M * T * 2);
    reference_modes(planner, want, M, T);
    const double e = vh_test_rel_error_of_largest(modes, want, (size_t)M * T * 2);
    free(want);
    ck_assert_msg(e <= tol, "%s %s: %s off by %g", how, case_name(c), name, e);
    snprintf(name, sizeof name, "%s_mu", prefix);
    check_extra(a, name, get(planner, "mu"), LATENT, tol, how, c);
    snprintf(name, sizeof name, "%s_log_sigma", prefix);
    check_extra(a, name, get(planner, "log_sigma"), LATENT, tol, how, c);
}

/* Every output of an action against a case's reference, within `tol` of each output's largest value;
 * the decision equal wherever the reference's margin is clear. */
static void check_action_tol(const json_t *c, const vh_action *a, const char *how, double tol)
{
    ck_assert_msg(a->status == VH_OK, "%s %s: status %d", how, case_name(c), a->status);
    ck_assert_int_eq(a->kind, VH_ACTION_TRAJECTORY);
    ck_assert_uint_eq(a->action_dim, 1);
    ck_assert_uint_eq(a->n_points, PATH_STEPS);
    check_extra(a, "speed_log_probs", get(c, "speed_log_probs"), SPEEDS, tol, how, c);
    const int decision = (int)json_integer_value(get(c, "decision"));
    if (dbl(get(c, "decision_margin")) >= MD_MIN_MARGIN)
        ck_assert_msg((int)a->values[0] == decision, "%s %s: decision %g, reference %d (margin %g)", how, case_name(c),
                      a->values[0], decision, dbl(get(c, "decision_margin")));
    /* the speed planner's trajectory is the mode decided here (the reference's own when they agree) */
    if ((int)a->values[0] == decision) {
        check_extra(a, "speed_trajectory", get(get(c, "speed"), "trajectory"), 2 * SPEED_STEPS, tol, how, c);
        check_planner(a, get(c, "speed"), "speed", SPEEDS, SPEED_STEPS, tol, how, c);
    }
    const json_t *path = get(c, "path");
    ck_assert_int_eq(json_integer_value(get(path, "mode")), json_integer_value(get(c, "path_mode")));
    const double e = reference_rel_error(a->trajectory, get(path, "trajectory"), 2 * PATH_STEPS);
    ck_assert_msg(e <= tol, "%s %s: path off by %g", how, case_name(c), e);
    check_planner(a, path, "path", PATH_MODES, PATH_STEPS, tol, how, c);
}

static void check_action(const json_t *c, const vh_action *a, const char *how)
{
    check_action_tol(c, a, how, MD_TOL);
}

static vh_model *load_model(const fixture *f)
{
    vh_error err;
    vh_model *m = NULL;
    ck_assert_msg(vh_model_load(f->model_dir, &m, &err) == VH_OK, "%s", err.message);
    ck_assert_ptr_eq(m->family, &vh_family_minddrive);
    return m;
}

/* The program's ids of a round against the reference's (which hold -200 at the image, and, in the
 * decision round, the final speed token the program never runs). */
static void check_round_ids(const vh_program *prog, int round, const json_t *want, size_t at)
{
    size_t n = 0, image = 0;
    const int32_t *ids = vh_minddrive_program_prompt(prog, round, &n, &image);
    ck_assert_uint_eq(image, at);
    ck_assert_uint_eq(n + 1 + (round == 0), json_array_size(want));
    for (size_t i = 0, k = 0; k < n; i++) {
        if (i == at) {
            ck_assert_int_eq(json_integer_value(json_array_get(want, i)), -200);
            continue;
        }
        ck_assert_msg(ids[k] == json_integer_value(json_array_get(want, i)), "round %d id %zu: %d, reference %lld",
                      round, i, ids[k], (long long)json_integer_value(json_array_get(want, i)));
        k++;
    }
}

START_TEST(test_prompt_ids)
{
    fixture f;
    load_fixture(&f);
    vh_model *m = load_model(&f);
    vh_error err;
    vh_session_params params;
    vh_session_params_init(&params);
    vh_program *prog = NULL;
    vh_program_shape shape;
    ck_assert_msg(vh_family_minddrive.program_create(m, &params, &prog, &shape, &err) == VH_OK, "%s", err.message);
    const json_t *c = json_array_get(cases(&f), 0);
    check_round_ids(prog, 0, get(c, "decision_prompt_ids"), (size_t)json_integer_value(get(c, "decision_image_index")));
    check_round_ids(prog, 1, get(c, "action_prompt_ids"), (size_t)json_integer_value(get(c, "action_image_index")));
    ck_assert_uint_eq(shape.segments_per_frame, 2);
    vh_family_minddrive.program_free(prog);
    vh_model_free(m);
    driving_fixture_free(&f);
}
END_TEST

static void eps_of(const json_t *c, float *eps)
{
    driving_floats_of(get(c, "eps_speed"), eps, LATENT);
    driving_floats_of(get(c, "eps_path"), eps + LATENT, LATENT);
}

/* the path and the decision compared across modes */
static void keep_path_and_decision(const vh_action *a, float *kept)
{
    memcpy(kept, a->trajectory, sizeof(float) * 2 * PATH_STEPS);
    kept[2 * PATH_STEPS] = (float)a->values[0];
}

/* MindDrive's part of the session runs: both planners' noise (speed's, then path's). */
static const driving_fixture_model minddrive = {
    .n_noise = 2 * LATENT, .n_trajectory = 2 * PATH_STEPS, .n_kept = 2 * PATH_STEPS + 1,
    .noise_of = eps_of, .check = check_action_tol, .keep = keep_path_and_decision,
};

/* The frame runner, one case at a time: the hidden rows too. */
START_TEST(test_cases_one_by_one)
{
    fixture f;
    load_fixture(&f);
    vh_model *m = load_model(&f);
    vh_error err;
    vh_session_params params;
    vh_session_params_init(&params);
    vh_program *prog = NULL;
    vh_program_shape shape;
    ck_assert_int_eq(vh_family_minddrive.program_create(m, &params, &prog, &shape, &err), VH_OK);
    vh_plan plan;
    vh_plan_request req = {.backends = MD_BACKEND, .max_context = shape.max_context, .llm_split = -1,
                           .max_sequences = 2, .segments_per_frame = 2};
    ck_assert_msg(vh_plan_create(m, &req, &plan, &err) == VH_OK, "%s", err.message);
    vh_frame_runner runner;
    ck_assert_int_eq(vh_frame_runner_init_segments(&runner, m, &plan, prog, shape.max_context, 2, &err), VH_OK);
    double worst = 0;
    size_t i;
    const json_t *c;
    json_array_foreach(cases(&f), i, c) {
        float eps[2 * LATENT];
        eps_of(c, eps);
        const int k = (int)json_integer_value(get(c, "token_set"));
        vh_frame_input in = {.vision_tokens = f.tokens[k], .n_vision_tokens = f.n_tokens,
                             .vision_token_width = f.hidden, .noise = eps, .n_noise = 2 * LATENT,
                             .command = (int32_t)json_integer_value(get(c, "command"))};
        vh_action a;
        driving_run_frame(&runner, &plan, i, &in, &a);
        const float *hidden = vh_minddrive_frame_hidden(&runner.job.frame);
        static const char *const rows[4] = {"decision_feature", "decision_feature", "speed_feature", "path_feature"};
        for (int r = 0; r < 4; r++) {
            const double e = reference_rel_error(hidden + (size_t)r * f.hidden, get(c, rows[r]), f.hidden);
            ck_assert_msg(e <= MD_TOL, "%s: %s off by %g", case_name(c), rows[r], e);
            if (e > worst) worst = e;
        }
        check_action(c, &a, "runner");
    }
    printf("minddrive: %zu cases, hidden rows within %.2g of the reference\n", json_array_size(cases(&f)), worst);
    vh_frame_runner_free(&runner);
    vh_plan_destroy(&plan);
    vh_family_minddrive.program_free(prog);
    vh_model_free(m);
    driving_fixture_free(&f);
}
END_TEST

START_TEST(test_session_serial_pipeline_packed)
{
    fixture f;
    load_fixture(&f);
    driving_check_modes(&f, &minddrive, MD_BACKEND, MD_TWO_STAGES, MD_TOL, MD_TWO_STAGE_TOL, MD_EXACT_MODES, MODES_TOL);
    driving_fixture_free(&f);
}
END_TEST

/* VH_MINDDRIVE_ROUNDS=sequential (the rounds as two passes, as the released code runs them: the
 * benchmark's peer) gives the same answers, serial and pipelined; packed sessions refuse it. */
START_TEST(test_sequential_rounds)
{
    fixture f;
    load_fixture(&f);
    const size_t n = json_array_size(cases(&f));
    float *paths = calloc(n * minddrive.n_kept, sizeof *paths);
    setenv("VH_MINDDRIVE_ROUNDS", "sequential", 1);
    driving_run_session(&f, &minddrive, MD_BACKEND, VH_EXECUTION_SERIAL, -1, MD_TOL, MD_TWO_STAGE_TOL, paths);
    driving_run_session(&f, &minddrive, MD_TWO_STAGES, VH_EXECUTION_PIPELINE, 1, MD_TOL, MD_TWO_STAGE_TOL, paths);
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = f.model_dir;
    p.backends = MD_BACKEND;
    p.execution_mode = VH_EXECUTION_PACKED;
    vh_session *s = NULL;
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(vh_last_error(), "serial and pipeline modes only"), "%s", vh_last_error());
    setenv("VH_MINDDRIVE_ROUNDS", "both", 1);
    p.execution_mode = VH_EXECUTION_SERIAL;
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_INVALID_ARGUMENT);
    unsetenv("VH_MINDDRIVE_ROUNDS");
    free(paths);
    driving_fixture_free(&f);
}
END_TEST

/* Frames that lack what MindDrive needs are refused at submit with a message naming it; the session
 * goes on. Noise from the seed: reproducible per sequence, the documented draw. */
START_TEST(test_bad_frames_and_seeded_noise)
{
    fixture f;
    load_fixture(&f);
    vh_session *s = driving_open_session(&f, MD_BACKEND, VH_EXECUTION_SERIAL, -1);
    const json_t *c = json_array_get(cases(&f), 3);
    float eps[2 * LATENT];
    vh_frame fr;
    struct { const char *what, *in_message; } bad[] = {
        {"no tokens", "vision tokens"}, {"wrong width", "the model takes 529 x 64"}, {"one planner's noise", "take 64"},
        {"command 6", "command 0..5"}, {"no command", "command 0..5"}, {"unnorm_key", "no dataset statistics"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        driving_frame_of_case(&f, &minddrive, c, eps, &fr);
        switch (i) {
        case 0: fr.vision_tokens = NULL; fr.n_vision_tokens = fr.vision_token_width = 0; break;
        case 1: fr.vision_token_width = 65; break;
        case 2: fr.n_noise = LATENT; break;
        case 3: fr.command = 6; break;
        case 4: fr.command = VH_COMMAND_NONE; break;
        case 5: fr.unnorm_key = "bridge_orig"; break;
        }
        const vh_status st = vh_submit_frame(s, &fr, NULL);
        ck_assert_msg(st == VH_ERR_BAD_FRAME || st == VH_ERR_UNNORM_KEY, "%s accepted", bad[i].what);
        ck_assert_msg(strstr(vh_last_error(), bad[i].in_message), "%s: '%s'", bad[i].what, vh_last_error());
    }
    driving_frame_of_case(&f, &minddrive, c, eps, &fr);
    ck_assert_int_eq(vh_submit_frame(s, &fr, NULL), VH_OK);
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, -1), VH_OK);
    check_action(c, &a, "after bad frames");
    driving_check_seeded_noise(s, &f, &minddrive, c);
    vh_session_destroy(s);
    driving_fixture_free(&f);
}
END_TEST

int main(void)
{
    if (!vh_test_backend_usable(MD_BACKEND)) return 77;
    Suite *s = suite_create("minddrive_fixtures");
    TCase *tc = tcase_create("minddrive");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_prompt_ids);
    tcase_add_test(tc, test_cases_one_by_one);
    tcase_add_test(tc, test_session_serial_pipeline_packed);
    tcase_add_test(tc, test_sequential_rounds);
    tcase_add_test(tc, test_bad_frames_and_seeded_noise);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
