/* What the driving models' fixture tests (test_orion_fixtures.c, test_minddrive_fixtures.c, their
 * cpu_amx and cuda builds) share: the fixture (cases.json and the vision-token sets), the reference
 * trajectories, a frame run through the frame runner, and the session runs that compare serial,
 * pipelined and packed execution and check the seeded noise. Each test supplies its model's noise,
 * checks and compared outputs in a driving_fixture_model. */
#ifndef VH_TEST_DRIVING_FIXTURE_HARNESS_H
#define VH_TEST_DRIVING_FIXTURE_HARNESS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "pipeline/frame_runner.h"
#include "vlahybrid/vlahybrid.h"

#define DRIVING_FIXTURE_SETS 4

typedef struct driving_fixture {
    json_t *root;                               /* <name>/cases.json */
    float *tokens[DRIVING_FIXTURE_SETS];        /* <name>/tokens_K.f32, [n_tokens x hidden] each */
    uint32_t hidden, n_tokens;
    char *model_dir;                            /* <name>/model */
} driving_fixture;

/* A model's part of the session runs. */
typedef struct driving_fixture_model {
    uint32_t n_noise;                           /* noise floats a frame takes */
    uint32_t n_trajectory;                      /* floats of vh_action.trajectory in use */
    uint32_t n_kept;                            /* floats of each case compared across modes */
    void (*noise_of)(const json_t *c, float *noise);   /* the case's reference noise */
    /* every output against the case's reference, within tol */
    void (*check)(const json_t *c, const vh_action *a, const char *how, double tol);
    void (*keep)(const vh_action *a, float *kept);      /* the n_kept floats compared */
} driving_fixture_model;

void driving_fixture_load(driving_fixture *f, const char *name);
void driving_fixture_free(driving_fixture *f);
const json_t *driving_fixture_cases(const driving_fixture *f);
const char *driving_case_name(const json_t *c);
void driving_floats_of(const json_t *array, float *out, size_t n);
/* The reference's every-mode trajectories: its per-step offsets `preds` [M][T][2] summed in float64. */
void driving_reference_modes(const json_t *preds, double *modes, uint32_t M, uint32_t T);

/* One frame through the frame runner, every round; the result as an action. */
void driving_run_frame(vh_frame_runner *runner, const vh_plan *plan, size_t tag, const vh_frame_input *in,
                       vh_action *a);

vh_session *driving_open_session(const driving_fixture *f, const char *backends, vh_execution_mode mode,
                                 int32_t split);
/* A case as a frame: its token set, command and noise (written to `noise`). */
void driving_frame_of_case(const driving_fixture *f, const driving_fixture_model *m, const json_t *c, float *noise,
                           vh_frame *fr);
/* Every case through a session, all submitted at once, each checked within tol (two_stage_tol where
 * the backends are two: each rounds its way); kept: n x n_kept. */
void driving_run_session(const driving_fixture *f, const driving_fixture_model *m, const char *backends,
                         vh_execution_mode mode, int32_t split, double tol, double two_stage_tol, float *kept);
/* Serial, pipelined over two stages and packed (one and two stages), each case checked as
 * driving_run_session does; pipelined equal to serial to the bit when `exact`, packed within
 * modes_tol of serial (relative, plus the same absolute). */
void driving_check_modes(const driving_fixture *f, const driving_fixture_model *m, const char *backend,
                         const char *two_stages, double tol, double two_stage_tol, int exact, float modes_tol);
/* Without noise in the frame: drawn from the seed and the sequence, the same on every run, different
 * per sequence, and the documented draw (vh_driving_seeded_noise). */
void driving_check_seeded_noise(vh_session *s, const driving_fixture *f, const driving_fixture_model *m,
                                const json_t *c);

#endif
