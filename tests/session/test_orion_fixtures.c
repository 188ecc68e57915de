/* Orion's decision half (the LLM and the planner, from the 529 vision tokens on) against the
 * references of tests/fixtures/orion/make_orion_fixtures.py: transformers' LlamaForCausalLM with
 * peft's LoRA and the original repository's DistributionModule / PredictModel (plus its named
 * port of orion.py's planner lines), in float64, on a tiny Orion-architecture checkpoint converted
 * by tools/orion/convert_orion.py. Each case: the final-normed hidden state at <waypoint_ego>, mu,
 * log_sigma, every mode's trajectory and the commanded one; through the frame runner and through
 * the public API serially, pipelined over two stages and packed; the prompt's ids; bad frames. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driving_fixture_harness.h"
#include "family/model_load.h"
#include "family/orion/orion_family.h"
#include "pipeline/frame_runner.h"
#include "reference_json.h"
#include "test_support.h"

#ifndef ORION_BACKEND
#define ORION_BACKEND "cpu_generic"
#endif
#ifndef ORION_TOL
#define ORION_TOL 1e-4 /* fp32 against the float64 reference, relative to the largest reference value */
#endif
#ifndef ORION_TWO_STAGES
#define ORION_TWO_STAGES ORION_BACKEND "," ORION_BACKEND
#endif
#ifndef ORION_TWO_STAGE_TOL
#define ORION_TWO_STAGE_TOL ORION_TOL /* the two stages' backends, when they differ, each round their way */
#endif
#ifndef ORION_EXACT_MODES
#define ORION_EXACT_MODES 1 /* fp32 CPU: pipelined = serial to the bit */
#endif
/* How far two modes' trajectories may differ: the same arithmetic (exact), or a packed pass's
 * other GEMM shapes (fp32: 1e-5; bf16 backends: their tolerance). */
#define MODES_TOL (ORION_TOL < 1e-3 ? 1e-5f : (float)ORION_TOL)

#define LATENT 32

typedef driving_fixture fixture;

static void load_fixture(fixture *f) { driving_fixture_load(f, "orion"); }
static const json_t *cases(const fixture *f) { return driving_fixture_cases(f); }

/* Every value of an action against a case's reference, within `tol` of the largest value. */
static void check_action_tol(const json_t *c, const vh_action *a, const char *how, double tol)
{
    const char *name = driving_case_name(c);
    ck_assert_msg(a->status == VH_OK, "%s %s: status %d", how, name, a->status);
    ck_assert_int_eq(a->kind, VH_ACTION_TRAJECTORY);
    ck_assert_uint_eq(a->n_points, 6);
    double e = reference_rel_error(a->trajectory, json_object_get(c, "trajectory"), 12);
    ck_assert_msg(e <= tol, "%s %s: trajectory off by %g", how, name, e);
    uint32_t n = 0;
    const float *modes = vh_action_extra(a, "mode_trajectories", &n);
    ck_assert_msg(modes && n == 72, "%s: mode_trajectories", name);
    double want[72];
    driving_reference_modes(json_object_get(c, "preds"), want, 6, 6);
    ck_assert_msg((e = vh_test_rel_error_of_largest(modes, want, 72)) <= tol, "%s %s: modes off by %g", how, name, e);
    const float *mu = vh_action_extra(a, "mu", &n);
    ck_assert_msg(mu && n == 32 && (e = reference_rel_error(mu, json_object_get(c, "mu"), 32)) <= tol, "%s %s: mu %g", how,
                  name, e);
    const float *ls = vh_action_extra(a, "log_sigma", &n);
    ck_assert_msg(ls && n == 32 && (e = reference_rel_error(ls, json_object_get(c, "log_sigma"), 32)) <= tol,
                  "%s %s: log_sigma %g", how, name, e);
}

static void check_action(const json_t *c, const vh_action *a, const char *how)
{
    check_action_tol(c, a, how, ORION_TOL);
}

static void noise_of(const json_t *c, float *eps) { driving_floats_of(json_object_get(c, "eps"), eps, LATENT); }

static void keep_trajectory(const vh_action *a, float *kept) { memcpy(kept, a->trajectory, sizeof(float) * 12); }

/* Orion's part of the session runs: one planner's noise, its 6 waypoints compared across modes. */
static const driving_fixture_model orion = {
    .n_noise = LATENT, .n_trajectory = 12, .n_kept = 12,
    .noise_of = noise_of, .check = check_action_tol, .keep = keep_trajectory,
};

START_TEST(test_prompt_ids)
{
    fixture f;
    load_fixture(&f);
    vh_error err;
    vh_model *m = NULL;
    ck_assert_msg(vh_model_load(f.model_dir, &m, &err) == VH_OK, "%s", err.message);
    ck_assert_ptr_eq(m->family, &vh_family_orion);
    vh_session_params params;
    vh_session_params_init(&params);
    vh_program *prog = NULL;
    vh_program_shape shape;
    ck_assert_msg(vh_family_orion.program_create(m, &params, &prog, &shape, &err) == VH_OK, "%s", err.message);
    size_t n = 0, image = 0;
    const int32_t *ids = vh_orion_program_prompt(prog, &n, &image);
    const json_t *want = json_object_get(f.root, "prompt_ids");
    const size_t at = (size_t)json_integer_value(json_object_get(f.root, "image_index"));
    ck_assert_uint_eq(image, at);
    ck_assert_uint_eq(n + 1, json_array_size(want)); /* the reference holds -200 where the image goes */
    for (size_t i = 0, k = 0; i < json_array_size(want); i++) {
        if (i == at) {
            ck_assert_int_eq(json_integer_value(json_array_get(want, i)), -200);
            continue;
        }
        ck_assert_msg(ids[k] == json_integer_value(json_array_get(want, i)), "id %zu: %d, reference %lld", i, ids[k],
                      (long long)json_integer_value(json_array_get(want, i)));
        k++;
    }
    ck_assert_uint_eq(shape.max_context, (uint32_t)json_integer_value(json_object_get(f.root, "sequence_length")));
    vh_family_orion.program_free(prog);
    vh_model_free(m);
    driving_fixture_free(&f);
}
END_TEST

/* The frame runner, one case at a time: the hidden state at <waypoint_ego> too; the model with its
 * LoRA merged, and (CPU backends) kept apart. */
static void cases_one_by_one(const char *model)
{
    fixture f;
    load_fixture(&f);
    vh_error err;
    vh_model *m = NULL;
    free(f.model_dir);
    f.model_dir = vh_test_fixture_path(model);
    ck_assert_msg(vh_model_load(f.model_dir, &m, &err) == VH_OK, "%s", err.message);
    vh_session_params params;
    vh_session_params_init(&params);
    vh_program *prog = NULL;
    vh_program_shape shape;
    ck_assert_int_eq(vh_family_orion.program_create(m, &params, &prog, &shape, &err), VH_OK);
    vh_plan plan;
    vh_plan_request req = {.backends = ORION_BACKEND, .max_context = shape.max_context, .llm_split = -1};
    ck_assert_msg(vh_plan_create(m, &req, &plan, &err) == VH_OK, "%s", err.message);
    vh_frame_runner runner;
    ck_assert_int_eq(vh_frame_runner_init(&runner, m, &plan, prog, shape.max_context, &err), VH_OK);
    double worst_feature = 0;
    size_t i;
    const json_t *c;
    json_array_foreach(cases(&f), i, c) {
        float eps[LATENT];
        noise_of(c, eps);
        const int k = (int)json_integer_value(json_object_get(c, "token_set"));
        vh_frame_input in = {.vision_tokens = f.tokens[k], .n_vision_tokens = f.n_tokens,
                             .vision_token_width = f.hidden, .noise = eps, .n_noise = LATENT,
                             .command = (int32_t)json_integer_value(json_object_get(c, "command"))};
        vh_action a;
        driving_run_frame(&runner, &plan, i, &in, &a);
        const double e = reference_rel_error(vh_orion_frame_feature(&runner.job.frame), json_object_get(c, "feature"), f.hidden);
        ck_assert_msg(e <= ORION_TOL, "%s: feature off by %g", driving_case_name(c), e);
        worst_feature = fmax(worst_feature, e);
        check_action(c, &a, "runner");
    }
    printf("orion (%s): %zu cases, hidden state within %.2g of the reference\n", model, json_array_size(cases(&f)),
           worst_feature);
    vh_frame_runner_free(&runner);
    vh_plan_destroy(&plan);
    vh_family_orion.program_free(prog);
    vh_model_free(m);
    driving_fixture_free(&f);
}

START_TEST(test_cases_one_by_one)
{
    cases_one_by_one("orion/model");
}
END_TEST

/* LoRA kept apart (converted with --lora keep): every backend adds B (A x) as peft does (cuda since
 * backend ABI 2.2, in bf16 with B pre-scaled). */
START_TEST(test_lora_kept_apart)
{
    cases_one_by_one("orion/model-lora");
}
END_TEST

START_TEST(test_session_serial_pipeline_packed)
{
    fixture f;
    load_fixture(&f);
    driving_check_modes(&f, &orion, ORION_BACKEND, ORION_TWO_STAGES, ORION_TOL, ORION_TWO_STAGE_TOL, ORION_EXACT_MODES,
                        MODES_TOL);
    driving_fixture_free(&f);
}
END_TEST

/* Frames that lack what Orion needs are refused at submit with a message naming it; the session
 * goes on and computes the next good frame. Noise from the seed: reproducible per sequence. */
START_TEST(test_bad_frames_and_seeded_noise)
{
    fixture f;
    load_fixture(&f);
    vh_session *s = driving_open_session(&f, ORION_BACKEND, VH_EXECUTION_SERIAL, -1);
    const json_t *c = json_array_get(cases(&f), 3);
    float eps[LATENT], can_bus[VH_CAN_BUS_FLOATS] = {0};
    vh_frame fr;
    struct { const char *what, *in_message; } bad[] = {
        {"no tokens", "vision tokens"}, {"wrong shape", "the model takes 529 x 64"}, {"short noise", "latent has 32"},
        {"command 7", "frame->command is 7"}, {"command 6", "command 0..5"}, {"no command", "command 0..5"},
        {"NaN can_bus", "frame->can_bus"}, {"tokens without data", "frame->vision_tokens"}, {"NaN token", "not finite"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        driving_frame_of_case(&f, &orion, c, eps, &fr);
        float *tokens = NULL;
        switch (i) {
        case 0: fr.vision_tokens = NULL; fr.n_vision_tokens = fr.vision_token_width = 0; break;
        case 1: fr.n_vision_tokens = 528; break;
        case 2: fr.n_noise = 31; break;
        case 3: fr.command = 7; break;
        case 4: fr.command = 6; break;
        case 5: fr.command = VH_COMMAND_NONE; break;
        case 6: can_bus[5] = NAN; fr.can_bus = can_bus; break;
        case 7: fr.vision_tokens = NULL; break;
        case 8:
            tokens = malloc(sizeof(float) * f.n_tokens * f.hidden);
            memcpy(tokens, fr.vision_tokens, sizeof(float) * f.n_tokens * f.hidden);
            tokens[1000] = NAN;
            fr.vision_tokens = tokens;
            break;
        }
        ck_assert_msg(vh_submit_frame(s, &fr, NULL) == VH_ERR_BAD_FRAME, "%s accepted", bad[i].what);
        ck_assert_msg(strstr(vh_last_error(), bad[i].in_message), "%s: '%s'", bad[i].what, vh_last_error());
        free(tokens);
    }
    /* the session goes on */
    driving_frame_of_case(&f, &orion, c, eps, &fr);
    ck_assert_int_eq(vh_submit_frame(s, &fr, NULL), VH_OK);
    vh_action a;
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, -1), VH_OK);
    check_action(c, &a, "after bad frames");
    driving_check_seeded_noise(s, &f, &orion, c);
    vh_session_destroy(s);
    driving_fixture_free(&f);
}
END_TEST

int main(void)
{
    if (!vh_test_backend_usable(ORION_BACKEND)) return 77;
    Suite *s = suite_create("orion_fixtures");
    TCase *tc = tcase_create("orion");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_prompt_ids);
    tcase_add_test(tc, test_cases_one_by_one);
    tcase_add_test(tc, test_lora_kept_apart);
    tcase_add_test(tc, test_session_serial_pipeline_packed);
    tcase_add_test(tc, test_bad_frames_and_seeded_noise);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
