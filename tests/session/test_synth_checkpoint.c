/* tools/vh-synth-checkpoint: the folders it writes load and run through the public API, the
 * safetensors files are well formed, the same seed gives byte-identical files (whatever the thread
 * count) and another seed different weights, the full-size plan has OpenVLA-7B's names, shapes and
 * parameter count, and failures (bad usage, existing output, a write that fails part way) leave
 * nothing behind.
 *
 * The generated models are small (--vision tiny, 2 LLM layers, --llm-hidden 256: ~38 MB) so the
 * test stays fast; the 32064-row embedding and LM head keep the real vocabulary. */
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

#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#ifndef VH_SYNTH_CHECKPOINT_EXE
#error "VH_SYNTH_CHECKPOINT_EXE must name the vh-synth-checkpoint program"
#endif

#define VOCAB 32064
#define WAIT_MS 120000

static const char *const small_files[] = {"config.json", "preprocessor_config.json", "generation_config.json",
                                          "special_tokens_map.json", "tokenizer_config.json", "tokenizer.model"};

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    ck_assert_ptr_nonnull(p);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Run vh-synth-checkpoint with args (NULL-terminated) and, if fsize_limit, RLIMIT_FSIZE; stdout and
 * stderr go to log. Returns the exit status (128 + signal when killed). */
static int run_synth(const char *log, rlim_t fsize_limit, const char *const *args)
{
    const char *argv[40];
    int n = 0;
    argv[n++] = VH_SYNTH_CHECKPOINT_EXE;
    for (; args[n - 1] && n < 39; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) _exit(125);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        if (fsize_limit) {
            signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG instead */
            struct rlimit rl = {fsize_limit, fsize_limit};
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(126);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) ck_assert_int_eq(errno, EINTR);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static char *read_text(const char *path)
{
    char *text = (char *)vh_test_read_file(path, NULL);
    ck_assert_msg(text, "%s: unreadable", path);
    return text;
}

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
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return vh_test_run_suite(suite());
}
