/* The files a model folder may hold besides the weights, through vh_session_create on copies of the
 * bundled tiny model (models/openvla-tiny, whose tokenizer is Llama-2's tokenizer.model) with
 * cpu_generic:
 *   - a folder with tokenizer.json (OpenVLA-7B's form, tests/fixtures/tokenizer/tokenizer_json/
 *     llama2-hf4.tokenizer.json) in place of tokenizer.model gives the same prompt ids and the same
 *     actions as the original folder;
 *   - dataset_statistics.json (what OpenVLA's fine-tuning saves beside config.json) alone, or with
 *     config.json's norm_stats: the union of both, a dataset in both taking the file's statistics;
 *   - vh_frame.unnorm_key (0.4.0): frames naming each of two datasets get each un-normalisation,
 *     checked against a float64 computation of predict_action's formula; an unknown key is refused
 *     at submit; a 0.3.0-sized frame gets the session's key; a session without unnorm_key takes
 *     each frame's (a frame without one, or a 0.3.0-sized one, refused at submit naming the keys),
 *     unless the datasets' actions differ in length (refused at create);
 *   - a tokenizer.json that is there but unusable (a dangling symbolic link, a folder, not JSON,
 *     unreadable) beside a good tokenizer.model is an error naming it and why, never passed over
 *     for tokenizer.model in silence; a dangling tokenizer.model alone is named as such too. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#define MODEL_DIR "models/openvla-tiny"

static char *model_dir;

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static void copy_file(const char *from, const char *to)
{
    size_t size;
    uint8_t *data = vh_test_read_file(from, &size);
    ck_assert_msg(data, "%s: unreadable", from);
    FILE *f = fopen(to, "wb");
    ck_assert_msg(f, "%s: %s", to, strerror(errno));
    ck_assert_uint_eq(fwrite(data, 1, size, f), size);
    ck_assert_int_eq(fclose(f), 0);
    free(data);
}

/* A fresh folder holding the tiny model's files (weights linked, small files copied) except
 * those named in `leave_out` (NULL-terminated). */
static char *copy_model(const char *const *leave_out)
{
    static const char *const files[] = {"config.json", "generation_config.json",
                                        "model-00001-of-00002.safetensors",
                                        "model-00002-of-00002.safetensors",
                                        "model.safetensors.index.json", "preprocessor_config.json",
                                        "special_tokens_map.json", "tokenizer.model",
                                        "tokenizer_config.json"};
    char *dir = vh_test_make_temp_dir();
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        int skip = 0;
        for (const char *const *l = leave_out; l && *l; l++) skip |= strcmp(*l, files[i]) == 0;
        if (skip) continue;
        char *from = join(model_dir, files[i]), *to = join(dir, files[i]);
        if (strstr(files[i], ".safetensors") && !strstr(files[i], "index"))
            ck_assert_msg(symlink(from, to) == 0, "%s: %s", to, strerror(errno));
        else
            copy_file(from, to);
        free(from);
        free(to);
    }
    return dir;
}

static json_t *load_json(const char *path)
{
    json_error_t jerr;
    json_t *j = json_load_file(path, 0, &jerr);
    ck_assert_msg(j, "%s: %s", path, jerr.text);
    return j;
}

static void save_json(json_t *j, const char *dir, const char *name)
{
    char *path = join(dir, name);
    ck_assert_int_eq(json_dump_file(j, path, JSON_INDENT(1)), 0);
    free(path);
}

/* A dataset entry as OpenVLA saves them: action statistics (q01/q99 shifted by `shift`, gripper
 * unmasked), proprio and counts that are ignored. */
static json_t *dataset_entry(double shift, int mask_last)
{
    json_t *q01 = json_array(), *q99 = json_array(), *mask = json_array(), *zeros = json_array();
    for (int i = 0; i < 7; i++) {
        json_array_append_new(q01, json_real(-0.05 * (i + 1) + shift));
        json_array_append_new(q99, json_real(0.07 * (i + 1) + 2 * shift));
        json_array_append_new(mask, json_boolean(i < 6 || mask_last));
        json_array_append_new(zeros, json_real(0));
    }
    return json_pack("{s:{s:o,s:o,s:o},s:{s:o},s:i,s:i}", "action", "q01", q01, "q99", q99, "mask", mask,
                     "proprio", "q01", zeros, "num_transitions", 1000, "num_trajectories", 10);
}

/* predict_action's un-normalisation of one token in float64, written out from the formula:
 * bins = linspace(-1, 1, n_bins); centres = (bins[:-1] + bins[1:]) / 2;
 * bin = clip(vocab - token - 1, 0, n_bins - 2); value = mask ? 0.5 (c + 1)(q99 - q01) + q01 : c. */
static double expected_value(const json_t *entry, int d, int32_t token)
{
    const int n_bins = 256, vocab = 32064 - 64;
    int bin = vocab - token - 1;
    bin = bin < 0 ? 0 : bin > n_bins - 2 ? n_bins - 2 : bin;
    double lo = -1.0 + 2.0 * bin / (n_bins - 1), hi = bin + 1 == n_bins - 1 ? 1.0 : -1.0 + 2.0 * (bin + 1) / (n_bins - 1);
    double c = (lo + hi) / 2;
    const json_t *action = json_object_get(entry, "action");
    const json_t *mask = json_object_get(action, "mask");
    if (mask && !json_is_true(json_array_get(mask, (size_t)d))) return c;
    double q01 = json_number_value(json_array_get(json_object_get(action, "q01"), (size_t)d));
    double q99 = json_number_value(json_array_get(json_object_get(action, "q99"), (size_t)d));
    return 0.5 * (c + 1) * (q99 - q01) + q01;
}

static void check_values(const vh_action *a, const json_t *entry, const char *what)
{
    ck_assert_uint_eq(a->action_dim, 7);
    for (int d = 0; d < 7; d++) {
        double want = expected_value(entry, d, a->token_ids[d]);
        ck_assert_msg(fabs(a->values[d] - want) <= 1e-12 * (1 + fabs(want)),
                      "%s: value %d is %.17g, the formula gives %.17g (token %d)", what, d, a->values[d], want,
                      a->token_ids[d]);
    }
}

static vh_session *open_session(const char *dir, const char *unnorm_key)
{
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = "cpu_generic";
    p.n_threads = 2;
    p.warmup_frames = 0;
    p.unnorm_key = unnorm_key;
    vh_session *s = NULL;
    vh_status st = vh_session_create(&p, &s);
    ck_assert_msg(st == VH_OK, "%s: %s", dir, vh_last_error());
    return s;
}

/* One frame (a fixed synthetic image) through the session; the action's values and ids. */
static void run_frame(vh_session *s, const char *instruction, const char *unnorm_key,
                      vh_action *out, vh_status *submit_status)
{
    enum { W = 32, H = 24 };
    static uint8_t rgb[W * H * 3];
    for (size_t i = 0; i < sizeof rgb; i++) rgb[i] = (uint8_t)(i * 37 % 251);
    vh_frame f;
    vh_frame_init(&f);
    f.rgb = rgb;
    f.width = W;
    f.height = H;
    f.instruction = instruction;
    f.unnorm_key = unnorm_key;
    if (unnorm_key && !strcmp(unnorm_key, "(0.3.0 caller)")) { /* a caller with the 0.3.0 header */
        f.unnorm_key = NULL;
        f.struct_size = offsetof(vh_frame, unnorm_key);
    }
    uint64_t id;
    vh_status st = vh_submit_frame(s, &f, &id);
    if (submit_status) *submit_status = st;
    if (st != VH_OK) return;
    vh_action_init(out);
    ck_assert_msg(vh_poll_action(s, out, 600000) == VH_OK, "%s", vh_session_last_error(s));
    ck_assert_int_eq(out->status, VH_OK);
}

START_TEST(test_tokenizer_json_only)
{
    static const char *const leave_out[] = {"tokenizer.model", NULL};
    char *dir = copy_model(leave_out);
    char *json_from = vh_test_fixture_path("tokenizer/tokenizer_json/llama2-hf4.tokenizer.json");
    char *json_to = join(dir, "tokenizer.json");
    copy_file(json_from, json_to);

    vh_session *a = open_session(model_dir, NULL), *b = open_session(dir, NULL);
    static const char *const instructions[] = {"pick up the red block", "put the spoon in the bowl",
                                               "open the top drawer, then close it!",
                                               "déplace le cube vert 3 cm à gauche"};
    for (size_t i = 0; i < sizeof instructions / sizeof *instructions; i++) {
        int32_t ia[256], ib[256];
        size_t na = 0, nb = 0;
        ck_assert_int_eq(vh_session_prompt_ids(a, instructions[i], ia, 256, &na), VH_OK);
        ck_assert_int_eq(vh_session_prompt_ids(b, instructions[i], ib, 256, &nb), VH_OK);
        ck_assert_msg(na == nb && memcmp(ia, ib, na * sizeof *ia) == 0,
                      "\"%s\": prompt ids differ between tokenizer.model and tokenizer.json",
                      instructions[i]);
    }
    vh_action x, y;
    run_frame(a, instructions[0], NULL, &x, NULL);
    run_frame(b, instructions[0], NULL, &y, NULL);
    ck_assert_uint_eq(x.action_dim, y.action_dim);
    for (uint32_t d = 0; d < x.action_dim; d++) {
        ck_assert_int_eq(x.token_ids[d], y.token_ids[d]);
        ck_assert(x.values[d] == y.values[d]);
    }
    vh_session_destroy(a);
    vh_session_destroy(b);

    /* neither file: a clear error */
    ck_assert_int_eq(unlink(json_to), 0);
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = "cpu_generic";
    p.warmup_frames = 0;
    vh_session *s = NULL;
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_IO);
    ck_assert_msg(strstr(vh_last_error(), "tokenizer.json"), "%s", vh_last_error());
    vh_test_remove_tree(dir);
    free(dir);
    free(json_from);
    free(json_to);
}
END_TEST

/* Both tokenizer files: tokenizer.json is used (what transformers' AutoTokenizer loads). Shown on
 * instructions where Hugging Face tokenizers and sentencepiece give different ids (runs of spaces,
 * a literal U+2581): the folder with both gives the json-only folder's ids, and at least one of
 * them differs from the sentencepiece-only folder's, so the test can tell which file was read. */
START_TEST(test_both_tokenizers_prefer_json)
{
    char *both = copy_model(NULL);
    static const char *const no_model[] = {"tokenizer.model", NULL};
    char *json_only = copy_model(no_model);
    char *json_from = vh_test_fixture_path("tokenizer/tokenizer_json/llama2-hf4.tokenizer.json");
    char *to_both = join(both, "tokenizer.json"), *to_json_only = join(json_only, "tokenizer.json");
    copy_file(json_from, to_both);
    copy_file(json_from, to_json_only);

    vh_session *sp = open_session(model_dir, NULL), *b = open_session(both, NULL), *j = open_session(json_only, NULL);
    static const char *const instructions[] = {"pick  up the   red block", "  put the spoon in the bowl",
                                               "move \xe2\x96\x81 left", "open the drawer    "};
    int differs = 0;
    for (size_t i = 0; i < sizeof instructions / sizeof *instructions; i++) {
        int32_t is[256], ib[256], ij[256];
        size_t ns = 0, nb = 0, nj = 0;
        ck_assert_int_eq(vh_session_prompt_ids(sp, instructions[i], is, 256, &ns), VH_OK);
        ck_assert_int_eq(vh_session_prompt_ids(b, instructions[i], ib, 256, &nb), VH_OK);
        ck_assert_int_eq(vh_session_prompt_ids(j, instructions[i], ij, 256, &nj), VH_OK);
        ck_assert_msg(nb == nj && memcmp(ib, ij, nb * sizeof *ib) == 0,
                      "\"%s\": with both files the ids are not tokenizer.json's", instructions[i]);
        differs |= ns != nj || memcmp(is, ij, ns * sizeof *is) != 0;
    }
    ck_assert_msg(differs, "no instruction tells the two tokenizers apart: the test proves nothing");
    vh_session_destroy(sp);
    vh_session_destroy(b);
    vh_session_destroy(j);
    vh_test_remove_tree(both);
    vh_test_remove_tree(json_only);
    free(both);
    free(json_only);
    free(json_from);
    free(to_both);
    free(to_json_only);
}
END_TEST

/* config.json without norm_stats, dataset_statistics.json with them: the same actions as the
 * original; neither: a clear error. */
START_TEST(test_dataset_statistics_only)
{
    static const char *const leave_out[] = {"config.json", NULL};
    char *dir = copy_model(leave_out);
    char *config_path = join(model_dir, "config.json");
    json_t *config = load_json(config_path);
    json_t *stats = json_deep_copy(json_object_get(config, "norm_stats"));
    json_object_set_new(json_object_get(stats, "bridge_orig"), "num_transitions", json_integer(5));
    json_object_del(config, "norm_stats");
    save_json(config, dir, "config.json");
    save_json(stats, dir, "dataset_statistics.json");

    vh_session *a = open_session(model_dir, NULL), *b = open_session(dir, NULL);
    vh_action x, y;
    run_frame(a, "pick up the red block", NULL, &x, NULL);
    run_frame(b, "pick up the red block", NULL, &y, NULL);
    for (uint32_t d = 0; d < x.action_dim; d++) {
        ck_assert_int_eq(x.token_ids[d], y.token_ids[d]);
        ck_assert(x.values[d] == y.values[d]);
    }
    check_values(&y, json_object_get(stats, "bridge_orig"), "dataset_statistics.json only");
    vh_session_info info;
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(b, &info), VH_OK);
    ck_assert_str_eq(info.unnorm_key, "bridge_orig");
    vh_session_destroy(a);
    vh_session_destroy(b);

    char *stats_path = join(dir, "dataset_statistics.json");
    ck_assert_int_eq(unlink(stats_path), 0);
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = "cpu_generic";
    p.warmup_frames = 0;
    vh_session *s = NULL;
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_BAD_MODEL);
    ck_assert_msg(strstr(vh_last_error(), "dataset_statistics.json"), "%s", vh_last_error());

    /* malformed: a clear error naming the file */
    FILE *f = fopen(stats_path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"bridge_orig\": {\"action\": {\"q01\": [0], \"q99\": \"x\"}}}", f);
    fclose(f);
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_BAD_MODEL);
    ck_assert_msg(strstr(vh_last_error(), "dataset_statistics.json"), "%s", vh_last_error());

    json_decref(config);
    json_decref(stats);
    vh_test_remove_tree(dir);
    free(dir);
    free(config_path);
    free(stats_path);
}
END_TEST

/* config.json's norm_stats (bridge_orig) and a dataset_statistics.json with a new dataset and
 * other statistics for bridge_orig: both datasets usable, bridge_orig with the file's numbers. */
START_TEST(test_dataset_statistics_and_norm_stats)
{
    char *dir = copy_model(NULL);
    json_t *stats = json_object();
    json_object_set_new(stats, "my_robot", dataset_entry(0.01, 1));
    json_object_set_new(stats, "bridge_orig", dataset_entry(-0.02, 0));
    save_json(stats, dir, "dataset_statistics.json");

    vh_session *s = open_session(dir, "bridge_orig");
    vh_action a;
    run_frame(s, "pick up the red block", NULL, &a, NULL);
    check_values(&a, json_object_get(stats, "bridge_orig"), "bridge_orig from dataset_statistics.json");
    run_frame(s, "pick up the red block", "my_robot", &a, NULL);
    check_values(&a, json_object_get(stats, "my_robot"), "my_robot");
    vh_session_destroy(s);
    s = open_session(dir, "my_robot");
    vh_session_destroy(s);
    json_decref(stats);
    vh_test_remove_tree(dir);
    free(dir);
}
END_TEST

/* A copy of the tiny model whose config.json's norm_stats holds a second dataset ("second") beside
 * bridge_orig: *config is that config (json_decref it), and the folder's path is returned
 * (two_dataset_folder_free removes and frees both). */
static char *two_dataset_folder(json_t **config)
{
    static const char *const leave_out[] = {"config.json", NULL};
    char *dir = copy_model(leave_out);
    char *config_path = join(model_dir, "config.json");
    *config = load_json(config_path);
    free(config_path);
    json_object_set_new(json_object_get(*config, "norm_stats"), "second", dataset_entry(0.03, 0));
    save_json(*config, dir, "config.json");
    return dir;
}

static void two_dataset_folder_free(char *dir, json_t *config)
{
    json_decref(config);
    vh_test_remove_tree(dir);
    free(dir);
}

/* Two datasets in config.json's norm_stats; frames choose one each. */
START_TEST(test_frame_unnorm_key)
{
    json_t *config;
    char *dir = two_dataset_folder(&config);
    json_t *ns = json_object_get(config, "norm_stats");

    vh_session *s = open_session(dir, "bridge_orig");
    const char *keys[] = {NULL, "bridge_orig", "second", "(0.3.0 caller)"};
    const char *datasets[] = {"bridge_orig", "bridge_orig", "second", "bridge_orig"};
    vh_action actions[4];
    for (int i = 0; i < 4; i++) {
        run_frame(s, "put the spoon in the bowl", keys[i], &actions[i], NULL);
        check_values(&actions[i], json_object_get(ns, datasets[i]), keys[i] ? keys[i] : "NULL");
    }
    /* the same tokens, other statistics: the values differ where the mask applies */
    ck_assert_mem_eq(actions[1].token_ids, actions[2].token_ids, 7 * sizeof(int32_t));
    ck_assert(actions[1].values[0] != actions[2].values[0]);

    vh_action unused;
    vh_status st;
    run_frame(s, "put the spoon in the bowl", "bridge", &unused, &st);
    ck_assert_int_eq(st, VH_ERR_UNNORM_KEY);
    ck_assert_msg(strstr(vh_session_last_error(s), "bridge") && strstr(vh_session_last_error(s), "second"),
                  "%s", vh_session_last_error(s));
    vh_session_destroy(s);
    two_dataset_folder_free(dir, config);
}
END_TEST

/* Two datasets and no session key: each frame names its own. */
START_TEST(test_frame_unnorm_key_without_session_key)
{
    json_t *config;
    char *dir = two_dataset_folder(&config);
    json_t *ns = json_object_get(config, "norm_stats");

    vh_session *s = open_session(dir, NULL);
    vh_session_info info;
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
    ck_assert_str_eq(info.unnorm_key, ""); /* none for the session */
    const char *keys[] = {"bridge_orig", "second"};
    for (int i = 0; i < 2; i++) {
        vh_action a;
        run_frame(s, "put the spoon in the bowl", keys[i], &a, NULL);
        check_values(&a, json_object_get(ns, keys[i]), keys[i]);
    }
    const char *without[] = {NULL, "(0.3.0 caller)", ""};
    for (int i = 0; i < 3; i++) {
        vh_action unused;
        vh_status st;
        run_frame(s, "put the spoon in the bowl", without[i], &unused, &st);
        ck_assert_int_eq(st, VH_ERR_UNNORM_KEY);
        ck_assert_msg(strstr(vh_last_error(), "bridge_orig") && strstr(vh_last_error(), "second"), "%s",
                      vh_last_error());
    }
    vh_session_destroy(s);

    /* datasets whose actions differ in length cannot share a session's action shape */
    json_t *six = dataset_entry(0.03, 0);
    json_t *action = json_object_get(six, "action");
    for (const char *const *k = (const char *const[]){"q01", "q99", "mask", NULL}; *k; k++)
        json_array_remove(json_object_get(action, *k), 6);
    json_object_set_new(ns, "second", six);
    save_json(config, dir, "config.json");
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = "cpu_generic";
    s = (vh_session *)1;
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_UNNORM_KEY);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(vh_last_error(), "second") && strstr(vh_last_error(), "6"), "%s", vh_last_error());
    p.unnorm_key = "second"; /* with a key, either opens */
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    vh_session_destroy(s);

    two_dataset_folder_free(dir, config);
}
END_TEST

static void expect_refused(const char *dir, vh_status status, const char *what, const char *why)
{
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = "cpu_generic";
    p.warmup_frames = 0;
    vh_session *s = (vh_session *)1;
    ck_assert_msg(vh_session_create(&p, &s) == status, "%s: '%s'", what, vh_last_error());
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(vh_last_error(), "tokenizer.") && strstr(vh_last_error(), why), "%s: '%s'", what,
                  vh_last_error());
}

START_TEST(test_unusable_tokenizer_json_is_an_error)
{
    char *dir = copy_model(NULL); /* with a good tokenizer.model */
    char *json = join(dir, "tokenizer.json"), *model = join(dir, "tokenizer.model");
    ck_assert_int_eq(symlink("no-such-tokenizer.json", json), 0); /* made here: a fixture cannot hold it */
    expect_refused(dir, VH_ERR_IO, "dangling link", "tokenizer.json: a dangling symbolic link (to "
                   "'no-such-tokenizer.json', which does not exist)");
    ck_assert_int_eq(unlink(json), 0);
    ck_assert_int_eq(mkdir(json, 0700), 0);
    expect_refused(dir, VH_ERR_IO, "a folder", "tokenizer.json: is a directory");
    ck_assert_int_eq(rmdir(json), 0);
    FILE *f = fopen(json, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"model\": [", f);
    ck_assert_int_eq(fclose(f), 0);
    expect_refused(dir, VH_ERR_BAD_MODEL, "not JSON", "tokenizer.json: not valid JSON");
    ck_assert_int_eq(chmod(json, 0), 0);
    if (access(json, R_OK) != 0) /* root reads it anyway */
        expect_refused(dir, VH_ERR_IO, "unreadable", "tokenizer.json: cannot open: Permission denied");
    ck_assert_int_eq(unlink(json), 0);
    /* no tokenizer.json: tokenizer.model, as before */
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = dir;
    p.backends = "cpu_generic";
    p.warmup_frames = 0;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s", vh_last_error());
    vh_session_destroy(s);
    /* and a dangling tokenizer.model alone is named as such, not "neither file" */
    ck_assert_int_eq(unlink(model), 0);
    ck_assert_int_eq(symlink("gone/tokenizer.model", model), 0);
    expect_refused(dir, VH_ERR_IO, "dangling tokenizer.model", "tokenizer.model: a dangling symbolic link");
    vh_test_remove_tree(dir);
    free(dir);
    free(json);
    free(model);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("model_folder_files");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_tokenizer_json_only);
    tcase_add_test(tc, test_both_tokenizers_prefer_json);
    tcase_add_test(tc, test_unusable_tokenizer_json_is_an_error);
    tcase_add_test(tc, test_dataset_statistics_only);
    tcase_add_test(tc, test_dataset_statistics_and_norm_stats);
    tcase_add_test(tc, test_frame_unnorm_key);
    tcase_add_test(tc, test_frame_unnorm_key_without_session_key);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    model_dir = vh_test_source_path(MODEL_DIR);
    int rc = vh_test_run_suite(suite());
    free(model_dir);
    return rc;
}
