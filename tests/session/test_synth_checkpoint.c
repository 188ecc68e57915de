/* tools/vh-synth-checkpoint: the folders it writes load and run through the public API, the
 * safetensors files are well formed, the same seed gives byte-identical files (whatever the thread
 * count) and another seed different weights, the full-size plan has OpenVLA-7B's names, shapes and
 * parameter count, and failures (bad usage, existing output, a write that fails part way) leave
 * nothing behind.
 *
 * The generated models are small (--vision tiny, 2 LLM layers, --llm-hidden 256: ~38 MB) so the
 * test stays fast; the 32064-row embedding and LM head keep the real vocabulary.
 *
 * --family orion: a small Orion folder (2 layers, hidden 256, the real 32001-row embedding) has the
 * converter's config.json layout (the same keys in the same order as the converted fixture
 * tests/fixtures/orion/model, the same prompt), loads as family orion, and a session turns zero and
 * seeded vision tokens with command 3 into a finite 6-point trajectory; the full-size plan has
 * Orion's names, shapes and parameter count. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "family/model_load.h"
#include "family/orion/orion_family.h"
#include "synth_support.h"
#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#ifndef VH_SYNTH_CHECKPOINT_EXE
#error "VH_SYNTH_CHECKPOINT_EXE must name the vh-synth-checkpoint program"
#endif

#define VOCAB 32064
#define WAIT_MS 120000

static const char *const small_files[] = {"config.json", "preprocessor_config.json", "generation_config.json",
                                          "special_tokens_map.json", "tokenizer_config.json", "tokenizer.model"};

/* Generate a small model into tmp/name with extra options; fails the test unless it worked. */
static char *generate(const char *tmp, const char *name, const char *const *extra)
{
    char *out = join(tmp, name), *log = join(tmp, "log.txt");
    char *tok = vh_test_fixture_path("tokenizer/llama2-tokenizer.model");
    const char *args[32] = {"--out", out, "--tokenizer", tok, "--llm-layers", "2", "--vision", "tiny",
                            "--llm-hidden", "256"};
    int n = 10;
    for (int i = 0; extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    int rc = run_synth(log, 0, args);
    char *text = read_text(log);
    ck_assert_msg(rc == 0, "vh-synth-checkpoint exited with %d:\n%s", rc, text);
    ck_assert_msg(strstr(text, "wrote: OpenVLA") && strstr(text, "time "), "unexpected report:\n%s", text);
    free(text);
    char partial[4096];
    snprintf(partial, sizeof partial, "%s.partial", out);
    ck_assert_msg(!exists(partial), "%s left behind", partial);
    free(log);
    free(tok);
    return out;
}

/* ---------------------------------------------------------------------------------------------
 * Checks of the files
 */

/* One safetensors file: header length, space padding to 8, __metadata__ format pt, tensors in name
 * order with contiguous offsets that cover the file. Returns the number of tensors; adds their
 * bytes to *data_bytes. */
static size_t check_safetensors(const char *path, const char *want_dtype, uint64_t *data_bytes)
{
    size_t size = 0;
    uint8_t *bytes = vh_test_read_file(path, &size);
    ck_assert_msg(bytes && size >= 8, "%s: unreadable", path);
    uint64_t n = 0;
    for (int b = 7; b >= 0; b--) n = (n << 8) | bytes[b];
    ck_assert_msg(n % 8 == 0 && 8 + n <= size, "%s: header length %llu", path, (unsigned long long)n);
    ck_assert_msg(bytes[8] == '{', "%s: header does not start with '{'", path);
    size_t end = 8 + (size_t)n;
    while (bytes[end - 1] == ' ') end--;
    ck_assert_msg(bytes[end - 1] == '}' && 8 + n - end < 8, "%s: bad header padding", path);
    json_error_t jerr;
    json_t *h = json_loadb((const char *)bytes + 8, (size_t)n, JSON_REJECT_DUPLICATES | JSON_PRESERVE_ORDER, &jerr);
    ck_assert_msg(h, "%s: header: %s", path, jerr.text);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(h, "__metadata__"), "format")), "pt");
    const char *key, *prev = NULL;
    json_t *v;
    uint64_t offset = 0;
    size_t count = 0;
    json_object_foreach(h, key, v) {
        if (!strcmp(key, "__metadata__")) continue;
        ck_assert_msg(!prev || strcmp(prev, key) < 0, "%s: '%s' after '%s': not sorted", path, key, prev);
        prev = key;
        ck_assert_str_eq(json_string_value(json_object_get(v, "dtype")), want_dtype);
        json_t *off = json_object_get(v, "data_offsets"), *shape = json_object_get(v, "shape");
        uint64_t numel = 1;
        for (size_t i = 0; i < json_array_size(shape); i++)
            numel *= (uint64_t)json_integer_value(json_array_get(shape, i));
        uint64_t a = (uint64_t)json_integer_value(json_array_get(off, 0));
        uint64_t b = (uint64_t)json_integer_value(json_array_get(off, 1));
        ck_assert_msg(a == offset, "%s: '%s' starts at %llu, not %llu", path, key, (unsigned long long)a,
                      (unsigned long long)offset);
        ck_assert_msg(b - a == numel * (strcmp(want_dtype, "F32") ? 2 : 4), "%s: '%s' size", path, key);
        offset = b;
        count++;
    }
    ck_assert_msg(8 + n + offset == size, "%s: data ends at %llu, file has %zu bytes", path,
                  (unsigned long long)(8 + n + offset), size);
    *data_bytes += offset;
    json_decref(h);
    free(bytes);
    return count;
}

static json_t *load_json(const char *dir, const char *name)
{
    char *path = join(dir, name);
    json_error_t jerr;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    ck_assert_msg(j, "%s: %s", path, jerr.text);
    free(path);
    return j;
}

static void check_config(const char *dir, const char *torch_dtype)
{
    json_t *c = load_json(dir, "config.json");
    ck_assert_str_eq(json_string_value(json_object_get(c, "model_type")), "openvla");
    ck_assert_str_eq(json_string_value(json_object_get(c, "arch_specifier")), "no-align+fused-gelu-mlp");
    ck_assert_str_eq(json_string_value(json_object_get(c, "torch_dtype")), torch_dtype);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(c, "timm_model_ids"), 0)),
                     "vit_large_patch14_reg4_dinov2.lvd142m");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(c, "timm_model_ids"), 1)),
                     "vit_so400m_patch14_siglip_224");
    json_t *tc = json_object_get(c, "text_config");
    ck_assert_int_eq(json_integer_value(json_object_get(tc, "vocab_size")), VOCAB);
    ck_assert_int_eq(json_integer_value(json_object_get(tc, "pad_token_id")), 32000);
    ck_assert_int_eq(json_integer_value(json_object_get(tc, "num_hidden_layers")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(tc, "hidden_size")), 256);
    ck_assert_str_eq(json_string_value(json_object_get(tc, "torch_dtype")), torch_dtype);
    ck_assert_int_eq(json_array_size(json_object_get(c, "vision_backbone_overrides")), 2);
    json_t *act = json_object_get(json_object_get(json_object_get(c, "norm_stats"), "bridge_orig"), "action");
    ck_assert_int_eq(json_array_size(json_object_get(act, "q01")), 7);
    ck_assert_int_eq(json_array_size(json_object_get(act, "q99")), 7);
    ck_assert(json_is_false(json_array_get(json_object_get(act, "mask"), 6)));
    json_decref(c);
}

static void check_small_files(const char *dir)
{
    for (size_t i = 0; i < sizeof small_files / sizeof small_files[0]; i++) {
        char *p = join(dir, small_files[i]);
        ck_assert_msg(exists(p), "%s is missing", p);
        free(p);
    }
    char *tok = vh_test_fixture_path("tokenizer/llama2-tokenizer.model"), *copy = join(dir, "tokenizer.model");
    size_t na = 0, nb = 0;
    uint8_t *a = vh_test_read_file(tok, &na), *b = vh_test_read_file(copy, &nb);
    ck_assert(a && b && na == nb && memcmp(a, b, na) == 0);
    free(a);
    free(b);
    free(tok);
    free(copy);
}

static int files_equal(const char *a_dir, const char *b_dir, const char *name)
{
    char *a = join(a_dir, name), *b = join(b_dir, name);
    size_t na = 0, nb = 0;
    uint8_t *x = vh_test_read_file(a, &na), *y = vh_test_read_file(b, &nb);
    ck_assert_msg(x && y, "%s or %s unreadable", a, b);
    int eq = na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    free(a);
    free(b);
    return eq;
}

/* ---------------------------------------------------------------------------------------------
 * One frame through the public API
 */
static void run_one_frame(const char *model)
{
    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model;
    p.backends = "cpu_generic";
    p.n_threads = 2;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s: %s", model, vh_last_error());
    vh_session_info info;
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
    ck_assert_uint_eq(info.n_llm_layers, 2);
    ck_assert_uint_eq(info.n_prompt_image_tokens, 256);
    ck_assert_uint_eq(info.action_dim, 7);

    enum { W = 96, H = 64 };
    uint8_t *rgb = malloc(W * H * 3);
    ck_assert_ptr_nonnull(rgb);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *px = rgb + 3 * (y * W + x);
            px[0] = (uint8_t)(x * 255 / (W - 1));
            px[1] = (uint8_t)(y * 255 / (H - 1));
            px[2] = (uint8_t)((x * 7 + y * 13) & 0xff);
        }
    vh_frame f;
    vh_frame_init(&f);
    f.rgb = rgb;
    f.width = W;
    f.height = H;
    f.instruction = "pick up the red block";
    f.tag = 42;
    ck_assert_msg(vh_submit_frame(s, &f, NULL) == VH_OK, "%s", vh_session_last_error(s));
    vh_action a;
    vh_action_init(&a);
    ck_assert_msg(vh_poll_action(s, &a, WAIT_MS) == VH_OK, "%s", vh_session_last_error(s));
    ck_assert_msg(a.status == VH_OK, "action status %d: %s", a.status, vh_session_last_error(s));
    ck_assert_uint_eq(a.tag, 42);
    ck_assert_uint_eq(a.action_dim, 7);
    for (uint32_t i = 0; i < a.action_dim; i++) {
        ck_assert_msg(a.token_ids[i] >= 0 && a.token_ids[i] < VOCAB, "token %d", a.token_ids[i]);
        ck_assert_msg(isfinite(a.values[i]), "value %u is %g", i, a.values[i]);
    }
    vh_session_destroy(s);
    free(rgb);
}

/* ---------------------------------------------------------------------------------------------
 * Tests
 */
START_TEST(bf16_single_file_runs)
{
    char *tmp = vh_test_make_temp_dir();
    const char *extra[] = {"--dtype", "bf16", "--seed", "7", NULL};
    char *model = generate(tmp, "m", extra);
    check_small_files(model);
    check_config(model, "bfloat16");
    char *index = join(model, "model.safetensors.index.json"), *single = join(model, "model.safetensors");
    ck_assert_msg(!exists(index), "an index for a single file");
    uint64_t data = 0;
    ck_assert_uint_gt(check_safetensors(single, "BF16", &data), 100);
    run_one_frame(model);
    free(index);
    free(single);
    free(model);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

START_TEST(f16_sharded_runs)
{
    char *tmp = vh_test_make_temp_dir();
    const char *extra[] = {"--dtype", "f16", "--shard-bytes", "6M", "--seed", "3", "--no-sync", NULL};
    char *model = generate(tmp, "m", extra);
    check_small_files(model);
    check_config(model, "float16");
    char *single = join(model, "model.safetensors");
    ck_assert_msg(!exists(single), "model.safetensors next to shards");
    json_t *index = load_json(model, "model.safetensors.index.json");
    json_t *map = json_object_get(index, "weight_map");
    uint64_t total = (uint64_t)json_integer_value(json_object_get(json_object_get(index, "metadata"), "total_size"));
    /* every shard named, well formed, holding exactly the tensors the map gives it */
    size_t n_shards = 0, n_tensors = 0;
    uint64_t data = 0;
    for (int s = 1;; s++) {
        char name[64], want[64];
        snprintf(name, sizeof name, "model-%05d-of-", s);
        const char *key;
        json_t *v;
        const char *file = NULL;
        size_t listed = 0;
        json_object_foreach(map, key, v) {
            if (!strncmp(json_string_value(v), name, strlen(name))) {
                file = json_string_value(v);
                listed++;
            }
        }
        if (!file) break;
        snprintf(want, sizeof want, "%s%05d.safetensors", name, 0);
        ck_assert_uint_eq(strlen(file), strlen(want));
        char *path = join(model, file);
        ck_assert_uint_eq(check_safetensors(path, "F16", &data), listed);
        n_tensors += listed;
        n_shards++;
        free(path);
    }
    ck_assert_uint_ge(n_shards, 3);
    ck_assert_uint_eq(n_tensors, json_object_size(map));
    ck_assert_uint_eq(data, total);
    char last[64];
    snprintf(last, sizeof last, "model-%05zu-of-%05zu.safetensors", n_shards, n_shards);
    char *last_path = join(model, last);
    ck_assert_msg(exists(last_path), "%s missing", last);
    free(last_path);
    json_decref(index);
    run_one_frame(model);
    free(single);
    free(model);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

/* Every file of a_dir is in b_dir; returns how many safetensors files differ, and fails when any
 * other file differs or the folders hold different names. */
static int compare_folders(const char *a_dir, const char *b_dir)
{
    DIR *d = opendir(a_dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    int n_a = 0, n_b = 0, weights = 0, weights_differ = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        n_a++;
        int is_weights = strstr(e->d_name, ".safetensors") && !strstr(e->d_name, ".json");
        int eq = files_equal(a_dir, b_dir, e->d_name);
        if (is_weights) {
            weights++;
            weights_differ += !eq;
        } else {
            ck_assert_msg(eq, "%s differs between %s and %s", e->d_name, a_dir, b_dir);
        }
    }
    closedir(d);
    ck_assert_ptr_nonnull(d = opendir(b_dir));
    while ((e = readdir(d))) n_b += e->d_name[0] != '.';
    closedir(d);
    ck_assert_int_eq(n_a, n_b);
    ck_assert_int_ge(weights, 3);
    return weights_differ;
}

START_TEST(same_seed_same_bytes)
{
    char *tmp = vh_test_make_temp_dir();
    const char *one_thread[] = {"--seed", "11", "--threads", "1", "--shard-bytes", "16M", "--no-sync", NULL};
    const char *three_threads[] = {"--seed", "11", "--threads", "3", "--shard-bytes", "16M", "--no-sync", NULL};
    const char *other_seed[] = {"--seed", "12", "--threads", "3", "--shard-bytes", "16M", "--no-sync", NULL};
    char *a = generate(tmp, "a", one_thread), *b = generate(tmp, "b", three_threads);
    char *c = generate(tmp, "c", other_seed);
    ck_assert_msg(compare_folders(a, b) == 0, "the weights depend on the thread count");
    int n = compare_folders(a, c); /* the config, index and tokenizer do not depend on the seed */
    char *index = join(a, "model.safetensors.index.json");
    json_t *j = json_load_file(index, 0, NULL);
    ck_assert_ptr_nonnull(j);
    /* every shard differs: count the distinct files of the weight map */
    const char *key;
    json_t *v;
    int shards = 0;
    char seen[16][64] = {{0}};
    json_object_foreach(json_object_get(j, "weight_map"), key, v) {
        int found = 0;
        for (int i = 0; i < shards; i++) found |= !strcmp(seen[i], json_string_value(v));
        if (!found && shards < 16) snprintf(seen[shards++], sizeof seen[0], "%s", json_string_value(v));
    }
    ck_assert_int_ge(shards, 3);
    ck_assert_msg(n == shards, "%d of %d shards are the same for seeds 11 and 12", shards - n, shards);
    json_decref(j);
    free(index);
    free(a);
    free(b);
    free(c);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

/* The default (full-size) plan, without writing it: OpenVLA-7B's names, shapes and counts. */
START_TEST(full_size_plan)
{
    char *tmp = vh_test_make_temp_dir(), *log = join(tmp, "plan.txt");
    const char *args[] = {"--list", NULL};
    ck_assert_int_eq(run_synth(log, 0, args), 0);
    char *text = read_text(log);
    static const char *const want[] = {
        "parameters 7541237184 (vision 730911680, projector 71385600, llm 6738939904)\n",
        "tensors 982\n",
        "tensor bytes 15082474368 ",
        " vision_backbone.featurizer.cls_token BF16 [1, 1, 1024] ",
        " vision_backbone.featurizer.reg_token BF16 [1, 4, 1024] ",
        " vision_backbone.featurizer.pos_embed BF16 [1, 256, 1024] ",
        " vision_backbone.featurizer.patch_embed.proj.weight BF16 [1024, 3, 14, 14] ",
        " vision_backbone.featurizer.blocks.23.ls1.scale_factor BF16 [1024] ",
        " vision_backbone.featurizer.blocks.23.ls2.scale_factor BF16 [1024] ",
        " vision_backbone.featurizer.blocks.0.attn.qkv.weight BF16 [3072, 1024] ",
        " vision_backbone.featurizer.blocks.0.mlp.fc1.weight BF16 [4096, 1024] ",
        " vision_backbone.featurizer.norm.weight BF16 [1024] ",
        " vision_backbone.fused_featurizer.pos_embed BF16 [1, 256, 1152] ",
        " vision_backbone.fused_featurizer.blocks.26.mlp.fc1.weight BF16 [4304, 1152] ",
        " vision_backbone.fused_featurizer.blocks.26.mlp.fc2.weight BF16 [1152, 4304] ",
        " vision_backbone.fused_featurizer.attn_pool.latent BF16 [1, 1, 1152] ",
        " vision_backbone.fused_featurizer.attn_pool.kv.weight BF16 [2304, 1152] ",
        " projector.fc1.weight BF16 [8704, 2176] ",
        " projector.fc1.bias BF16 [8704] ",
        " projector.fc2.weight BF16 [4096, 8704] ",
        " projector.fc3.weight BF16 [4096, 4096] ",
        " projector.fc3.bias BF16 [4096] ",
        " language_model.model.embed_tokens.weight BF16 [32064, 4096] ",
        " language_model.model.layers.31.self_attn.q_proj.weight BF16 [4096, 4096] ",
        " language_model.model.layers.31.self_attn.o_proj.weight BF16 [4096, 4096] ",
        " language_model.model.layers.31.mlp.gate_proj.weight BF16 [11008, 4096] ",
        " language_model.model.layers.31.mlp.down_proj.weight BF16 [4096, 11008] ",
        " language_model.model.layers.31.post_attention_layernorm.weight BF16 [4096] ",
        " language_model.model.norm.weight BF16 [4096] ",
        " language_model.lm_head.weight BF16 [32064, 4096] ",
        "model-00004-of-00004.safetensors",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(text, want[i]), "the plan lacks '%s'", want[i]);
    ck_assert_msg(!strstr(text, "language_model.model.layers.32."), "a 33rd layer");
    ck_assert_msg(!strstr(text, " vision_backbone.featurizer.blocks.24."), "a 25th DINOv2 block");
    ck_assert_msg(!strstr(text, "fused_featurizer.blocks.27."), "a 28th SigLIP block");
    ck_assert_msg(!strstr(text, "model-00005-of"), "more than 4 shards of 4 GiB");
    free(text);
    unlink(log);
    free(log);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

START_TEST(failures_leave_nothing)
{
    char *tmp = vh_test_make_temp_dir(), *log = join(tmp, "log.txt"), *out = join(tmp, "m");
    char *partial = join(tmp, "m.partial"), *tok = vh_test_fixture_path("tokenizer/llama2-tokenizer.model");
    char *missing = join(tmp, "no-such-tokenizer.model");

    /* bad usage: status 2 */
    const char *bad_dtype[] = {"--out", out, "--tokenizer", tok, "--dtype", "f8", NULL};
    ck_assert_int_eq(run_synth(log, 0, bad_dtype), 2);
    const char *no_out[] = {"--tokenizer", tok, NULL};
    ck_assert_int_eq(run_synth(log, 0, no_out), 2);
    ck_assert(!exists(out) && !exists(partial));
    /* an unknown option is called unknown, not "needs a value" */
    const char *unknown[] = {"--ot", out, "--tokenizer", tok, NULL};
    ck_assert_int_eq(run_synth(log, 0, unknown), 2);
    char *said = read_text(log);
    ck_assert_msg(strstr(said, "unknown option --ot") && !strstr(said, "needs a value"), "%s", said);
    free(said);
    const char *version[] = {"--version", NULL};
    ck_assert_int_eq(run_synth(log, 0, version), 0);
    said = read_text(log);
    char expected[64];
    snprintf(expected, sizeof expected, "vh-synth-checkpoint (vlahybrid %s)\n", vh_version());
    ck_assert_str_eq(said, expected);
    free(said);
    ck_assert(!exists(out) && !exists(partial));

    /* no tokenizer: status 1 before anything is created */
    const char *no_tok[] = {"--out", out, "--tokenizer", missing, "--vision", "tiny", "--llm-layers", "1",
                            "--llm-hidden", "64", NULL};
    ck_assert_int_eq(run_synth(log, 0, no_tok), 1);
    ck_assert(!exists(out) && !exists(partial));

    /* a write that fails part way (file size limit of 4 MB, as a full disk would): status 1, the
     * message names the file, and neither the folder nor DIR.partial is left */
    const char *small[] = {"--out", out, "--tokenizer", tok, "--vision", "tiny", "--llm-layers", "2",
                           "--llm-hidden", "256", "--no-sync", NULL};
    ck_assert_int_eq(run_synth(log, 4u << 20, small), 1);
    char *text = read_text(log);
    ck_assert_msg(strstr(text, "model.safetensors") && strstr(text, "File too large"), "message:\n%s", text);
    free(text);
    ck_assert_msg(!exists(out) && !exists(partial), "a failed run left files");

    /* an existing output folder is refused and kept */
    ck_assert_int_eq(mkdir(out, 0755), 0);
    ck_assert_int_eq(run_synth(log, 0, small), 1);
    text = read_text(log);
    ck_assert_msg(strstr(text, "already exists"), "message:\n%s", text);
    free(text);
    ck_assert(exists(out) && !exists(partial));

    free(log);
    free(out);
    free(partial);
    free(tok);
    free(missing);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * --family orion
 */
#define ORION_HIDDEN 256
#define ORION_TOKENS 529
/* 2 layers of 9, the embedding and the final norm; the planner: 4 + 3 + 3 linear layers and 4 GRU layers of 4 */
#define ORION_SMALL_TENSORS (2 * 9 + 2 + 2 * 10 + 16)

static char *generate_orion(const char *tmp, const char *name, const char *const *extra)
{
    char *out = join(tmp, name), *log = join(tmp, "log.txt");
    char *tok = vh_test_fixture_path("tokenizer/llama2-tokenizer.model");
    const char *args[32] = {"--family", "orion", "--out", out, "--tokenizer", tok, "--llm-layers", "2",
                            "--llm-hidden", "256", "--no-sync"};
    int n = 11;
    for (int i = 0; extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    int rc = run_synth(log, 0, args);
    char *text = read_text(log);
    ck_assert_msg(rc == 0, "vh-synth-checkpoint --family orion exited with %d:\n%s", rc, text);
    ck_assert_msg(strstr(text, "wrote: Orion, LLM 2 layers x 256") && strstr(text, "time "), "unexpected report:\n%s",
                  text);
    free(text);
    free(log);
    free(tok);
    return out;
}

/* The keys of a and b, in order, are the same. */
static void same_keys(const json_t *a, const json_t *b, const char *what)
{
    ck_assert_msg(json_is_object(a) && json_is_object(b), "%s: not an object", what);
    void *ia = json_object_iter((json_t *)a), *ib = json_object_iter((json_t *)b);
    for (; ia && ib; ia = json_object_iter_next((json_t *)a, ia), ib = json_object_iter_next((json_t *)b, ib))
        ck_assert_msg(!strcmp(json_object_iter_key(ia), json_object_iter_key(ib)), "%s: key '%s' where the converter "
                      "writes '%s'", what, json_object_iter_key(ia), json_object_iter_key(ib));
    ck_assert_msg(!ia && !ib, "%s: a different number of keys than the converter writes", what);
}

static json_t *load_ordered(const char *path)
{
    json_error_t jerr;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES | JSON_PRESERVE_ORDER, &jerr);
    ck_assert_msg(j, "%s: %s", path, jerr.text);
    return j;
}

static void check_orion_config(const char *dir, const char *dtype)
{
    char *path = join(dir, "config.json"), *fixture = vh_test_fixture_path("orion/model/config.json");
    json_t *c = load_ordered(path), *f = load_ordered(fixture);
    same_keys(c, f, "config.json");
    static const char *const sections[] = {"text_config", "lora", "planner", "prompt", "special_tokens"};
    for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++)
        same_keys(json_object_get(c, sections[i]), json_object_get(f, sections[i]), sections[i]);
    ck_assert_str_eq(json_string_value(json_object_get(c, "model_type")), "orion");
    ck_assert_str_eq(json_string_value(json_object_get(c, "dtype")), dtype);
    json_t *t = json_object_get(c, "text_config"), *pl = json_object_get(c, "planner");
    ck_assert_int_eq(int_at(t, "hidden_size"), ORION_HIDDEN);
    ck_assert_int_eq(int_at(t, "num_hidden_layers"), 2);
    ck_assert_int_eq(int_at(t, "vocab_size"), 32001);
    ck_assert_int_eq(int_at(t, "base_vocab_size"), 32000);
    ck_assert_int_eq(int_at(t, "max_position_embeddings"), 4096);
    ck_assert(json_real_value(json_object_get(t, "rms_norm_eps")) == 1e-5);
    ck_assert(json_is_true(json_object_get(json_object_get(c, "lora"), "merged")));
    ck_assert_str_eq(json_string_value(json_object_get(pl, "type")), "vae_gru");
    ck_assert_int_eq(int_at(pl, "latent_dim"), 32);
    ck_assert_int_eq(int_at(pl, "ego_fut_mode"), 6);
    ck_assert_int_eq(int_at(pl, "fut_ts"), 6);
    ck_assert_int_eq(int_at(pl, "gru_layers"), 4);
    ck_assert_int_eq(int_at(pl, "gru_hidden"), ORION_HIDDEN / 4);
    ck_assert_int_eq(int_at(pl, "in_channels"), ORION_HIDDEN);
    ck_assert_int_eq(int_at(c, "vision_tokens"), ORION_TOKENS);
    ck_assert(json_equal(json_object_get(c, "vision_token_groups"), json_object_get(f, "vision_token_groups")));
    ck_assert(json_equal(json_object_get(c, "prompt"), json_object_get(f, "prompt"))); /* the exact text */
    ck_assert(json_equal(json_object_get(c, "special_tokens"), json_object_get(f, "special_tokens")));
    json_decref(c);
    json_decref(f);
    free(path);
    free(fixture);
    json_t *added = load_json(dir, "added_tokens.json");
    ck_assert_int_eq(json_object_size(added), 1);
    ck_assert_int_eq(int_at(added, "<waypoint_ego>"), 32000);
    json_decref(added);
    static const char *const files[] = {"tokenizer.model", "tokenizer_config.json", "special_tokens_map.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *p = join(dir, files[i]);
        ck_assert_msg(exists(p), "%s is missing", p);
        free(p);
    }
    char *pre = join(dir, "preprocessor_config.json");
    ck_assert_msg(!exists(pre), "an OpenVLA preprocessor_config.json in an Orion folder");
    free(pre);
}

/* vh_model_load says family orion; a session makes a finite 6-point trajectory from zero tokens and
 * from seeded ones (command 3), and the two differ. */
static void run_orion_frames(const char *model)
{
    vh_model *m = NULL;
    vh_error err;
    ck_assert_msg(vh_model_load(model, &m, &err) == VH_OK, "%s: %s", model, err.message);
    ck_assert_ptr_eq(m->family, &vh_family_orion);
    vh_model_free(m);

    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model;
    p.backends = "cpu_generic";
    p.n_threads = 2;
    p.seed = 5;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s: %s", model, vh_last_error());
    vh_session_info info;
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
    ck_assert_uint_eq(info.n_llm_layers, 2);
    ck_assert_uint_eq(info.n_prompt_image_tokens, ORION_TOKENS);

    const size_t n = (size_t)ORION_TOKENS * ORION_HIDDEN;
    float *tokens = calloc(n, sizeof *tokens), first[12];
    ck_assert_ptr_nonnull(tokens);
    for (int k = 0; k < 2; k++) {
        if (k == 1)
            for (size_t i = 0; i < n; i++) tokens[i] = normal_at(i);
        vh_frame f;
        vh_frame_init(&f);
        f.vision_tokens = tokens;
        f.n_vision_tokens = ORION_TOKENS;
        f.vision_token_width = ORION_HIDDEN;
        f.command = 3;
        f.tag = 40 + (uint64_t)k;
        ck_assert_msg(vh_submit_frame(s, &f, NULL) == VH_OK, "%s", vh_session_last_error(s));
        vh_action a;
        vh_action_init(&a);
        ck_assert_msg(vh_poll_action(s, &a, WAIT_MS) == VH_OK, "%s", vh_session_last_error(s));
        ck_assert_msg(a.status == VH_OK, "action status %d: %s", a.status, vh_session_last_error(s));
        ck_assert_uint_eq(a.tag, 40 + (uint64_t)k);
        ck_assert_int_eq(a.kind, VH_ACTION_TRAJECTORY);
        ck_assert_uint_eq(a.n_points, 6);
        for (uint32_t i = 0; i < 2 * a.n_points; i++)
            ck_assert_msg(isfinite(a.trajectory[i]), "frame %d: trajectory[%u] is %g", k, i, a.trajectory[i]);
        uint32_t count = 0;
        const float *modes = vh_action_extra(&a, "mode_trajectories", &count);
        ck_assert_msg(modes && count == 72, "mode_trajectories: %u floats", count);
        for (uint32_t i = 0; i < count; i++) ck_assert(isfinite(modes[i]));
        ck_assert_ptr_nonnull(vh_action_extra(&a, "mu", &count));
        ck_assert_uint_eq(count, 32);
        if (k == 0) memcpy(first, a.trajectory, sizeof first);
        else ck_assert_msg(memcmp(first, a.trajectory, sizeof first), "the tokens do not change the trajectory");
    }
    free(tokens);
    vh_session_destroy(s);
}

START_TEST(orion_bf16_runs)
{
    char *tmp = vh_test_make_temp_dir();
    const char *extra[] = {"--seed", "9", NULL};
    char *model = generate_orion(tmp, "orion", extra);
    check_orion_config(model, "bfloat16");
    char *single = join(model, "model.safetensors"), *index = join(model, "model.safetensors.index.json");
    ck_assert_msg(!exists(index), "an index for a single file");
    uint64_t data = 0;
    ck_assert_uint_eq(check_safetensors(single, "BF16", &data), ORION_SMALL_TENSORS);
    run_orion_frames(model);
    free(single);
    free(index);
    free(model);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

START_TEST(orion_f32_sharded_runs)
{
    char *tmp = vh_test_make_temp_dir();
    const char *extra[] = {"--dtype", "f32", "--shard-bytes", "8M", NULL};
    char *model = generate_orion(tmp, "orion", extra);
    check_orion_config(model, "float32");
    json_t *index = load_json(model, "model.safetensors.index.json");
    json_t *map = json_object_get(index, "weight_map");
    ck_assert_uint_eq(json_object_size(map), ORION_SMALL_TENSORS);
    /* the embedding (32 MB) alone in the first shard, the rest after it in name order */
    const char *first = json_string_value(json_object_get(map, "model.embed_tokens.weight"));
    int n_shards = 0;
    ck_assert_msg(first && sscanf(first, "model-00001-of-%05d.safetensors", &n_shards) == 1 && n_shards >= 3,
                  "embedding in %s", first ? first : "(none)");
    uint64_t data = 0;
    size_t tensors = 0;
    for (int k = 1; k <= n_shards; k++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", k, n_shards);
        char *path = join(model, name);
        tensors += check_safetensors(path, "F32", &data);
        free(path);
    }
    ck_assert_uint_eq(tensors, json_object_size(map));
    ck_assert_uint_eq(data, (uint64_t)json_integer_value(json_object_get(json_object_get(index, "metadata"),
                                                                        "total_size")));
    json_decref(index);
    run_orion_frames(model);
    free(model);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

/* --front-end: config.json's front_end has the members the converter writes (those of the
 * converted fixture tests/fixtures/orion/model-front), the ViT in --dtype and the heads in F32, and a
 * session of the family takes every tensor (a 2-block ViT: no frame is run, a camera frame at the
 * agent's geometry takes tens of seconds on cpu_generic). */
static void same_members(const json_t *a, const json_t *b, const char *what)
{
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)a, k, v) {
        ck_assert_msg(json_object_get(b, k), "%s.%s: not in the converted fixture's", what, k);
        if (json_is_object(v)) {
            char sub[128];
            snprintf(sub, sizeof sub, "%s.%s", what, k);
            same_members(v, json_object_get(b, k), sub);
        }
    }
    ck_assert_uint_eq(json_object_size(a), json_object_size(b));
}

/* A safetensors file's JSON header, as a string. */
static char *safetensors_header(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    uint8_t len8[8];
    ck_assert_uint_eq(fread(len8, 1, 8, f), 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | len8[i];
    ck_assert_uint_lt(n, 1u << 26);
    char *h = malloc(n + 1);
    ck_assert_ptr_nonnull(h);
    ck_assert_uint_eq(fread(h, 1, n, f), n);
    h[n] = 0;
    fclose(f);
    return h;
}

START_TEST(orion_front_end_loads)
{
    char *tmp = vh_test_make_temp_dir();
    const char *extra[] = {"--front-end", "--vit-layers", "2", NULL};
    char *model = generate_orion(tmp, "front", extra);
    json_t *c = load_json(model, "config.json");
    char *fixture_dir = vh_test_fixture_path("orion/model-front");
    json_t *want = load_json(fixture_dir, "config.json");
    const json_t *fe = json_object_get(c, "front_end");
    ck_assert_ptr_nonnull(fe);
    same_members(fe, json_object_get(want, "front_end"), "front_end");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(fe, "backbone"), "depth")), 2);
    /* window_block_indexes of the agent's ViT cut to 2 blocks: [0, 1] */
    ck_assert_uint_eq(json_array_size(json_object_get(json_object_get(fe, "backbone"), "window_block_indexes")), 2);
    /* the dtypes: the ViT's bf16, a head's F32 */
    char *file = join(model, "model.safetensors"), *text = safetensors_header(file);
    const char *vit = strstr(text, "\"img_backbone.blocks.0.attn.q_proj.weight\":{\"dtype\":\"BF16\"");
    const char *head = strstr(text, "\"pts_bbox_head.input_projection.weight\":{\"dtype\":\"F32\"");
    ck_assert_msg(vit && head, "the front end's dtypes are not the converter's (ViT bf16, heads F32)");
    free(text);
    free(file);

    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model;
    p.backends = "cpu_generic";
    p.n_threads = 2;
    p.warmup_frames = 0;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s: %s", model, vh_last_error());
    vh_session_destroy(s);
    json_decref(c);
    json_decref(want);
    free(fixture_dir);
    free(model);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

/* The full-size Orion plan, without writing it: Vicuna-7B + the planner, 3 shards of <= 5e9 bytes. */
START_TEST(orion_full_size_plan)
{
    char *tmp = vh_test_make_temp_dir(), *log = join(tmp, "plan.txt");
    const char *args[] = {"--family", "orion", "--list", NULL};
    ck_assert_int_eq(run_synth(log, 0, args), 0);
    char *text = read_text(log);
    static const char *const want[] = {
        "plan: Orion, LLM 32 layers x 4096 (MLP 11008, 32 heads, rms_norm_eps 1e-5), vocab 32001, ",
        "parameters 6908686412 (llm 6607347712, planner 301338700)\n",
        "tensors 326\n",
        " model.embed_tokens.weight BF16 [32001, 4096] model-00001-of-00003.safetensors",
        " model.layers.31.self_attn.q_proj.weight BF16 [4096, 4096] ",
        " model.layers.31.mlp.down_proj.weight BF16 [4096, 11008] ",
        " model.norm.weight BF16 [4096] ",
        " planner.present_distribution.encoder.conv1.weight BF16 [8192, 4096] ",
        " planner.present_distribution.encoder.conv2.weight BF16 [8192, 8192] ",
        " planner.present_distribution.encoder.conv3.weight BF16 [2048, 8192] ",
        " planner.present_distribution.last_conv.1.weight BF16 [64, 2048] ",
        " planner.predict_model.gru.weight_ih_l0 BF16 [3072, 32] ",
        " planner.predict_model.gru.weight_ih_l3 BF16 [3072, 1024] ",
        " planner.predict_model.gru.weight_hh_l3 BF16 [3072, 1024] ",
        " planner.predict_model.gru.bias_hh_l3 BF16 [3072] ",
        " planner.predict_model.linear1.weight BF16 [2048, 1024] ",
        " planner.predict_model.linear2.weight BF16 [4096, 2048] ",
        " planner.predict_model.linear3.weight BF16 [4096, 4096] ",
        " planner.ego_fut_decoder.0.weight BF16 [8192, 8192] ",
        " planner.ego_fut_decoder.2.weight BF16 [8192, 8192] ",
        " planner.ego_fut_decoder.4.weight BF16 [12, 8192] ",
        " planner.ego_fut_decoder.4.bias BF16 [12] ",
        "model-00003-of-00003.safetensors",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(text, want[i]), "the plan lacks '%s':\n%.600s", want[i], text);
    ck_assert_msg(!strstr(text, "model.layers.32."), "a 33rd layer");
    ck_assert_msg(!strstr(text, "lm_head"), "an lm_head (the converter writes none by default)");
    ck_assert_msg(!strstr(text, "vision_backbone"), "OpenVLA tensors in an Orion plan");
    ck_assert_msg(!strstr(text, "gru.weight_ih_l4"), "a fifth GRU layer");
    free(text);
    /* what does not apply to Orion is refused */
    const char *f16[] = {"--family", "orion", "--dtype", "f16", "--dry-run", NULL};
    ck_assert_int_eq(run_synth(log, 0, f16), 2);
    const char *vision[] = {"--family", "orion", "--vision", "tiny", "--dry-run", NULL};
    ck_assert_int_eq(run_synth(log, 0, vision), 2);
    const char *family[] = {"--family", "pi0", "--dry-run", NULL};
    ck_assert_int_eq(run_synth(log, 0, family), 2);
    const char *odd[] = {"--family", "orion", "--llm-hidden", "100", "--dry-run", NULL};
    ck_assert_int_eq(run_synth(log, 0, odd), 2);
    unlink(log);
    free(log);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("synth_checkpoint");
    TCase *tc = tcase_create("synth_checkpoint");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, bf16_single_file_runs);
    tcase_add_test(tc, f16_sharded_runs);
    tcase_add_test(tc, same_seed_same_bytes);
    tcase_add_test(tc, full_size_plan);
    tcase_add_test(tc, failures_leave_nothing);
    tcase_add_test(tc, orion_bf16_runs);
    tcase_add_test(tc, orion_f32_sharded_runs);
    tcase_add_test(tc, orion_full_size_plan);
    tcase_add_test(tc, orion_front_end_loads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return vh_test_run_suite(suite());
}
