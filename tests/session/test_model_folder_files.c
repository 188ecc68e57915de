/* The files a model folder may hold besides the weights, through vh_session_create on copies of the
 * bundled tiny model (models/openvla-tiny, whose tokenizer is Llama-2's tokenizer.model) with
 * cpu_generic:
 *   - a folder with tokenizer.json (OpenVLA-7B's form, tests/fixtures/tokenizer/tokenizer_json/
 *     llama2-hf4.tokenizer.json) in place of tokenizer.model gives the same prompt ids and the same
 *     actions as the original folder. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#ifdef HAVE_FRAME_UNNORM_KEY
    f.unnorm_key = unnorm_key;
#else
    (void)unnorm_key;
#endif
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

static Suite *suite(void)
{
    Suite *s = suite_create("model_folder_files");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_tokenizer_json_only);
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
