/* Pass requests as batches (lib/pipeline/pass_batch.c), without a model: a decode step and an
 * Orion-like prefill alone, two MindDrive-like frames side by side (segments on each frame's KV
 * slots, hidden rows offset to where each frame's rows start, noise gathered, the batch options
 * following from the requests), the outputs handed back where each request asked, and a part. */
#include <string.h>

#include "pipeline/pass_batch.h"
#include "test_support.h"

#define W 4 /* the LLM's width */

START_TEST(test_decode_step_alone)
{
    vh_error err;
    vh_pass_batch b;
    ck_assert_int_eq(vh_pass_batch_init(&b, 1, 1, 8, W, &err), VH_OK);
    const int32_t token = 42;
    int32_t chosen = -1;
    const vh_pass_request r = {.kind = VH_PASS_DECODE, .n_segments = 1,
                               .segments = {{.n_rows = 1, .position = 300, .rope_delta = -256}}, .tokens = &token,
                               .out_tokens = &chosen};
    vh_pass_batch_clear(&b);
    ck_assert_int_eq(vh_pass_batch_add(&b, &r, 3, 0, &err), VH_OK);
    ck_assert_int_eq(vh_pass_batch_close(&b, &err), VH_OK);
    const vh_batch *x = &b.batch;
    ck_assert_uint_eq(x->options, 0);
    ck_assert_uint_eq(x->n_segments, 1);
    ck_assert_uint_eq(x->segments[0].sequence, 3);
    ck_assert_uint_eq(x->segments[0].position, 300);
    ck_assert_int_eq(x->segments[0].rope_delta, -256);
    ck_assert_int_eq(x->segments[0].image, -1); /* a decode row reads no image */
    ck_assert_uint_eq(x->n_rows, 1);
    ck_assert_int_eq(x->tokens[0], 42);
    ck_assert_ptr_nonnull(x->out_tokens);
    x->out_tokens[0] = 7;
    vh_pass_batch_return(&b);
    ck_assert_int_eq(chosen, 7);
    vh_pass_batch_free(&b);
}
END_TEST

START_TEST(test_prefill_with_given_rows_and_plans)
{
    vh_error err;
    vh_pass_batch b;
    ck_assert_int_eq(vh_pass_batch_init(&b, 2, 2, 16, W, &err), VH_OK);
    const int32_t tokens[3] = {1, VH_TOKEN_IMAGE, 2};
    const float vision[W] = {0};
    const uint32_t readout = 2;
    float feature[W] = {0}, noise[2] = {0.5f, -0.5f}, plan[3] = {0};
    const vh_pass_request r = {.kind = VH_PASS_PREFILL, .n_segments = 1,
                               .segments = {{.n_rows = 3, .vision_rows = vision, .plans = 1}}, .tokens = tokens,
                               .n_hidden_rows = 1, .hidden_rows = &readout, .out_hidden = feature,
                               .plan_noise = noise, .plan_noise_stride = 2, .out_plan = plan, .plan_out_stride = 3};
    vh_pass_batch_clear(&b);
    ck_assert_int_eq(vh_pass_batch_add(&b, &r, 0, 0, &err), VH_OK);
    ck_assert_int_eq(vh_pass_batch_close(&b, &err), VH_OK);
    const vh_batch *x = &b.batch;
    ck_assert_uint_eq(x->options, VH_BATCH_HIDDEN_ROWS | VH_BATCH_SEGMENT_EMBEDS | VH_BATCH_PLAN);
    ck_assert_ptr_eq(x->segments[0].embeds, vision);
    ck_assert_int_eq(x->segments[0].image, -1);
    ck_assert_ptr_null(x->out_tokens);
    ck_assert_uint_eq(x->n_hidden_rows, 1);
    ck_assert_uint_eq(x->hidden_rows[0], 2);
    ck_assert(x->plan_noise[0] == 0.5f && x->plan_noise[1] == -0.5f);
    for (uint32_t j = 0; j < W; j++) x->out_hidden[j] = (float)j;
    for (uint32_t j = 0; j < 3; j++) x->out_plan[j] = 10.0f + j;
    vh_pass_batch_return(&b);
    ck_assert(feature[3] == 3.0f && plan[0] == 10.0f && plan[2] == 12.0f);
    vh_pass_batch_free(&b);
}
END_TEST

/* One MindDrive-like frame: its two rounds (slots 0, 1), LoRA sets 0 and 1, plans on round 1 only,
 * two hidden rows per round. */
typedef struct two_rounds {
    int32_t tokens[5];
    uint32_t hidden_rows[4];
    float hidden[4 * W], noise[2 * 2], plan[2 * 3];
    vh_pass_request r;
} two_rounds;

static void two_rounds_init(two_rounds *f, float noise)
{
    memset(f, 0, sizeof *f);
    for (int i = 0; i < 5; i++) f->tokens[i] = 10 + i;
    const uint32_t rows[4] = {1, 1, 2, 4}; /* round 0 has rows 0..1, round 1 rows 2..4 */
    memcpy(f->hidden_rows, rows, sizeof rows);
    for (int i = 0; i < 4; i++) f->noise[i] = noise + (float)i;
    for (int i = 0; i < 6; i++) f->plan[i] = -1.0f;
    f->r = (vh_pass_request){.kind = VH_PASS_PREFILL, .n_segments = 2,
                             .segments = {{.slot = 0, .n_rows = 2, .adapter_set = 0},
                                          {.slot = 1, .n_rows = 3, .adapter_set = 1, .plans = 1}},
                             .tokens = f->tokens, .n_hidden_rows = 4, .hidden_rows = f->hidden_rows,
                             .out_hidden = f->hidden, .plan_noise = f->noise, .plan_noise_stride = 2,
                             .out_plan = f->plan, .plan_out_stride = 3};
}

START_TEST(test_two_frames_side_by_side)
{
    vh_error err;
    vh_pass_batch b;
    ck_assert_int_eq(vh_pass_batch_init(&b, 2, 4, 10, W, &err), VH_OK);
    two_rounds f[2];
    two_rounds_init(&f[0], 0.0f);
    two_rounds_init(&f[1], 100.0f);
    vh_pass_batch_clear(&b);
    ck_assert_int_eq(vh_pass_batch_add(&b, &f[0].r, 0, 0, &err), VH_OK);
    ck_assert_int_eq(vh_pass_batch_add(&b, &f[1].r, 2, 1, &err), VH_OK);
    ck_assert_int_eq(vh_pass_batch_close(&b, &err), VH_OK);
    const vh_batch *x = &b.batch;
    ck_assert_uint_eq(x->options, VH_BATCH_HIDDEN_ROWS | VH_BATCH_PLAN | VH_BATCH_SEGMENT_ADAPTERS |
                                      VH_BATCH_SEGMENT_PLANS);
    ck_assert_uint_eq(x->n_segments, 4);
    ck_assert_uint_eq(x->n_rows, 10);
    const uint32_t sequence[4] = {0, 1, 2, 3};
    const int32_t image[4] = {0, 0, 1, 1}; /* prefills without given rows: each frame's image */
    for (uint32_t s = 0; s < 4; s++) {
        ck_assert_uint_eq(x->segments[s].sequence, sequence[s]);
        ck_assert_int_eq(x->segments[s].image, image[s]);
        ck_assert_uint_eq(x->segment_adapters[s], s % 2);
        ck_assert_uint_eq(x->segment_plans[s], s % 2);
    }
    ck_assert_int_eq(x->tokens[5], 10);
    ck_assert_uint_eq(x->n_hidden_rows, 8);
    ck_assert_uint_eq(x->hidden_rows[3], 4);
    ck_assert_uint_eq(x->hidden_rows[4], 5 + 1); /* the second frame's rows start at 5 */
    ck_assert_uint_eq(x->hidden_rows[7], 5 + 4);
    ck_assert(x->plan_noise[4] == 100.0f && x->plan_noise[7] == 103.0f);
    /* the backend's outputs: hidden row h is all h; segment s's plan all s */
    for (uint32_t h = 0; h < 8; h++)
        for (uint32_t j = 0; j < W; j++) x->out_hidden[h * W + j] = (float)h;
    for (uint32_t s = 0; s < 4; s++)
        for (uint32_t j = 0; j < 3; j++) x->out_plan[s * 3 + j] = (float)s;
    x->out_plan[0] = 99.0f; /* a segment not planned: its rows are not handed back */
    vh_pass_batch_return(&b);
    ck_assert(f[0].hidden[0] == 0.0f && f[0].hidden[3 * W] == 3.0f);
    ck_assert(f[1].hidden[0] == 4.0f && f[1].hidden[3 * W] == 7.0f);
    ck_assert(f[0].plan[0] == -1.0f && f[0].plan[3] == 1.0f);
    ck_assert(f[1].plan[2] == -1.0f && f[1].plan[5] == 3.0f);

    /* the second frame alone on a stage before the last: its rows, inputs only */
    const vh_batch part = vh_pass_batch_part(&b, 1, 1);
    ck_assert_uint_eq(part.options, VH_BATCH_SEGMENT_ADAPTERS);
    ck_assert_uint_eq(part.n_segments, 2);
    ck_assert_uint_eq(part.segments[0].sequence, 2);
    ck_assert_uint_eq(part.n_rows, 5);
    ck_assert_ptr_eq(part.tokens, x->tokens + 5);
    ck_assert_uint_eq(part.segment_adapters[1], 1);
    ck_assert_ptr_null(part.out_tokens);
    vh_pass_batch_free(&b);
}
END_TEST

START_TEST(test_refusals)
{
    vh_error err;
    vh_pass_batch b;
    ck_assert_int_eq(vh_pass_batch_init(&b, 2, 2, 4, W, &err), VH_OK);
    const int32_t tokens[5] = {0};
    int32_t chosen;
    const vh_pass_request big = {.n_segments = 1, .segments = {{.n_rows = 5}}, .tokens = tokens};
    const vh_pass_request a = {.n_segments = 1, .segments = {{.n_rows = 1}}, .tokens = tokens, .out_tokens = &chosen};
    const vh_pass_request c = {.n_segments = 1, .segments = {{.n_rows = 1}}, .tokens = tokens};
    vh_pass_batch_clear(&b);
    ck_assert_int_eq(vh_pass_batch_close(&b, &err), VH_ERR_INTERNAL);
    ck_assert_int_eq(vh_pass_batch_add(&b, &big, 0, 0, &err), VH_ERR_INTERNAL); /* more rows than room */
    ck_assert_int_eq(vh_pass_batch_add(&b, &a, 0, 0, &err), VH_OK);
    ck_assert_int_eq(vh_pass_batch_add(&b, &c, 1, 0, &err), VH_OK);
    ck_assert_int_eq(vh_pass_batch_add(&b, &c, 2, 0, &err), VH_ERR_INTERNAL); /* a third request */
    ck_assert_int_eq(vh_pass_batch_close(&b, &err), VH_ERR_INTERNAL);          /* tokens for one only */
    ck_assert_msg(strstr(err.message, "different outputs"), "%s", err.message);
    vh_pass_batch_free(&b);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pass_batch");
    TCase *tc = tcase_create("batch");
    tcase_add_test(tc, test_decode_step_alone);
    tcase_add_test(tc, test_prefill_with_given_rows_and_plans);
    tcase_add_test(tc, test_two_frames_side_by_side);
    tcase_add_test(tc, test_refusals);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
