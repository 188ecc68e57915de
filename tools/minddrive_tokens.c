#include "minddrive_tokens.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* convert_minddrive.py: SPEED_TOKENS + PATH_TOKENS (constants.py), then the two waypoint tokens, in
 * the order of Minddrive.__init__'s add_special_token calls. */
const char *const md_added_tokens[MD_N_ADDED_TOKENS] = {
    "<maintain_moderate_speed>", "<stop>", "<maintain_slow_speed>", "<speed_up>", "<slow_down>",
    "<maintain_fast_speed>", "<slow_down_rapidly>", "<lanefollow>", "<straight>", "<turn_left>",
    "<change_lane_left>", "<turn_right>", "<change_lane_right>", MD_WAYPOINT_TOKEN, MD_PATH_WAYPOINT_TOKEN};

/* convert_minddrive.py's PATH_MODE_OF_COMMAND: PA_MAPPING[PATH_MAPPING[argmax(ego_fut_cmd)]]. */
const int md_path_mode_of_command[MD_N_COMMANDS] = {2, 4, 1, 0, 3, 5};

/* convert_minddrive.py's _round(question, answer): conv_llava_qwen_2 as preprocess_qwen2(
 * training_mode=False) writes a round ("car." and the question with no space between them). The
 * decision answer's last token (random.choice of the speeds in the released code) is the first speed. */
#define MD_SYSTEM                                                                                                     \
    "<|im_start|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|im_end|>\n"
#define MD_ROUND(question, answer)                                                                                    \
    MD_SYSTEM "<|im_start|>user\n<image>\nYou are driving a car." question "<|im_end|>\n<|im_start|>assistant\n" answer
const char md_prompt_decision[] =
    MD_ROUND("What actions should the car be taking?", "The car should be <maintain_moderate_speed>");
const char md_prompt_action[] =
    MD_ROUND("Based on the above information, please provide a safe, executable, and reasonable planning trajectory "
             "for the ego car.",
             "Here is the planning trajectory " MD_WAYPOINT_TOKEN " " MD_PATH_WAYPOINT_TOKEN);

static int fail(char *why, size_t why_size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t why_size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_size, fmt, ap);
    va_end(ap);
    return -1;
}

/* The index of the first added token with this content, -1 when none has it. */
static int64_t added_index(const json_t *added, const char *content)
{
    size_t i;
    const json_t *e;
    json_array_foreach(added, i, e)
        if (!strcmp(json_string_value(json_object_get(e, "content")), content)) return (int64_t)i;
    return -1;
}

/* The id of `content` among the added tokens, -1 when it is not one. */
static int64_t added_id(const json_t *added, const char *content)
{
    const int64_t i = added_index(added, content);
    return i < 0 ? -1 : json_integer_value(json_object_get(json_array_get(added, (size_t)i), "id"));
}

int md_tokenizer_load(const char *path, md_tokenizer *t, char *why, size_t why_size)
{
    memset(t, 0, sizeof *t);
    t->eos_id = -1;
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) /* not a FIFO or a folder: reading one would block or fail */
        return fail(why, why_size, "%s: not a regular file (give the Qwen2 tokenizer.json)", path);
    json_error_t jerr;
    t->json = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!t->json) return fail(why, why_size, "%s: not a readable JSON file (line %d: %s)", path, jerr.line, jerr.text);
    const json_t *vocab = json_object_get(json_object_get(t->json, "model"), "vocab");
    json_t *added = json_object_get(t->json, "added_tokens");
    if (!json_is_object(vocab) || (added && !json_is_array(added)))
        return fail(why, why_size, "%s is not a Hugging Face tokenizer.json (no model.vocab / added_tokens); give the "
                    "Qwen2 tokenizer.json", path);
    if (!added) {
        json_object_set_new(t->json, "added_tokens", json_array());
        added = json_object_get(t->json, "added_tokens");
    }
    size_t i;
    const json_t *e;
    int64_t top = -1; /* the largest added id (tokenizers' next id is top + 1) */
    uint64_t extra = 0; /* added contents outside the vocabulary: len() counts vocab U added */
    json_array_foreach(added, i, e) {
        const json_t *c = json_object_get(e, "content"), *id = json_object_get(e, "id");
        if (!json_is_string(c) || !json_is_integer(id) || json_integer_value(id) < 0)
            return fail(why, why_size, "%s: added_tokens[%zu] is malformed", path, i);
        if (!json_object_get(vocab, json_string_value(c)) && added_index(added, json_string_value(c)) == (int64_t)i)
            extra++; /* a set of contents: counted at its first entry */
        if (json_integer_value(id) > top) top = json_integer_value(id);
        if (!strcmp(json_string_value(c), "<|endoftext|>")) t->eos_id = json_integer_value(id);
    }
    const uint64_t n_vocab = json_object_size(vocab);
    t->base_len = n_vocab + extra;
    uint64_t added_now = 0;
    for (int k = 0; k < MD_N_ADDED_TOKENS; k++) {
        const char *tok = md_added_tokens[k];
        const json_t *in_vocab = json_object_get(vocab, tok);
        const int64_t have = added_id(added, tok);
        if (have >= 0) t->ids[k] = have;
        else if (in_vocab) t->ids[k] = json_integer_value(in_vocab);
        else {
            const int64_t slow = (int64_t)(t->base_len + added_now);
            const int64_t fast = top >= (int64_t)n_vocab ? top + 1 : (int64_t)n_vocab;
            if (slow != fast)
                return fail(why, why_size, "%s: %s would get id %lld from transformers' slow tokenizer but %lld from "
                            "tokenizers (the vocabulary / added token ids have holes)", path, tok, (long long)slow,
                            (long long)fast);
            t->ids[k] = slow;
            t->is_new[k] = 1;
            top = slow;
            added_now++;
        }
    }
    t->n_entries = t->base_len;
    for (int k = 0; k < MD_N_ADDED_TOKENS; k++) {
        for (int j = 0; j < k; j++)
            if (t->ids[j] == t->ids[k])
                return fail(why, why_size, "%s: %s and %s would share id %lld", path, md_added_tokens[j],
                            md_added_tokens[k], (long long)t->ids[k]);
        if ((uint64_t)t->ids[k] + 1 > t->n_entries) t->n_entries = (uint64_t)t->ids[k] + 1;
    }
    return 0;
}

void md_tokenizer_free(md_tokenizer *t)
{
    json_decref(t->json);
    memset(t, 0, sizeof *t);
}

/* convert_minddrive.py's added_token_entry, in its key order. */
static json_t *added_entry(const char *content, int64_t id)
{
    return json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)id, "content", content, "single_word", 0,
                     "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1);
}

typedef struct by_id {
    json_t *entry;
    int64_t id;
    size_t order;
} by_id;

static int compare_by_id(const void *x, const void *y)
{
    const by_id *a = x, *b = y;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order; /* stable, as Python's sorted */
}

/* Copies of `entries` (NULL-free array), sorted by "id" into a new array. */
static json_t *sorted_by_id(json_t *entries)
{
    const size_t n = json_array_size(entries);
    by_id *v = malloc((n ? n : 1) * sizeof *v);
    json_t *out = json_array();
    if (!v || !out) {
        free(v);
        json_decref(out);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        v[i].entry = json_array_get(entries, i);
        v[i].id = json_integer_value(json_object_get(v[i].entry, "id"));
        v[i].order = i;
    }
    qsort(v, n, sizeof *v, compare_by_id);
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad |= json_array_append(out, v[i].entry);
    free(v);
    if (bad) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *md_tokenizer_json(const md_tokenizer *t)
{
    json_t *out = json_deep_copy(t->json), *entries = out ? json_object_get(out, "added_tokens") : NULL;
    if (!entries) {
        json_decref(out);
        return NULL;
    }
    for (int k = 0; k < MD_N_ADDED_TOKENS; k++)
        if (t->is_new[k] && json_array_append_new(entries, added_entry(md_added_tokens[k], t->ids[k]))) {
            json_decref(out);
            return NULL;
        }
    json_t *sorted = sorted_by_id(entries);
    if (!sorted || json_object_set_new(out, "added_tokens", sorted)) {
        json_decref(out);
        return NULL;
    }
    return out;
}

/* A decoder entry: the added token's fields but its id (converter order: content, lstrip, normalized,
 * rstrip, single_word, special). */
static json_t *decoder_entry(const json_t *e)
{
    return json_pack("{s:O, s:O, s:O, s:O, s:O, s:O}", "content", json_object_get(e, "content"), "lstrip",
                     json_object_get(e, "lstrip") ? json_object_get(e, "lstrip") : json_false(), "normalized",
                     json_object_get(e, "normalized") ? json_object_get(e, "normalized") : json_false(), "rstrip",
                     json_object_get(e, "rstrip") ? json_object_get(e, "rstrip") : json_false(), "single_word",
                     json_object_get(e, "single_word") ? json_object_get(e, "single_word") : json_false(), "special",
                     json_object_get(e, "special") ? json_object_get(e, "special") : json_false());
}

/* Qwen2's tokenizer_config.json for the given tokenizer (its fields as tests/minddrive/
 * make_tiny_minddrive.py writes them for a llava-qwen2 folder: Qwen2-0.5B's file with a short chat
 * template), with the 15 added to added_tokens_decoder as convert_minddrive.py does (keys by id). */
json_t *md_tokenizer_config(const md_tokenizer *t)
{
    json_t *with = md_tokenizer_json(t), *dec = json_object();
    json_t *entries = with ? json_object_get(with, "added_tokens") : NULL;
    if (!entries || !dec) {
        json_decref(with);
        json_decref(dec);
        return NULL;
    }
    size_t i;
    json_t *e;
    int bad = 0;
    json_array_foreach(entries, i, e) {
        char key[32];
        snprintf(key, sizeof key, "%lld", (long long)json_integer_value(json_object_get(e, "id")));
        if (!json_object_get(dec, key)) bad |= json_object_set_new(dec, key, decoder_entry(e));
    }
    json_decref(with);
    if (bad) {
        json_decref(dec);
        return NULL;
    }
    return json_pack("{s:b, s:o, s:[s, s], s:n, s:s, s:b, s:s, s:s, s:i, s:s, s:b, s:s, s:n}", "add_prefix_space", 0,
                     "added_tokens_decoder", dec, "additional_special_tokens", "<|im_start|>", "<|im_end|>",
                     "bos_token", "chat_template",
                     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                     "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
                     "}}{% endif %}",
                     "clean_up_tokenization_spaces", 0, "eos_token", "<|endoftext|>", "errors", "replace",
                     "model_max_length", 32768, "pad_token", "<|endoftext|>", "split_special_tokens", 0,
                     "tokenizer_class", "Qwen2Tokenizer", "unk_token");
}

json_t *md_added_tokens_json(const md_tokenizer *t)
{
    json_t *o = json_object();
    for (int k = 0; o && k < MD_N_ADDED_TOKENS; k++)
        if (json_object_set_new(o, md_added_tokens[k], json_integer(t->ids[k]))) {
            json_decref(o);
            return NULL;
        }
    return o;
}
