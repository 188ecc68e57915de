/* A MindDrive folder that is broken in one way at a time (the tiny fixture model, copied and
 * edited): vh_session_create refuses it with the status and a message that names what is wrong,
 * and leaves nothing behind (the sanitizer builds run this too). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

static const char *const files[] = {"config.json", "tokenizer.json", "model.safetensors", "tokenizer_config.json",
                                    "added_tokens.json"};

static void write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f && fwrite(data, 1, size, f) == size, "%s", path);
    fclose(f);
}

/* A copy of the fixture model in a fresh folder. */
static char *copy_model(void)
{
    char *dir = vh_test_make_temp_dir(), *src = vh_test_fixture_path("minddrive/model");
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char from[4096], to[4096];
        snprintf(from, sizeof from, "%s/%s", src, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        size_t size = 0;
        uint8_t *data = vh_test_read_file(from, &size);
        ck_assert_msg(data, "%s", from);
        write_file(to, data, size);
        free(data);
    }
    free(src);
    return dir;
}

static json_t *load_json(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    ck_assert_msg(j, "%s: %s", path, e.text);
    return j;
}

static void save_json(const char *dir, const char *name, json_t *j)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    ck_assert_int_eq(json_dump_file(j, path, JSON_INDENT(1)), 0);
    json_decref(j);
}

static void expect_refused(const char *dir, vh_status want, const char *in_message)
{
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = "cpu_generic";
    p.n_threads = 1;
    vh_session *s = NULL;
    const vh_status st = vh_session_create(&p, &s);
    ck_assert_msg(st == want, "status %d (%s), wanted %d; message: %s", st, vh_status_string(st), want,
                  vh_last_error());
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(vh_last_error(), in_message), "message '%s' lacks '%s'", vh_last_error(), in_message);
}

/* The prompt's text of one round, edited. */
static void set_round_text(const char *dir, const char *round, const char *text)
{
    json_t *c = load_json(dir, "config.json");
    json_object_set_new(json_object_get(json_object_get(c, "prompt"), round), "text", json_string(text));
    save_json(dir, "config.json", c);
}

START_TEST(test_broken_folders)
{
    char *dir;
    /* the fixture itself loads */
    dir = copy_model();
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = "cpu_generic";
    p.n_threads = 1;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    vh_session_destroy(s);
    vh_test_remove_tree(dir);
    free(dir);

    for (int k = 0; k < 11; k++) {
        dir = copy_model();
        char path[4096];
        json_t *c = k < 9 ? load_json(dir, "config.json") : NULL;
        vh_status want = VH_ERR_BAD_MODEL;
        const char *msg = "";
        switch (k) {
        case 0: /* merged experts: not runnable as two LoRA sets */
            json_object_set_new(json_object_get(c, "lora"), "merged", json_true());
            want = VH_ERR_UNSUPPORTED, msg = "--lora keep";
            break;
        case 1: /* an untied head */
            json_object_set_new(json_object_get(c, "text_config"), "tie_word_embeddings", json_false());
            want = VH_ERR_UNSUPPORTED, msg = "tie_word_embeddings";
            break;
        case 2: /* an expert the checkpoint does not hold */
            json_array_set_new(json_object_get(json_object_get(c, "lora"), "experts"), 1, json_string("other_expert"));
            json_object_set_new(json_object_get(json_object_get(c, "prompt"), "action"), "expert",
                                json_string("other_expert"));
            msg = "lora_A.other_expert";
            break;
        case 3: /* a round's expert that is not one of the two */
            json_object_set_new(json_object_get(json_object_get(c, "prompt"), "decision"), "expert",
                                json_string("nobody"));
            msg = "is not one of lora.experts";
            break;
        case 4: /* six speed tokens for seven speed modes */
            json_array_remove(json_object_get(c, "speed_tokens"), 6);
            msg = "speed_tokens";
            break;
        case 5: /* a command mapped past the path modes */
            json_array_set_new(json_object_get(c, "path_mode_of_command"), 2, json_integer(6));
            msg = "path_mode_of_command[2]";
            break;
        case 6: /* a planner whose GRU layers do not split the hidden size */
            json_object_set_new(json_object_get(json_object_get(c, "planners"), "path"), "gru_hidden", json_integer(15));
            msg = "planners.path.";
            break;
        case 7: /* no image marker in a round */
            json_decref(c), c = NULL;
            set_round_text(dir, "action", "Here is the planning trajectory <waypoint_ego> <path_waypoint_ego>");
            msg = "image marker";
            break;
        case 8: /* the decision round must end with its (never run) speed token */
            json_decref(c), c = NULL;
            set_round_text(dir, "decision", "<image>\nThe car should be ");
            msg = "must end with one of the speed tokens";
            break;
        case 9: /* a tokenizer without MindDrive's added tokens */
        {
            json_t *t = load_json(dir, "tokenizer.json");
            json_t *added = json_object_get(t, "added_tokens"), *kept = json_array();
            size_t i;
            json_t *v;
            json_array_foreach(added, i, v)
                if (json_integer_value(json_object_get(v, "id")) < 4003) json_array_append(kept, v);
            json_object_set_new(t, "added_tokens", kept);
            save_json(dir, "tokenizer.json", t);
            msg = "has no added token '<maintain_moderate_speed>'";
            break;
        }
        case 10: /* the weights cut short */
        {
            snprintf(path, sizeof path, "%s/model.safetensors", dir);
            size_t size = 0;
            uint8_t *data = vh_test_read_file(path, &size);
            write_file(path, data, size / 2);
            free(data);
            msg = "model.safetensors";
            break;
        }
        }
        if (c) save_json(dir, "config.json", c);
        expect_refused(dir, want, msg);
        vh_test_remove_tree(dir);
        free(dir);
    }
    /* no tokenizer.json at all */
    dir = copy_model();
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    ck_assert_int_eq(remove(path), 0);
    expect_refused(dir, VH_ERR_IO, "tokenizer.json");
    /* a dangling link in its place: named as such */
    ck_assert_int_eq(symlink("no-such-tokenizer.json", path), 0);
    expect_refused(dir, VH_ERR_IO, "tokenizer.json: a dangling symbolic link (to 'no-such-tokenizer.json'");
    vh_test_remove_tree(dir);
    free(dir);
}
END_TEST

int main(void)
{
    if (!vh_test_backend_usable("cpu_generic")) return 77;
    Suite *s = suite_create("minddrive_bad_models");
    TCase *tc = tcase_create("minddrive");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_broken_folders);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
