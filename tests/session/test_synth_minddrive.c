/* tools/vh-synth-checkpoint --family minddrive: the folder is the one tools/minddrive/convert_minddrive.py
 * writes and the library runs it.
 *
 * References, none of them the code under test:
 *   - config.json's keys and their order: the converter's convert() and planner_hyperparameters()
 *     (tools/minddrive/convert_minddrive.py), written out below by hand; the llava-qwen2 text_config as
 *     tests/minddrive/make_tiny_minddrive.py writes it, plus the converter's head_dim and base_vocab_size;
 *   - the 15 token ids with tests/fixtures/tokenizer/tokenizer_json/qwen2-style.tokenizer.json (4000
 *     BPE entries + 3 added): 4003 ... 4017, as the converter's own test has them by hand
 *     (doc/minddrive-converter.md);
 *   - where the converter's tiny fixture is in the tree (tests/fixtures/minddrive/model, converted
 *     from the same tokenizer.json), its tokenizer.json, tokenizer_config.json, added_tokens.json,
 *     prompts and token lists must be equal to ours;
 *   - the full-size parameter counts: Qwen2's and the planners' shapes summed by hand (comment at
 *     minddrive_full_size_plans).
 * A small folder (2 layers, hidden 64, the real 151661-row embedding) then loads as family
 * minddrive and a cpu_generic session turns zero and seeded vision tokens into finite 20-point paths,
 * 7 speed log-probabilities that sum to one and a decision that is their argmax. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "family/minddrive/minddrive_family.h"
#include "family/model_load.h"
#include "synth_support.h"
#include "test_support.h"
#include "vlahybrid/vlahybrid.h"

#ifndef VH_SYNTH_CHECKPOINT_EXE
#error "VH_SYNTH_CHECKPOINT_EXE must name the vh-synth-checkpoint program"
#endif

#define TOKENS 529
#define WAIT_MS 120000
#define QWEN2_ROWS 151661 /* Qwen2's 151646-entry tokenizer + 15 (doc/minddrive-converter.md) */
#define TOKENIZER "tokenizer/tokenizer_json/qwen2-style.tokenizer.json"
#define FIRST_ID 4003     /* len() of that tokenizer */

static const char *const added[15] = {
    "<maintain_moderate_speed>", "<stop>", "<maintain_slow_speed>", "<speed_up>", "<slow_down>",
    "<maintain_fast_speed>", "<slow_down_rapidly>", "<lanefollow>", "<straight>", "<turn_left>",
    "<change_lane_left>", "<turn_right>", "<change_lane_right>", "<waypoint_ego>", "<path_waypoint_ego>"};

/* Generate into tmp/name: --family minddrive, the Qwen2-style tokenizer, then `extra`. */
static char *generate(const char *tmp, const char *name, const char *const *extra, const char *want_report)
{
    char *out = join(tmp, name), *log = join(tmp, "log.txt"), *tok = vh_test_fixture_path(TOKENIZER);
    const char *args[32] = {"--family", "minddrive", "--out", out, "--tokenizer", tok, "--no-sync"};
    int n = 7;
    for (int i = 0; extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    int rc = run_synth(log, 0, args);
    char *text = read_text(log);
    ck_assert_msg(rc == 0, "vh-synth-checkpoint --family minddrive exited with %d:\n%s", rc, text);
    ck_assert_msg(strstr(text, want_report) && strstr(text, "time "), "unexpected report (want '%s'):\n%s",
                  want_report, text);
    free(text);
    free(log);
    free(tok);
    return out;
}

static json_t *load_json(const char *path)
{
    json_error_t jerr;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    ck_assert_msg(j, "%s: %s", path, jerr.text);
    return j;
}

static json_t *load_in(const char *dir, const char *name)
{
    char *p = join(dir, name);
    json_t *j = load_json(p);
    free(p);
    return j;
}

/* obj's keys are exactly `keys` (NULL-terminated), in that order. */
static void keys_are(const json_t *obj, const char *const *keys, const char *what)
{
    ck_assert_msg(json_is_object(obj), "%s: not an object", what);
    size_t i = 0;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        ck_assert_msg(keys[i], "%s: an extra key '%s'", what, key);
        ck_assert_msg(!strcmp(key, keys[i]), "%s: key %zu is '%s'; the converter writes '%s'", what, i, key, keys[i]);
        i++;
    }
    ck_assert_msg(!keys[i], "%s: '%s' is missing", what, keys[i]);
}

/* convert_minddrive.py's convert(): config's keys; text_config: the llava-qwen2 config.json's keys
 * (make_tiny_minddrive.py's qwen_config) + head_dim + base_vocab_size; the others as written there. */
static const char *const config_keys[] = {"model_type", "vlahybrid_format", "dtype", "text_config", "lora", "planners",
                                          "vision_tokens", "vision_token_groups", "prompt", "meta_action_tokens",
                                          "speed_tokens", "path_mode_of_command", "special_tokens", "source", NULL};
static const char *const text_keys[] = {
    "_name_or_path", "architectures", "attention_dropout", "bos_token_id", "eos_token_id", "hidden_act", "hidden_size",
    "initializer_range", "intermediate_size", "max_position_embeddings", "max_window_layers", "model_type",
    "num_attention_heads", "num_hidden_layers", "num_key_value_heads", "rms_norm_eps", "rope_scaling", "rope_theta",
    "sliding_window", "tie_word_embeddings", "tokenizer_vocab_size", "torch_dtype", "transformers_version",
    "use_cache", "use_sliding_window", "vocab_size", "head_dim", "base_vocab_size", NULL};
static const char *const lora_keys[] = {"r", "alpha", "scale", "merged", "experts", "targets", "alpha_source", NULL};
static const char *const planner_keys[] = {
    "type", "in_channels", "out_channels", "compress_dim", "decoder_in", "latent_dim", "ego_fut_mode", "fut_ts",
    "gru_layers", "gru_hidden", "gru_input", "encoder_widths", "predict_widths", "decoder_widths", "min_log_sigma",
    "max_log_sigma", "activation", "gru_gate_order", "waypoint_dim", "feature_token", "mode_source", "source_modules",
    NULL};
static const char *const prompt_keys[] = {"image_marker", "image_token_index", "add_special_tokens", "decision",
                                          "action", NULL};
static const char *const source_keys[] = {"checkpoint", "llm_dir", "infer_config", "lm_model_type", "llm_path", NULL};

static void check_planner(const json_t *p, int hidden, int modes, int steps, const char *token)
{
    keys_are(p, planner_keys, token);
    ck_assert_str_eq(json_string_value(json_object_get(p, "type")), "vae_gru");
    ck_assert_int_eq(int_at(p, "in_channels"), hidden);
    ck_assert_int_eq(int_at(p, "latent_dim"), 32);
    ck_assert_int_eq(int_at(p, "ego_fut_mode"), modes);
    ck_assert_int_eq(int_at(p, "fut_ts"), steps);
    ck_assert_int_eq(int_at(p, "gru_layers"), 4);
    ck_assert_int_eq(int_at(p, "gru_hidden"), hidden / 4);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(p, "decoder_widths"), 2)), 2 * modes);
    ck_assert_str_eq(json_string_value(json_object_get(p, "feature_token")), token);
}

static void check_config(const char *dir, int hidden, int layers, const char *dtype)
{
    json_t *c = load_in(dir, "config.json");
    keys_are(c, config_keys, "config.json");
    const json_t *t = json_object_get(c, "text_config"), *lora = json_object_get(c, "lora");
    keys_are(t, text_keys, "text_config");
    keys_are(lora, lora_keys, "lora");
    keys_are(json_object_get(c, "prompt"), prompt_keys, "prompt");
    keys_are(json_object_get(c, "source"), source_keys, "source");
    ck_assert_str_eq(json_string_value(json_object_get(c, "model_type")), "minddrive");
    ck_assert_str_eq(json_string_value(json_object_get(c, "dtype")), dtype);
    ck_assert_int_eq(int_at(t, "hidden_size"), hidden);
    ck_assert_int_eq(int_at(t, "num_hidden_layers"), layers);
    ck_assert_int_eq(int_at(t, "vocab_size"), QWEN2_ROWS);
    ck_assert_int_eq(int_at(t, "base_vocab_size"), FIRST_ID);
    ck_assert_int_eq(int_at(t, "tokenizer_vocab_size"), FIRST_ID);
    ck_assert_int_eq(int_at(t, "num_attention_heads") * int_at(t, "head_dim"), hidden);
    ck_assert_int_eq(int_at(t, "num_attention_heads") % int_at(t, "num_key_value_heads"), 0);
    ck_assert(json_is_true(json_object_get(t, "tie_word_embeddings")));
    ck_assert(json_real_value(json_object_get(t, "rope_theta")) == 1e6);
    ck_assert(json_real_value(json_object_get(t, "rms_norm_eps")) == 1e-6);
    ck_assert_int_eq(int_at(lora, "r"), 16);
    ck_assert_int_eq(int_at(lora, "alpha"), 16);
    ck_assert(json_is_false(json_object_get(lora, "merged")));
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(lora, "experts"), 0)), "decision_expert");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(lora, "experts"), 1)), "action_expert");
    const json_t *pl = json_object_get(c, "planners");
    check_planner(json_object_get(pl, "speed"), hidden, 7, 6, "<waypoint_ego>");
    check_planner(json_object_get(pl, "path"), hidden, 6, 20, "<path_waypoint_ego>");
    ck_assert_int_eq(int_at(c, "vision_tokens"), TOKENS);
    const json_t *special = json_object_get(c, "special_tokens"), *meta = json_object_get(c, "meta_action_tokens");
    ck_assert_int_eq(json_object_size(special), 15);
    ck_assert_int_eq(json_array_size(meta), 13);
    ck_assert_int_eq(json_array_size(json_object_get(c, "speed_tokens")), 7);
    for (int k = 0; k < 15; k++) {
        ck_assert_int_eq(int_at(special, added[k]), FIRST_ID + k);
        if (k < 13) ck_assert_str_eq(json_string_value(json_array_get(meta, (size_t)k)), added[k]);
    }
    /* the converter's output for the same tokenizer, when its fixture is in the tree */
    char *fixture_dir = vh_test_fixture_path("minddrive/model");
    char *fixture_config = join(fixture_dir, "config.json");
    if (exists(fixture_config)) {
        json_t *f = load_json(fixture_config);
        static const char *const same[] = {"vision_token_groups", "prompt", "meta_action_tokens", "speed_tokens",
                                           "path_mode_of_command", "special_tokens"};
        for (size_t i = 0; i < sizeof same / sizeof same[0]; i++)
            ck_assert_msg(json_equal(json_object_get(c, same[i]), json_object_get(f, same[i])),
                          "config.json's %s differs from the converter's", same[i]);
        keys_are(f, config_keys, "the converter's config.json"); /* the hand-written lists are still its */
        keys_are(json_object_get(f, "text_config"), text_keys, "the converter's text_config");
        static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "added_tokens.json"};
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            json_t *a = load_in(dir, files[i]), *b = load_in(fixture_dir, files[i]);
            ck_assert_msg(json_equal(a, b), "%s differs from the converter's", files[i]);
            json_decref(a);
            json_decref(b);
        }
        json_decref(f);
    } else {
        fprintf(stderr, "note: %s absent: not compared with the converter's folder\n", fixture_config);
    }
    free(fixture_config);
    free(fixture_dir);
    json_decref(c);
}

/* tokenizer.json: the input's entries, then the 15 with the converter's flags; nothing else changed. */
static void check_tokenizer(const char *dir)
{
    char *in_path = vh_test_fixture_path(TOKENIZER);
    json_t *in = load_json(in_path), *out = load_in(dir, "tokenizer.json");
    json_t *entries = json_object_get(out, "added_tokens");
    const size_t n_in = json_array_size(json_object_get(in, "added_tokens"));
    ck_assert_uint_eq(json_array_size(entries), n_in + 15);
    for (int k = 0; k < 15; k++) {
        const json_t *e = json_array_get(entries, n_in + (size_t)k);
        ck_assert_int_eq(int_at(e, "id"), FIRST_ID + k);
        ck_assert_str_eq(json_string_value(json_object_get(e, "content")), added[k]);
        ck_assert(json_is_true(json_object_get(e, "special")));
        static const char *const off[] = {"normalized", "lstrip", "rstrip", "single_word"};
        for (int i = 0; i < 4; i++) ck_assert_msg(json_is_false(json_object_get(e, off[i])), "%s: %s", added[k], off[i]);
    }
    for (int k = 0; k < 15; k++) json_array_remove(entries, n_in);
    ck_assert_msg(json_equal(in, out), "tokenizer.json changed beyond the 15 added tokens");
    json_t *a = load_in(dir, "added_tokens.json"), *cfg = load_in(dir, "tokenizer_config.json");
    const json_t *dec = json_object_get(cfg, "added_tokens_decoder");
    for (int k = 0; k < 15; k++) {
        char id[16];
        snprintf(id, sizeof id, "%d", FIRST_ID + k);
        ck_assert_int_eq(int_at(a, added[k]), FIRST_ID + k);
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(dec, id), "content")), added[k]);
    }
    json_decref(a);
    json_decref(cfg);
    json_decref(in);
    json_decref(out);
    free(in_path);
}

/* The safetensors header of path: {name: {dtype, shape, data_offsets}}. */
static json_t *header_of(const char *path)
{
    size_t size = 0;
    uint8_t *bytes = vh_test_read_file(path, &size);
    ck_assert_msg(bytes && size >= 8, "%s: unreadable", path);
    uint64_t n = 0;
    for (int b = 7; b >= 0; b--) n = (n << 8) | bytes[b];
    ck_assert_msg(n % 8 == 0 && 8 + n <= size, "%s: header length", path);
    json_error_t jerr;
    json_t *h = json_loadb((const char *)bytes + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    ck_assert_msg(h, "%s: %s", path, jerr.text);
    free(bytes);
    return h;
}

static void shape_is(const json_t *h, const char *name, long long a, long long b, const char *dtype)
{
    const json_t *t = json_object_get(h, name), *shape = json_object_get(t, "shape");
    ck_assert_msg(t, "no tensor %s", name);
    ck_assert_str_eq(json_string_value(json_object_get(t, "dtype")), dtype);
    ck_assert_msg(json_array_size(shape) == (b ? 2u : 1u) && json_integer_value(json_array_get(shape, 0)) == a &&
                  (!b || json_integer_value(json_array_get(shape, 1)) == b),
                  "%s: shape is not [%lld, %lld]", name, a, b);
}

/* Family minddrive; zero then seeded tokens (command 2): finite 20-point paths that differ, 7 speed
 * log-probabilities summing to one whose argmax is the decision, the planners' modes. */
static void run_frames(const char *model, uint32_t hidden, uint32_t layers)
{
    vh_model *m = NULL;
    vh_error err;
    ck_assert_msg(vh_model_load(model, &m, &err) == VH_OK, "%s: %s", model, err.message);
    ck_assert_ptr_eq(m->family, &vh_family_minddrive);
    vh_model_free(m);

    vh_session_params p;
    vh_session_params_init(&p);
    p.model_path = model;
    p.backends = "cpu_generic";
    p.n_threads = 2;
    p.seed = 11;
    vh_session *s = NULL;
    ck_assert_msg(vh_session_create(&p, &s) == VH_OK, "%s: %s", model, vh_last_error());
    vh_session_info info;
    vh_session_info_init(&info);
    ck_assert_int_eq(vh_session_get_info(s, &info), VH_OK);
    ck_assert_uint_eq(info.n_llm_layers, layers);

    const size_t n = (size_t)TOKENS * hidden;
    float *tokens = calloc(n, sizeof *tokens), first[40];
    ck_assert_ptr_nonnull(tokens);
    for (int k = 0; k < 2; k++) {
        if (k == 1)
            for (size_t i = 0; i < n; i++) tokens[i] = normal_at(i);
        vh_frame f;
        vh_frame_init(&f);
        f.vision_tokens = tokens;
        f.n_vision_tokens = TOKENS;
        f.vision_token_width = hidden;
        f.command = 2;
        f.tag = 70 + (uint64_t)k;
        ck_assert_msg(vh_submit_frame(s, &f, NULL) == VH_OK, "%s", vh_session_last_error(s));
        vh_action a;
        vh_action_init(&a);
        ck_assert_msg(vh_poll_action(s, &a, WAIT_MS) == VH_OK, "%s", vh_session_last_error(s));
        ck_assert_msg(a.status == VH_OK, "action status %d: %s", a.status, vh_session_last_error(s));
        ck_assert_uint_eq(a.tag, 70 + (uint64_t)k);
        ck_assert_int_eq(a.kind, VH_ACTION_TRAJECTORY);
        ck_assert_uint_eq(a.n_points, 20);
        for (uint32_t i = 0; i < 2 * a.n_points; i++)
            ck_assert_msg(isfinite(a.trajectory[i]), "frame %d: trajectory[%u] is %g", k, i, a.trajectory[i]);
        uint32_t count = 0;
        const float *lp = vh_action_extra(&a, "speed_log_probs", &count);
        ck_assert_msg(lp && count == 7, "speed_log_probs: %u floats", count);
        double sum = 0;
        uint32_t best = 0;
        for (uint32_t i = 0; i < 7; i++) {
            ck_assert_msg(isfinite(lp[i]) && lp[i] <= 0, "speed_log_probs[%u] = %g", i, lp[i]);
            sum += exp((double)lp[i]);
            if (lp[i] > lp[best]) best = i;
        }
        ck_assert_msg(fabs(sum - 1.0) < 1e-5, "the speed probabilities sum to %.9g", sum);
        ck_assert_uint_eq(a.action_dim, 1);
        ck_assert_msg(a.values[0] == best, "decision %g, argmax %u", a.values[0], best);
        const float *speed = vh_action_extra(&a, "speed_modes", &count);
        ck_assert_msg(speed && count == 7 * 6 * 2, "speed_modes: %u floats", count);
        const float *path = vh_action_extra(&a, "path_modes", &count);
        ck_assert_msg(path && count == 6 * 20 * 2, "path_modes: %u floats", count);
        for (uint32_t i = 0; i < count; i++) ck_assert(isfinite(path[i]));
        if (k == 0) memcpy(first, a.trajectory, sizeof first);
        else ck_assert_msg(memcmp(first, a.trajectory, sizeof first), "the tokens do not change the path");
    }
    free(tokens);
    vh_session_destroy(s);
}

/* f32, Qwen2-0.5B's ratios at hidden 64: 4 heads of 16 / 2 KV heads, MLP 344; 2 layers; one file. */
START_TEST(minddrive_small_runs)
{
    char *tmp = vh_test_make_temp_dir();
    const char *extra[] = {"--llm-layers", "2", "--llm-hidden", "64", "--dtype", "f32", "--seed", "3", NULL};
    char *model = generate(tmp, "md", extra,
                           "wrote: MindDrive 0.5b, LLM 2 layers x 64 (MLP 344, 4 heads / 2 KV heads of 16), vocab 151661");
    check_config(model, 64, 2, "float32");
    check_tokenizer(model);
    char *file = join(model, "model.safetensors"), *index = join(model, "model.safetensors.index.json");
    ck_assert_msg(!exists(index), "an index for a single file");
    json_t *h = header_of(file);
    /* 2 layers x 28 (q/k/v weight + bias, o, 16 LoRA factors, MLP 3, norms 2) + embedding + norm + 2 x 36 */
    ck_assert_uint_eq(json_object_size(h) - 1, 2 * 28 + 2 + 2 * 36);
    shape_is(h, "model.embed_tokens.weight", QWEN2_ROWS, 64, "F32");
    shape_is(h, "model.layers.1.self_attn.q_proj.bias", 64, 0, "F32");
    shape_is(h, "model.layers.1.self_attn.k_proj.weight", 32, 64, "F32");
    shape_is(h, "model.layers.1.self_attn.v_proj.bias", 32, 0, "F32");
    shape_is(h, "model.layers.0.self_attn.q_proj.lora_A.decision_expert.weight", 16, 64, "F32");
    shape_is(h, "model.layers.0.self_attn.k_proj.lora_B.action_expert.weight", 32, 16, "F32");
    shape_is(h, "model.layers.0.self_attn.o_proj.lora_B.decision_expert.weight", 64, 16, "F32");
    shape_is(h, "model.layers.0.mlp.down_proj.weight", 64, 344, "F32");
    shape_is(h, "planner.speed.ego_fut_decoder.4.weight", 14, 128, "F32");
    shape_is(h, "planner.path.ego_fut_decoder.4.weight", 12, 128, "F32");
    shape_is(h, "planner.path.predict_model.gru.weight_ih_l0", 48, 32, "F32");
    shape_is(h, "planner.speed.present_distribution.last_conv.1.weight", 64, 32, "F32");
    ck_assert_msg(!json_object_get(h, "model.layers.0.self_attn.o_proj.bias"), "an o_proj bias (Qwen2 has none)");
    ck_assert_msg(!json_object_get(h, "lm_head.weight"), "an lm_head (tied: the converter writes none)");
    json_decref(h);
    run_frames(model, 64, 2);
    free(file);
    free(index);
    free(model);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

/* bf16, --size 3b's ratios at hidden 128 (4 heads of 32), 1 layer, in shards of 8 MiB. */
START_TEST(minddrive_3b_bf16_sharded_runs)
{
    char *tmp = vh_test_make_temp_dir();
    const char *extra[] = {"--size", "3b", "--llm-layers", "1", "--llm-hidden", "128", "--shard-bytes", "8M", NULL};
    char *model = generate(tmp, "md3", extra,
                           "wrote: MindDrive 3b, LLM 1 layers x 128 (MLP 688, 4 heads / 2 KV heads of 32), vocab 151680");
    json_t *c = load_in(model, "config.json"), *index = load_in(model, "model.safetensors.index.json");
    ck_assert_str_eq(json_string_value(json_object_get(c, "dtype")), "bfloat16");
    ck_assert_int_eq(int_at(json_object_get(c, "text_config"), "vocab_size"), 151680); /* Qwen2.5's 151665 + 15 */
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(c, "source"), "lm_model_type")), "qwen25_3B");
    const json_t *map = json_object_get(index, "weight_map");
    ck_assert_uint_eq(json_object_size(map), 28 + 2 + 2 * 36);
    const char *first = json_string_value(json_object_get(map, "model.embed_tokens.weight"));
    int n_shards = 0;
    ck_assert_msg(first && sscanf(first, "model-00001-of-%05d.safetensors", &n_shards) == 1 && n_shards >= 2,
                  "embedding in %s", first ? first : "(none)");
    json_decref(c);
    json_decref(index);
    run_frames(model, 128, 1);
    free(model);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

/* The full-size plans, written nowhere. Parameters by hand: Qwen2 layer = q (H*q + q) + k, v (H*kv +
 * kv each) + o (q*H) + 2 experts x r (H + q + 2 (H + kv) + q + H) + 3 H I + 2 H; LLM = V H + L layer + H;
 * a planner = H*2H + 2H + 2H*2H + 2H + 2H*H/2 + H/2 + H/2*64 + 64 + GRU (3g*32 + 3 (3g*g) + 4 (3g*g + 6g))
 * + g*2g + 2g + 2g*4g + 4g + 4g*H + H + 2 (2H*2H + 2H) + 2H*2m + 2m, g = H/4.
 * 0.5b (H 896, I 4864, 24 layers, q 896, kv 128, V 151661): LLM 498111744, planners 28978586;
 * 3b (H 2048, I 11008, 36 layers, q 2048, kv 256, V 151680): LLM 3100160000, planners 150876314. */
START_TEST(minddrive_full_size_plans)
{
    char *tmp = vh_test_make_temp_dir(), *log = join(tmp, "plan.txt");
    const char *small[] = {"--family", "minddrive", "--list", NULL};
    ck_assert_int_eq(run_synth(log, 0, small), 0);
    char *text = read_text(log);
    static const char *const want[] = {
        "plan: MindDrive 0.5b, LLM 24 layers x 896 (MLP 4864, 14 heads / 2 KV heads of 64), vocab 151661, ",
        "parameters 527090330 (llm 498111744, planners 28978586)\n",
        " model.embed_tokens.weight BF16 [151661, 896] model.safetensors",
        " model.layers.23.self_attn.k_proj.weight BF16 [128, 896] ",
        " model.layers.23.self_attn.k_proj.bias BF16 [128] ",
        " model.layers.23.self_attn.o_proj.lora_A.action_expert.weight BF16 [16, 896] ",
        " model.layers.23.self_attn.v_proj.lora_B.decision_expert.weight BF16 [128, 16] ",
        " model.layers.23.mlp.down_proj.weight BF16 [896, 4864] ",
        " planner.speed.predict_model.gru.weight_hh_l3 BF16 [672, 224] ",
        " planner.path.ego_fut_decoder.4.weight BF16 [12, 1792] ",
        " planner.speed.ego_fut_decoder.4.weight BF16 [14, 1792] ",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(text, want[i]), "the plan lacks '%s':\n%.600s", want[i], text);
    ck_assert_msg(!strstr(text, "model.layers.24."), "a 25th layer");
    free(text);
    const char *big[] = {"--family", "minddrive", "--size", "3b", "--dry-run", NULL};
    ck_assert_int_eq(run_synth(log, 0, big), 0);
    text = read_text(log);
    ck_assert_msg(strstr(text, "plan: MindDrive 3b, LLM 36 layers x 2048 (MLP 11008, 16 heads / 2 KV heads of 128), "
                               "vocab 151680, ") &&
                  strstr(text, "parameters 3251036314 (llm 3100160000, planners 150876314)\n") &&
                  strstr(text, "model-00002-of-00002.safetensors"),
                  "the 3b plan:\n%s", text);
    free(text);
    /* what does not apply is refused */
    const char *size_openvla[] = {"--size", "3b", "--dry-run", NULL};
    ck_assert_int_eq(run_synth(log, 0, size_openvla), 2);
    const char *size_bad[] = {"--family", "minddrive", "--size", "7b", "--dry-run", NULL};
    ck_assert_int_eq(run_synth(log, 0, size_bad), 2);
    const char *vision[] = {"--family", "minddrive", "--vision", "tiny", "--dry-run", NULL};
    ck_assert_int_eq(run_synth(log, 0, vision), 2);
    const char *odd[] = {"--family", "minddrive", "--llm-hidden", "100", "--dry-run", NULL};
    ck_assert_int_eq(run_synth(log, 0, odd), 2);
    unlink(log);
    free(log);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

/* A tokenizer that is not a tokenizer.json, and one whose ids have holes (the slow and fast
 * tokenizers would number the 15 differently: the converter refuses it), fail before anything is
 * written. */
START_TEST(minddrive_bad_tokenizers_leave_nothing)
{
    char *tmp = vh_test_make_temp_dir(), *log = join(tmp, "log.txt"), *out = join(tmp, "md");
    char *partial = join(tmp, "md.partial"), *holes = join(tmp, "holes.json");
    char *spm = vh_test_fixture_path("tokenizer/llama2-tokenizer.model");
    FILE *f = fopen(holes, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"added_tokens\": [{\"id\": 7, \"content\": \"<x>\", \"special\": true}],"
          " \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": []}}", f);
    fclose(f);
    const char *const bad[3] = {spm, holes, tmp};
    const char *const why[3] = {"not a readable JSON file", "have holes", "not a regular file"};
    for (int i = 0; i < 3; i++) {
        const char *args[] = {"--family", "minddrive", "--out", out, "--tokenizer", bad[i], "--llm-layers", "1",
                              "--llm-hidden", "64", NULL};
        ck_assert_int_eq(run_synth(log, 0, args), 1);
        char *text = read_text(log);
        ck_assert_msg(strstr(text, why[i]), "tokenizer %d: no '%s' in:\n%s", i, why[i], text);
        free(text);
        ck_assert_msg(!exists(out) && !exists(partial), "tokenizer %d: something was written", i);
    }
    free(log);
    free(out);
    free(partial);
    free(holes);
    free(spm);
    vh_test_remove_tree(tmp);
    free(tmp);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("synth_minddrive");
    TCase *tc = tcase_create("synth_minddrive");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, minddrive_small_runs);
    tcase_add_test(tc, minddrive_3b_bf16_sharded_runs);
    tcase_add_test(tc, minddrive_full_size_plans);
    tcase_add_test(tc, minddrive_bad_tokenizers_leave_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return vh_test_run_suite(suite());
}
