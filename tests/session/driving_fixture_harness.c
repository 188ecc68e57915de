#include "driving_fixture_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family/driving/driving_noise.h"
#include "test_support.h"

#define MAX_NOISE 64

void driving_fixture_load(driving_fixture *f, const char *name)
{
    memset(f, 0, sizeof *f);
    char rel[64];
    snprintf(rel, sizeof rel, "%s/cases.json", name);
    char *path = vh_test_fixture_path(rel);
    json_error_t jerr;
    f->root = json_load_file(path, 0, &jerr);
    ck_assert_msg(f->root, "%s: %s", path, jerr.text);
    free(path);
    f->hidden = (uint32_t)json_integer_value(json_object_get(f->root, "hidden"));
    f->n_tokens = (uint32_t)json_integer_value(json_object_get(f->root, "n_vision_tokens"));
    for (int k = 0; k < DRIVING_FIXTURE_SETS; k++) {
        snprintf(rel, sizeof rel, "%s/tokens_%d.f32", name, k);
        path = vh_test_fixture_path(rel);
        size_t size = 0;
        f->tokens[k] = (float *)vh_test_read_file(path, &size);
        ck_assert_msg(f->tokens[k] && size == sizeof(float) * f->n_tokens * f->hidden, "%s", path);
        free(path);
    }
    snprintf(rel, sizeof rel, "%s/model", name);
    f->model_dir = vh_test_fixture_path(rel);
}

void driving_fixture_free(driving_fixture *f)
{
    for (int k = 0; k < DRIVING_FIXTURE_SETS; k++) free(f->tokens[k]);
    json_decref(f->root);
    free(f->model_dir);
}

const json_t *driving_fixture_cases(const driving_fixture *f) { return json_object_get(f->root, "cases"); }

const char *driving_case_name(const json_t *c) { return json_string_value(json_object_get(c, "name")); }

void driving_floats_of(const json_t *array, float *out, size_t n)
{
    ck_assert_uint_eq(json_array_size(array), n);
    for (size_t i = 0; i < n; i++) out[i] = (float)json_number_value(json_array_get(array, i));
}

void driving_reference_modes(const json_t *preds, double *modes, uint32_t M, uint32_t T)
{
    for (uint32_t m = 0; m < M; m++) {
        double x = 0, y = 0;
        for (uint32_t t = 0; t < T; t++) {
            x += json_number_value(json_array_get(preds, (m * T + t) * 2));
            y += json_number_value(json_array_get(preds, (m * T + t) * 2 + 1));
            modes[(m * T + t) * 2] = x;
            modes[(m * T + t) * 2 + 1] = y;
        }
    }
}

void driving_run_frame(vh_frame_runner *runner, const vh_plan *plan, size_t tag, const vh_frame_input *in,
                       vh_action *a)
{
    vh_error err;
    ck_assert_msg(vh_frame_job_prepare(&runner->job, tag, in, &err) == VH_OK, "%s", err.message);
    do {
        for (uint32_t s = 0; s < plan->n_stages; s++)
            ck_assert_msg(vh_frame_job_run_stage(&runner->job, s, &err) == VH_OK, "%s", err.message);
    } while (vh_frame_job_advance(&runner->job));
    vh_frame_result r;
    vh_frame_job_result(&runner->job, &r);
    vh_action_init(a);
    a->status = VH_OK;
    a->kind = r.kind;
    a->action_dim = r.action_dim;
    memcpy(a->values, r.values, sizeof a->values);
    a->n_points = r.n_points;
    memcpy(a->trajectory, r.trajectory, sizeof a->trajectory);
    a->n_extras = r.n_extras;
    memcpy(a->extra_info, r.extra_info, sizeof a->extra_info);
    memcpy(a->extras, r.extras, sizeof a->extras);
}

vh_session *driving_open_session(const driving_fixture *f, const char *backends, vh_execution_mode mode,
                                 int32_t split)
{
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = f->model_dir;
    p.backends = backends;
    p.execution_mode = mode;
    p.llm_split = split;
    p.queue_policy = VH_QUEUE_BLOCK;
    p.queue_capacity = 64;
    p.n_threads = 2;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    return s;
}

void driving_frame_of_case(const driving_fixture *f, const driving_fixture_model *m, const json_t *c, float *noise,
                           vh_frame *fr)
{
    vh_frame_init(fr);
    m->noise_of(c, noise);
    const int k = (int)json_integer_value(json_object_get(c, "token_set"));
    fr->vision_tokens = f->tokens[k];
    fr->n_vision_tokens = f->n_tokens;
    fr->vision_token_width = f->hidden;
    fr->command = (int32_t)json_integer_value(json_object_get(c, "command"));
    fr->noise = noise;
    fr->n_noise = m->n_noise;
}

void driving_run_session(const driving_fixture *f, const driving_fixture_model *m, const char *backends,
                         vh_execution_mode mode, int32_t split, double tol, double two_stage_tol, float *kept)
{
    vh_session *s = driving_open_session(f, backends, mode, split);
    const json_t *cases = driving_fixture_cases(f);
    size_t i;
    const json_t *c;
    json_array_foreach(cases, i, c) {
        vh_frame fr;
        float noise[MAX_NOISE];
        driving_frame_of_case(f, m, c, noise, &fr);
        fr.tag = i;
        ck_assert_msg(vh_submit_frame(s, &fr, NULL) == VH_OK, "%s", vh_session_last_error(s));
    }
    for (i = 0; i < json_array_size(cases); i++) {
        vh_action a;
        vh_action_init(&a);
        ck_assert_int_eq(vh_poll_action(s, &a, -1), VH_OK);
        ck_assert_uint_eq(a.tag, i);
        m->check(json_array_get(cases, i), &a, backends, strchr(backends, ',') ? two_stage_tol : tol);
        m->keep(&a, kept + i * m->n_kept);
    }
    vh_session_destroy(s);
}

void driving_check_modes(const driving_fixture *f, const driving_fixture_model *m, const char *backend,
                         const char *two_stages, double tol, double two_stage_tol, int exact, float modes_tol)
{
    const size_t n = json_array_size(driving_fixture_cases(f)), floats = n * m->n_kept;
    float *serial = calloc(floats, sizeof *serial), *other = calloc(floats, sizeof *other);
    driving_run_session(f, m, backend, VH_EXECUTION_SERIAL, -1, tol, two_stage_tol, serial);
    driving_run_session(f, m, two_stages, VH_EXECUTION_PIPELINE, 1, tol, two_stage_tol, other);
    if (exact) ck_assert_msg(!memcmp(serial, other, floats * sizeof *serial), "pipelined differs from serial");
    driving_run_session(f, m, backend, VH_EXECUTION_PACKED, -1, tol, two_stage_tol, other);
    for (size_t i = 0; i < n; i++) /* a packed pass computes the same rows in a larger batch */
        for (uint32_t k = 0; k < m->n_kept; k++) {
            const float s = serial[i * m->n_kept + k], o = other[i * m->n_kept + k];
            ck_assert_msg(fabsf(s - o) <= modes_tol * (1 + fabsf(s)), "packed case %zu", i);
        }
    driving_run_session(f, m, two_stages, VH_EXECUTION_PACKED, 1, tol, two_stage_tol, other);
    free(serial);
    free(other);
}

void driving_check_seeded_noise(vh_session *s, const driving_fixture *f, const driving_fixture_model *m,
                                const json_t *c)
{
    float noise[MAX_NOISE], first[2][2 * VH_MAX_TRAJECTORY_POINTS];
    const size_t bytes = sizeof(float) * m->n_trajectory;
    vh_frame fr;
    vh_action a;
    for (int run = 0; run < 2; run++)
        for (int seq = 0; seq < 2; seq++) {
            driving_frame_of_case(f, m, c, noise, &fr);
            fr.noise = NULL;
            fr.n_noise = 0;
            fr.sequence = 100 + seq;
            ck_assert_int_eq(vh_submit_frame(s, &fr, NULL), VH_OK);
            vh_action_init(&a);
            ck_assert_int_eq(vh_poll_action(s, &a, -1), VH_OK);
            ck_assert_int_eq(a.status, VH_OK);
            if (run == 0) memcpy(first[seq], a.trajectory, bytes);
            else ck_assert_msg(!memcmp(first[seq], a.trajectory, bytes), "seeded noise not reproducible");
        }
    ck_assert_msg(memcmp(first[0], first[1], bytes), "two sequences drew the same noise");
    /* ... and it is the documented draw: the same frame with that noise given explicitly */
    float case_noise[MAX_NOISE];
    vh_driving_seeded_noise(0, 100, noise, m->n_noise);
    driving_frame_of_case(f, m, c, case_noise, &fr);
    fr.noise = noise;
    ck_assert_int_eq(vh_submit_frame(s, &fr, NULL), VH_OK);
    vh_action_init(&a);
    ck_assert_int_eq(vh_poll_action(s, &a, -1), VH_OK);
    ck_assert_msg(!memcmp(first[0], a.trajectory, bytes), "seeded noise differs from its documented draw");
}
