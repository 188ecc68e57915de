/* vh_session_prompt_rounds and vh_session_prompt_ids through the public API, for each family,
 * against the prompt ids of the released code in the fixtures: Orion's (tests/fixtures/orion,
 * LLaVA's tokenizer_image_token under transformers 4.31), MindDrive's two rounds
 * (tests/fixtures/minddrive, the released preprocess_qwen2 pipeline) and OpenVLA's (predict_action,
 * tests/fixtures/reference); the image positions where those references put the image (-200) and
 * where that puts the read-out token; short buffers, NULLs, bad commands, wrong struct sizes, and
 * every failure's message. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#define IMAGE_TOKEN_INDEX -200 /* LLaVA's placeholder for the image in the references' ids */
#define ROOM 256

static json_t *load_json(const char *relative)
{
    char *path = vh_test_fixture_path(relative);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    ck_assert_msg(root, "%s: %s", path, jerr.text);
    free(path);
    return root;
}

static vh_session *open_session(const char *model_dir)
{
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model_dir;
    p.backends = "cpu_generic";
    p.n_threads = 1;
    p.warmup_frames = 0;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s: %s", model_dir, vh_last_error());
    return s;
}

static vh_session *open_fixture_session(const char *relative)
{
    char *dir = vh_test_fixture_path(relative);
    vh_session *s = open_session(dir);
    free(dir);
    return s;
}

/* Rounds with ROOM ids each, in `ids` [n][ROOM] filled with a marker. */
static void setup_rounds(vh_prompt_round *rounds, int32_t (*ids)[ROOM], uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        vh_prompt_round_init(&rounds[i]);
        for (int k = 0; k < ROOM; k++) ids[i][k] = -7;
        rounds[i].ids = ids[i];
        rounds[i].ids_capacity = ROOM;
    }
}

/* A round's ids and image position against a reference's ids, which hold -200 where the image goes
 * (and, with `dropped_tail`, that many ids after the last the model is fed). */
static void check_against_reference(const vh_prompt_round *r, const json_t *want, size_t dropped_tail,
                                    const char *what)
{
    size_t image = json_array_size(want);
    for (size_t i = 0; i < json_array_size(want); i++)
        if (json_integer_value(json_array_get(want, i)) == IMAGE_TOKEN_INDEX) image = i;
    ck_assert_msg(image < json_array_size(want), "%s: the reference has no image", what);
    ck_assert_msg(r->image_position == (int64_t)image, "%s: image position %lld, the reference's %zu", what,
                  (long long)r->image_position, image);
    ck_assert_msg(r->n_ids + 1 + dropped_tail == json_array_size(want), "%s: %zu ids, the reference %zu", what, r->n_ids,
                  json_array_size(want));
    for (size_t i = 0, k = 0; k < r->n_ids; i++) {
        if (i == image) continue;
        ck_assert_msg(r->ids[k] == json_integer_value(json_array_get(want, i)), "%s: id %zu is %d, the reference's %lld",
                      what, k, r->ids[k], (long long)json_integer_value(json_array_get(want, i)));
        k++;
    }
    ck_assert_int_eq(r->ids[r->n_ids], -7); /* nothing written past the round's ids */
}

/* The position of `id` in the rows the model runs (the vision rows counted), or -1. */
static int64_t row_of(const vh_prompt_round *r, int32_t id)
{
    for (size_t i = 0; i < r->n_ids; i++)
        if (r->ids[i] == id) return (int64_t)i < r->image_position ? (int64_t)i : (int64_t)(i + r->n_image_rows);
    return -1;
}

static vh_status rounds_for_command(vh_session *s, int32_t command, vh_prompt_round *rounds, uint32_t capacity,
                                    uint32_t *n)
{
    vh_prompt_request req;
    vh_prompt_request_init(&req);
    req.command = command;
    return vh_session_prompt_rounds(s, &req, rounds, capacity, n);
}

/* A failure: `status`, and a message holding `needle` in vh_last_error and vh_session_last_error. */
static void check_failure(vh_session *s, vh_status got, vh_status want, const char *needle)
{
    ck_assert_msg(got == want, "status %d (%s), wanted %d; message: %s", got, vh_status_string(got), want,
                  vh_last_error());
    ck_assert_msg(strstr(vh_last_error(), needle), "'%s' not in '%s'", needle, vh_last_error());
    if (s) ck_assert_msg(strstr(vh_session_last_error(s), needle), "'%s' not in '%s'", needle, vh_session_last_error(s));
}

START_TEST(test_orion)
{
    json_t *ref = load_json("orion/cases.json");
    json_t *llm = load_json("orion/llm_ref.json");
    vh_session *s = open_fixture_session("orion/model");
    vh_prompt_round rounds[2];
    int32_t ids[2][ROOM];
    setup_rounds(rounds, ids, 2);
    uint32_t n = 0;
    ck_assert_int_eq(rounds_for_command(s, VH_COMMAND_NONE, rounds, 2, &n), VH_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(rounds[0].name, "prompt");
    ck_assert_uint_eq(rounds[0].n_image_rows, (uint32_t)json_integer_value(json_object_get(ref, "n_vision_tokens")));
    ck_assert_int_eq(rounds[1].n_ids, 0); /* the second was not touched */
    ck_assert_int_eq(rounds[1].image_position, -1);
    /* transformers 4.31's ids (the llm stage's) and the built cases' */
    check_against_reference(&rounds[0], json_object_get(llm, "prompt_ids"), 0, "orion llm_ref.json");
    check_against_reference(&rounds[0], json_object_get(ref, "prompt_ids"), 0, "orion cases.json");
    ck_assert_int_eq(rounds[0].image_position, json_integer_value(json_object_get(ref, "image_index")));
    /* the image where the released code put it: <waypoint_ego> (32000) at its position of 599 */
    ck_assert_int_eq(row_of(&rounds[0], 32000), json_integer_value(json_object_get(ref, "waypoint_position")));
    ck_assert_int_eq(rounds[0].n_ids + rounds[0].n_image_rows,
                     json_integer_value(json_object_get(ref, "sequence_length")));

    /* every command: the same prompt */
    for (int32_t command = 0; command < 6; command++) {
        vh_prompt_round r;
        int32_t other[1][ROOM];
        setup_rounds(&r, other, 1);
        ck_assert_int_eq(rounds_for_command(s, command, &r, 1, &n), VH_OK);
        ck_assert_uint_eq(r.n_ids, rounds[0].n_ids);
        ck_assert_int_eq(memcmp(r.ids, rounds[0].ids, sizeof(int32_t) * r.n_ids), 0);
        ck_assert_int_eq(r.image_position, rounds[0].image_position);
    }
    const int32_t bad[] = {6, -2, 1000, INT32_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = 99;
        check_failure(s, rounds_for_command(s, bad[i], rounds, 2, &n), VH_ERR_INVALID_ARGUMENT, "command");
        ck_assert_uint_eq(n, 0);
    }

    /* one round: vh_session_prompt_ids answers with it (the instruction ignored) */
    int32_t flat[ROOM];
    size_t count = 0;
    ck_assert_int_eq(vh_session_prompt_ids(s, "ignored", flat, ROOM, &count), VH_OK);
    ck_assert_uint_eq(count, rounds[0].n_ids);
    ck_assert_int_eq(memcmp(flat, rounds[0].ids, sizeof(int32_t) * count), 0);
    vh_session_destroy(s);
    json_decref(ref);
    json_decref(llm);
}
END_TEST

START_TEST(test_minddrive)
{
    json_t *ref = load_json("minddrive/cases.json");
    const json_t *c = json_array_get(json_object_get(ref, "cases"), 0);
    const json_t *special = json_object_get(ref, "special_tokens");
    vh_session *s = open_fixture_session("minddrive/model");
    vh_prompt_round rounds[3];
    int32_t ids[3][ROOM];
    setup_rounds(rounds, ids, 3);
    uint32_t n = 0;
    ck_assert_int_eq(rounds_for_command(s, (int32_t)json_integer_value(json_object_get(c, "command")), rounds, 3, &n),
                     VH_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(rounds[0].name, "decision");
    ck_assert_str_eq(rounds[1].name, "action");
    /* the decision round without its final speed token (read one row before it, never run) */
    const json_t *decision = json_object_get(c, "decision_prompt_ids");
    const json_t *last = json_array_get(decision, json_array_size(decision) - 1);
    ck_assert_int_eq(json_integer_value(last), json_integer_value(json_object_get(special, "<maintain_moderate_speed>")));
    check_against_reference(&rounds[0], decision, 1, "minddrive decision");
    check_against_reference(&rounds[1], json_object_get(c, "action_prompt_ids"), 0, "minddrive action");
    ck_assert_int_eq(rounds[0].image_position, json_integer_value(json_object_get(c, "decision_image_index")));
    ck_assert_int_eq(rounds[1].image_position, json_integer_value(json_object_get(c, "action_image_index")));
    for (int r = 0; r < 2; r++)
        ck_assert_uint_eq(rounds[r].n_image_rows, (uint32_t)json_integer_value(json_object_get(ref, "n_vision_tokens")));
    ck_assert_int_eq(rounds[2].n_ids, 0);
    /* the released layout: the action round 637 rows, its read-outs its last two */
    ck_assert_uint_eq(rounds[1].n_ids + rounds[1].n_image_rows, 637);
    ck_assert_int_eq(row_of(&rounds[1], (int32_t)json_integer_value(json_object_get(special, "<path_waypoint_ego>"))),
                     636);
    ck_assert_int_eq(row_of(&rounds[1], (int32_t)json_integer_value(json_object_get(special, "<waypoint_ego>"))), 634);

    /* room for one round: the count of both, the first filled */
    vh_prompt_round one;
    int32_t one_ids[1][ROOM];
    setup_rounds(&one, one_ids, 1);
    check_failure(s, rounds_for_command(s, 0, &one, 1, &n), VH_ERR_INVALID_ARGUMENT, "room for 1 of the prompt's 2");
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(one.name, "decision");
    ck_assert_uint_eq(one.n_ids, rounds[0].n_ids);
    ck_assert_int_eq(memcmp(one.ids, rounds[0].ids, sizeof(int32_t) * one.n_ids), 0);
    /* no room at all (rounds may be NULL): the count */
    n = 0;
    check_failure(s, rounds_for_command(s, 0, NULL, 0, &n), VH_ERR_INVALID_ARGUMENT, "room for 0");
    ck_assert_uint_eq(n, 2);
    /* the action round's ids short by one: every count filled, what fits copied, nothing past it */
    vh_prompt_round two[2];
    int32_t two_ids[2][ROOM];
    setup_rounds(two, two_ids, 2);
    two[1].ids_capacity = rounds[1].n_ids - 1;
    check_failure(s, rounds_for_command(s, 0, two, 2, &n), VH_ERR_INVALID_ARGUMENT, "rounds[1] ('action') has room for");
    ck_assert_uint_eq(two[0].n_ids, rounds[0].n_ids);
    ck_assert_uint_eq(two[1].n_ids, rounds[1].n_ids);
    ck_assert_int_eq(two[1].image_position, rounds[1].image_position);
    ck_assert_int_eq(memcmp(two[1].ids, rounds[1].ids, sizeof(int32_t) * (rounds[1].n_ids - 1)), 0);
    ck_assert_int_eq(two_ids[1][rounds[1].n_ids - 1], -7);
    /* ids NULL and no room: the sizes, as a query */
    setup_rounds(two, two_ids, 2);
    two[0].ids = two[1].ids = NULL;
    two[0].ids_capacity = two[1].ids_capacity = 0;
    check_failure(s, rounds_for_command(s, 0, two, 2, &n), VH_ERR_INVALID_ARGUMENT, "rounds[0] ('decision')");
    ck_assert_uint_eq(two[0].n_ids, rounds[0].n_ids);
    ck_assert_uint_eq(two[1].n_ids, rounds[1].n_ids);

    /* every command the same prompts; others refused */
    for (int32_t command = VH_COMMAND_NONE; command < 6; command++) {
        setup_rounds(two, two_ids, 2);
        ck_assert_int_eq(rounds_for_command(s, command, two, 2, &n), VH_OK);
        for (int r = 0; r < 2; r++) {
            ck_assert_uint_eq(two[r].n_ids, rounds[r].n_ids);
            ck_assert_int_eq(memcmp(two[r].ids, rounds[r].ids, sizeof(int32_t) * two[r].n_ids), 0);
        }
    }
    check_failure(s, rounds_for_command(s, 6, rounds, 3, &n), VH_ERR_INVALID_ARGUMENT, "command is 6");
    check_failure(s, rounds_for_command(s, -5, rounds, 3, &n), VH_ERR_INVALID_ARGUMENT, "command is -5");

    /* two rounds: vh_session_prompt_ids points to vh_session_prompt_rounds */
    int32_t flat[ROOM];
    size_t count = 0;
    check_failure(s, vh_session_prompt_ids(s, "x", flat, ROOM, &count), VH_ERR_UNSUPPORTED, "vh_session_prompt_rounds");
    ck_assert(strstr(vh_last_error(), "decision, action"));
    vh_session_destroy(s);
    json_decref(ref);
}
END_TEST

START_TEST(test_openvla)
{
    json_t *ref = load_json("reference/openvla-tiny.json");
    char *dir = vh_test_source_path("models/openvla-tiny");
    vh_session *s = open_session(dir);
    free(dir);
    vh_session_info info;
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
    const json_t *cases = json_object_get(ref, "cases");
    ck_assert_uint_gt(json_array_size(cases), 0);
    for (size_t i = 0; i < json_array_size(cases) && i < 4; i++) {
        const json_t *c = json_array_get(cases, i);
        const char *text = json_string_value(json_object_get(c, "instruction"));
        vh_prompt_request req;
        vh_prompt_request_init(&req);
        req.instruction = text;
        req.command = 3; /* ignored by OpenVLA, as in its frames */
        vh_prompt_round r;
        int32_t ids[1][ROOM];
        setup_rounds(&r, ids, 1);
        uint32_t n = 0;
        ck_assert_int_eq(vh_session_prompt_rounds(s, &req, &r, 1, &n), VH_OK);
        ck_assert_uint_eq(n, 1);
        ck_assert_str_eq(r.name, "prompt");
        const json_t *want = json_object_get(c, "prompt_ids");
        ck_assert_uint_eq(r.n_ids, json_array_size(want));
        for (size_t k = 0; k < r.n_ids; k++) ck_assert_int_eq(r.ids[k], json_integer_value(json_array_get(want, k)));
        ck_assert_int_eq(r.image_position, 1); /* predict_action: the patches after BOS */
        ck_assert_uint_eq(r.n_image_rows, info.n_prompt_image_tokens);
        /* vh_session_prompt_ids as before */
        int32_t flat[ROOM];
        size_t count = 0;
        ck_assert_int_eq(vh_session_prompt_ids(s, text, flat, ROOM, &count), VH_OK);
        ck_assert_uint_eq(count, r.n_ids);
        ck_assert_int_eq(memcmp(flat, r.ids, sizeof(int32_t) * count), 0);
    }
    vh_prompt_request req;
    vh_prompt_request_init(&req);
    vh_prompt_round r;
    int32_t ids[1][ROOM];
    setup_rounds(&r, ids, 1);
    uint32_t n = 0;
    check_failure(s, vh_session_prompt_rounds(s, &req, &r, 1, &n), VH_ERR_INVALID_ARGUMENT, "instruction is NULL");
    vh_session_destroy(s);
    json_decref(ref);
}
END_TEST

/* The request and rounds as callers get them wrong: NULLs, struct sizes; then after shutdown. */
START_TEST(test_misuse)
{
    vh_session *s = open_fixture_session("orion/model");
    vh_prompt_request req;
    vh_prompt_request_init(&req);
    ck_assert_uint_eq(req.struct_size, sizeof req);
    ck_assert_int_eq(req.command, VH_COMMAND_NONE);
    ck_assert_ptr_null(req.instruction);
    vh_prompt_round r[2];
    int32_t ids[2][ROOM];
    setup_rounds(r, ids, 2);
    ck_assert_uint_eq(r[0].struct_size, sizeof r[0]);
    ck_assert_int_eq(r[0].image_position, -1);
    uint32_t n = 0;

    check_failure(NULL, vh_session_prompt_rounds(NULL, &req, r, 2, &n), VH_ERR_INVALID_ARGUMENT, "session is NULL");
    check_failure(s, vh_session_prompt_rounds(s, NULL, r, 2, &n), VH_ERR_INVALID_ARGUMENT, "request is NULL");
    check_failure(s, vh_session_prompt_rounds(s, &req, r, 2, NULL), VH_ERR_INVALID_ARGUMENT, "n_rounds is NULL");
    check_failure(s, vh_session_prompt_rounds(s, &req, NULL, 2, &n), VH_ERR_INVALID_ARGUMENT, "rounds");

    /* the request's struct_size: 0, too small, longer with a dirty tail */
    union {
        vh_prompt_request req;
        unsigned char bytes[sizeof(vh_prompt_request) + 16];
    } big;
    memset(&big, 0, sizeof big);
    const size_t sizes[] = {0, sizeof req - 1, offsetof(vh_prompt_request, command)};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        vh_prompt_request bad = req;
        bad.struct_size = sizes[i];
        check_failure(s, vh_session_prompt_rounds(s, &bad, r, 2, &n), VH_ERR_STRUCT_SIZE, "vh_prompt_request");
    }
    vh_prompt_request_init_sized(&big.req, sizeof big);
    ck_assert_int_eq(vh_session_prompt_rounds(s, &big.req, r, 2, &n), VH_OK); /* a newer header's, zero tail */
    big.bytes[sizeof big.req + 3] = 1;
    check_failure(s, vh_session_prompt_rounds(s, &big.req, r, 2, &n), VH_ERR_STRUCT_SIZE, "vh_prompt_request");

    /* the rounds' struct_size: 0, mismatched, too small */
    setup_rounds(r, ids, 2);
    r[1].struct_size = 0;
    check_failure(s, vh_session_prompt_rounds(s, &req, r, 2, &n), VH_ERR_STRUCT_SIZE, "rounds[1]");
    setup_rounds(r, ids, 2);
    r[0].struct_size = 8;
    check_failure(s, vh_session_prompt_rounds(s, &req, r, 1, &n), VH_ERR_STRUCT_SIZE, "rounds[0]");
    /* ids NULL with room claimed */
    setup_rounds(r, ids, 2);
    r[0].ids = NULL;
    check_failure(s, vh_session_prompt_rounds(s, &req, r, 2, &n), VH_ERR_INVALID_ARGUMENT, "rounds[0].ids is NULL");
    /* nothing was written by the refused calls */
    setup_rounds(r, ids, 2);
    r[1].struct_size = 0;
    vh_session_prompt_rounds(s, &req, r, 2, &n);
    ck_assert_uint_eq(r[0].n_ids, 0);
    ck_assert_int_eq(ids[0][0], -7);

    /* after shutdown: refused at once */
    ck_assert_int_eq(vh_session_shutdown(s), VH_OK);
    setup_rounds(r, ids, 2);
    check_failure(s, vh_session_prompt_rounds(s, &req, r, 2, &n), VH_ERR_SHUTDOWN, "shut down");
    vh_session_destroy(s);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("prompt_rounds");
    TCase *tc = tcase_create("prompt_rounds");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_orion);
    tcase_add_test(tc, test_minddrive);
    tcase_add_test(tc, test_openvla);
    tcase_add_test(tc, test_misuse);
    suite_add_tcase(suite, tc);
    return vh_test_run_suite(suite);
}
