/*
 * A packed batch computes what the same rows compute alone: an executor's logits for segments of
 * several sequences in one forward pass (a prefill packed with decode rows of other frames, as
 * packed decoding runs them) against the same executor running each frame alone, prefill then one
 * decode step per call (serial mode's calls).
 *
 * Three frames (different images, prompts of different lengths) on the fixture models:
 *   serial: frame f alone on KV slot f: vision, prefill, 6 decode steps fed its own argmax;
 *   packed: slots 3..5, pass p = frame p's prefill (its vision just before) + one decode row of
 *           every earlier frame still generating, in the order decode rows first for odd passes
 *           (segment order must not matter), then passes of decode rows alone until all are done.
 * The packed decode rows take the serial run's tokens (teacher forcing), so every step's logits are
 * comparable whatever a near-tie does. Asserted: every step's logits agree within
 * LOGIT_SCALE_TOL x the step's largest |logit| (fp32 CPU backends: GEMMs of other row counts sum
 * in other orders; bf16 GPU backends: their rounding), and tokens are equal where the serial top-2
 * margin exceeds twice that bound.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family/model_load.h"
#include "family/openvla/openvla_model.h"
#include "plan/plan.h"
#include "test_support.h"

#ifndef PACKED_BACKEND
#define PACKED_BACKEND "cpu_generic"
#endif
#ifndef LOGIT_SCALE_TOL
#define LOGIT_SCALE_TOL 1e-4 /* fp32 against fp32 */
#endif
#define FRAMES 3
#define STEPS 7 /* an OpenVLA action: the prefill's token + 6 decode steps */

typedef struct setup {
    vh_model *model;
    vh_plan plan;
    const vh_backend_iface *be;
    vh_executor *ex;
    uint32_t vocab, n_image_tokens, vision_end, n_blocks;
    float *pixels[FRAMES][VH_MAX_TOWERS];
    int32_t *prompt[FRAMES];
    uint32_t prompt_len[FRAMES];
} setup;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void load(const char *model_dir, setup *s)
{
    memset(s, 0, sizeof *s);
    char *dir = vh_test_source_path(model_dir);
    vh_error err;
    ck_assert_msg(vh_model_load(dir, &s->model, &err) == VH_OK, "%s", err.message);
    free(dir);
    const vh_model_desc *d = &s->model->desc;
    s->vocab = d->llm.vocab;
    s->n_image_tokens = d->n_image_tokens;
    s->vision_end = s->model->llm_embed_block;
    s->n_blocks = d->n_blocks;
    vh_plan_request req = {.backends = PACKED_BACKEND, .max_context = d->n_image_tokens + 64,
                           .max_sequences = 2 * FRAMES, .images_per_pass = 1, .llm_split = -1, .n_threads = 2};
    ck_assert_msg(vh_plan_create(s->model, &req, &s->plan, &err) == VH_OK, "%s", err.message);
    ck_assert_uint_eq(s->plan.n_stages, 1);
    s->be = s->plan.stages[0].plugin->iface;
    s->ex = s->plan.stages[0].executor;
    for (uint32_t f = 0; f < FRAMES; f++) {
        for (uint32_t t = 0; t < d->n_towers; t++) {
            const size_t n = 3ull * d->towers[t].image_size * d->towers[t].image_size;
            s->pixels[f][t] = malloc(n * sizeof(float));
            for (size_t i = 0; i < n; i++) s->pixels[f][t][i] = 1.5f * uniform();
        }
        /* BOS, the image's rows, then 5 + 4 f text tokens (ids inside the vocabulary) */
        s->prompt_len[f] = 1 + s->n_image_tokens + 5 + 4 * f;
        s->prompt[f] = malloc(sizeof(int32_t) * s->prompt_len[f]);
        s->prompt[f][0] = 1;
        for (uint32_t i = 0; i < s->n_image_tokens; i++) s->prompt[f][1 + i] = VH_TOKEN_IMAGE;
        for (uint32_t i = 1 + s->n_image_tokens; i < s->prompt_len[f]; i++)
            s->prompt[f][i] = 3 + (int32_t)((i * 7919u + f * 104729u) % (s->vocab - 3));
    }
}

static void unload(setup *s)
{
    for (uint32_t f = 0; f < FRAMES; f++) {
        for (uint32_t t = 0; t < VH_MAX_TOWERS; t++) free(s->pixels[f][t]);
        free(s->prompt[f]);
    }
    vh_plan_destroy(&s->plan);
    vh_model_free(s->model);
}

static void run(const setup *s, const vh_batch *b, uint32_t first, uint32_t end)
{
    char why[512] = "";
    vh_status st = s->be->executor_run(s->ex, b, first, end - first, why, sizeof why);
    ck_assert_msg(st == VH_OK, "executor_run: %s", why);
}

static void vision(const setup *s, uint32_t f)
{
    const float *planes[VH_MAX_TOWERS];
    for (uint32_t t = 0; t < VH_MAX_TOWERS; t++) planes[t] = s->pixels[f][t];
    vh_batch b = {.struct_size = sizeof(vh_batch), .n_images = 1, .pixels = planes};
    run(s, &b, 0, s->vision_end);
}

/* One pass of segments; tokens and segments built by the caller. */
static void llm_pass(const setup *s, const vh_segment *segs, uint32_t n_segs, const int32_t *tokens, uint32_t n_rows,
                     int32_t *out_tokens, float *out_logits)
{
    vh_batch b = {.struct_size = sizeof(vh_batch), .n_segments = n_segs, .segments = segs, .n_rows = n_rows, .tokens = tokens,
                  .out_tokens = out_tokens, .out_logits = out_logits};
    run(s, &b, s->vision_end, s->n_blocks);
}

/* serial: logits [FRAMES][STEPS][vocab], tokens [FRAMES][STEPS] */
static void run_serial(const setup *s, float *logits, int32_t tokens[FRAMES][STEPS])
{
    for (uint32_t f = 0; f < FRAMES; f++) {
        vision(s, f);
        vh_segment seg = {.sequence = f, .n_rows = s->prompt_len[f], .position = 0, .image = 0};
        llm_pass(s, &seg, 1, s->prompt[f], s->prompt_len[f], &tokens[f][0], logits + (size_t)f * STEPS * s->vocab);
        for (uint32_t k = 1; k < STEPS; k++) {
            seg = (vh_segment){.sequence = f, .n_rows = 1, .position = s->prompt_len[f] + k - 1, .image = -1};
            llm_pass(s, &seg, 1, &tokens[f][k - 1], 1, &tokens[f][k],
                     logits + ((size_t)f * STEPS + k) * s->vocab);
        }
    }
}

static void run_packed(const setup *s, const int32_t serial_tokens[FRAMES][STEPS], float *logits,
                       int32_t tokens[FRAMES][STEPS])
{
    const uint32_t max_rows = s->prompt_len[FRAMES - 1] + FRAMES;
    int32_t *rows = malloc(sizeof(int32_t) * max_rows);
    float *pass_logits = malloc(sizeof(float) * FRAMES * s->vocab);
    for (uint32_t p = 0; p < FRAMES + STEPS - 1; p++) {
        vh_segment segs[FRAMES];
        uint32_t who[FRAMES], step[FRAMES], n = 0, n_rows = 0;
        const int decode_first = p % 2 == 1;
        for (int pass_part = 0; pass_part < 2; pass_part++) {
            const int decode_part = pass_part == 0 ? decode_first : !decode_first;
            if (!decode_part && p < FRAMES) { /* frame p's prefill */
                vision(s, p);
                segs[n] = (vh_segment){.sequence = FRAMES + p, .n_rows = s->prompt_len[p], .position = 0, .image = 0};
                memcpy(rows + n_rows, s->prompt[p], sizeof(int32_t) * s->prompt_len[p]);
                n_rows += s->prompt_len[p], who[n] = p, step[n] = 0, n++;
            }
            if (decode_part)
                for (uint32_t f = 0; f < FRAMES && f < p; f++) {
                    const uint32_t k = p - f; /* frame f's step in this pass */
                    if (k >= STEPS) continue;
                    segs[n] = (vh_segment){.sequence = FRAMES + f, .n_rows = 1,
                                           .position = s->prompt_len[f] + k - 1, .image = -1};
                    rows[n_rows++] = serial_tokens[f][k - 1]; /* teacher forcing: serial's token */
                    who[n] = f, step[n] = k, n++;
                }
        }
        int32_t out[FRAMES];
        llm_pass(s, segs, n, rows, n_rows, out, pass_logits);
        for (uint32_t i = 0; i < n; i++) {
            tokens[who[i]][step[i]] = out[i];
            memcpy(logits + ((size_t)who[i] * STEPS + step[i]) * s->vocab, pass_logits + (size_t)i * s->vocab,
                   sizeof(float) * s->vocab);
        }
    }
    free(rows);
    free(pass_logits);
}

static const char *const models[] = {"models/openvla-tiny", "tests/fixtures/models/openvla-tiny-b"};

START_TEST(test_packed_logits_equal_alone)
{
    setup s;
    load(models[_i], &s);
    const size_t n = (size_t)FRAMES * STEPS * s.vocab;
    float *serial = malloc(n * sizeof(float)), *packed = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) packed[i] = NAN; /* every step must be written */
    int32_t serial_tokens[FRAMES][STEPS], packed_tokens[FRAMES][STEPS];
    run_serial(&s, serial, serial_tokens);
    run_packed(&s, serial_tokens, packed, packed_tokens);
    double worst = 0.0;
    uint32_t compared_tokens = 0;
    for (uint32_t f = 0; f < FRAMES; f++)
        for (uint32_t k = 0; k < STEPS; k++) {
            const float *a = serial + ((size_t)f * STEPS + k) * s.vocab, *b = packed + ((size_t)f * STEPS + k) * s.vocab;
            double scale = 0.0, diff = 0.0, top1 = -INFINITY, top2 = -INFINITY;
            for (uint32_t v = 0; v < s.vocab; v++) {
                scale = fmax(scale, fabs(a[v]));
                diff = isnan(b[v]) ? INFINITY : fmax(diff, fabs((double)a[v] - b[v]));
                if (a[v] > top1) top2 = top1, top1 = a[v];
                else if (a[v] > top2) top2 = a[v];
            }
            const double bound = LOGIT_SCALE_TOL * scale;
            ck_assert_msg(diff <= bound, "%s frame %u step %u: packed logits differ by %.3g (bound %.3g)", models[_i], f,
                          k, diff, bound);
            worst = fmax(worst, diff / scale);
            if (top1 - top2 > 2 * bound) {
                ck_assert_msg(packed_tokens[f][k] == serial_tokens[f][k], "%s frame %u step %u: token %d, alone %d",
                              models[_i], f, k, packed_tokens[f][k], serial_tokens[f][k]);
                compared_tokens++;
            }
        }
    ck_assert_uint_gt(compared_tokens, FRAMES * STEPS / 2);
    fprintf(stderr, "%s on %s: packed logits within %.2g of the largest |logit| (alone); %u/%u tokens compared\n",
            models[_i], PACKED_BACKEND, worst, compared_tokens, FRAMES * STEPS);
    free(serial);
    free(packed);
    unload(&s);
}
END_TEST

int main(void)
{
#ifdef SKIP_WITHOUT_DEVICE
    if (!vh_test_backend_usable(PACKED_BACKEND)) return 77;
#else
    if (!vh_test_backend_usable(PACKED_BACKEND)) return 1;
#endif
    Suite *suite = suite_create("packed_logits");
    TCase *tc = tcase_create("packed_logits");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_packed_logits_equal_alone, 0, (int)(sizeof models / sizeof models[0]));
    suite_add_tcase(suite, tc);
    return vh_test_run_suite(suite);
}
