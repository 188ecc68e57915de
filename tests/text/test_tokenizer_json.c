/* tokenizer.json encoding against Hugging Face tokenizers' own ids: the fixtures in
 * tests/fixtures/tokenizer/tokenizer_json/ were written by tests/text/make_tokenizer_json_reference.py
 * with tokenizers 0.23.2 (five files, 517 texts each, encode with add_special_tokens False and
 * True). Also: OpenVLA-7B's tokenizer.json form gives sentencepiece's ids (an independent check of
 * both encoders), and malformed or unsupported files are refused with clear errors. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "text/bpe_tokenizer.h"
#include "text/hf_tokenizer.h"

static json_t *reference;

static void load_reference(void)
{
    char *path = vh_test_fixture_path("tokenizer/tokenizer_json/tokenizer_json_reference.json");
    json_error_t jerr;
    reference = json_load_file(path, 0, &jerr);
    free(path);
    if (!reference) {
        fprintf(stderr, "reference: %s\n", jerr.text);
        exit(1);
    }
}

static void free_reference(void) { json_decref(reference); }

static vh_hf_tokenizer *load_fixture(const char *file)
{
    char relative[256];
    snprintf(relative, sizeof relative, "tokenizer/tokenizer_json/%s.tokenizer.json", file);
    char *path = vh_test_fixture_path(relative);
    vh_hf_tokenizer *tok = NULL;
    vh_error err = {0};
    vh_status st = vh_hf_tokenizer_load(path, &tok, &err);
    ck_assert_msg(st == VH_OK, "%s: %s", path, err.message);
    free(path);
    return tok;
}

/* The text of a reference row (hex of UTF-8), malloc'd. */
static char *row_text(const json_t *row, size_t *len)
{
    const char *hex = json_string_value(json_object_get(row, "text"));
    ck_assert_ptr_nonnull(hex);
    size_t n = strlen(hex) / 2;
    char *text = malloc(n + 1);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        ck_assert(sscanf(hex + 2 * i, "%2x", &v) == 1);
        text[i] = (char)v;
    }
    text[n] = 0;
    *len = n;
    return text;
}

static int ids_equal(const json_t *expected, const int32_t *ids, size_t n)
{
    if (json_array_size(expected) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (json_integer_value(json_array_get(expected, i)) != ids[i]) return 0;
    return 1;
}

static void print_mismatch(const char *file, const char *key, const char *text,
                           const json_t *expected, const int32_t *ids, size_t n)
{
    fprintf(stderr, "%s %s: text \"%s\"\n  expected", file, key, text);
    for (size_t i = 0; i < json_array_size(expected); i++)
        fprintf(stderr, " %lld", (long long)json_integer_value(json_array_get(expected, i)));
    fprintf(stderr, "\n  got     ");
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* Whether text[0 .. len) (which may hold NUL bytes) contains needle. */
static int contains(const char *text, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(text + i, needle, n) == 0) return 1;
    return 0;
}

static const char *const files[] = {"llama2-legacy", "llama2-metaspace", "llama2-hf4",
                                    "gpt2-style", "qwen2-style"};

START_TEST(test_reference_ids)
{
    const char *file = files[_i];
    vh_hf_tokenizer *tok = load_fixture(file);
    const json_t *rows = json_object_get(json_object_get(reference, "files"), file);
    ck_assert_msg(json_array_size(rows) == 517, "%s: %zu rows", file, json_array_size(rows));
    size_t failures = 0;
    for (size_t r = 0; r < json_array_size(rows); r++) {
        const json_t *row = json_array_get(rows, r);
        size_t len;
        char *text = row_text(row, &len);
        for (int special = 0; special < 2; special++) {
            const char *key = special ? "ids_special" : "ids";
            int32_t *ids = NULL;
            size_t n = 0;
            vh_error err = {0};
            ck_assert_msg(vh_hf_tokenizer_encode(tok, text, len, special, &ids, &n, &err) == VH_OK,
                          "%s row %zu: %s", file, r, err.message);
            if (!ids_equal(json_object_get(row, key), ids, n)) {
                if (failures++ < 5) print_mismatch(file, key, text, json_object_get(row, key), ids, n);
            }
            free(ids);
        }
        free(text);
    }
    ck_assert_msg(failures == 0, "%s: %zu of %zu encodings differ from tokenizers'", file, failures,
                  2 * json_array_size(rows));
    vh_hf_tokenizer_free(tok);
}
END_TEST

/* OpenVLA-7B's tokenizer.json and Llama-2's tokenizer.model encode texts without added tokens
 * to the same ids, except where tokenizers itself differs from sentencepiece (the reference shows
 * 47 of 379 such texts differ, all of them with a leading space, two spaces in a row or a literal
 * "▁": tokenizers merges "▁▁..." runs by the merges list's rank where sentencepiece uses piece
 * scores, and Prepend/Replace does not drop a literal "▁" as sentencepiece's normalizer does).
 * Those texts are left out; every other one must agree. */
START_TEST(test_hf4_equals_sentencepiece)
{
    vh_hf_tokenizer *hf = load_fixture("llama2-hf4");
    char *model_path = vh_test_fixture_path("tokenizer/llama2-tokenizer.model");
    vh_tokenizer *sp = NULL;
    vh_error err = {0};
    ck_assert_msg(vh_tokenizer_load(model_path, &sp, &err) == VH_OK, "%s", err.message);
    free(model_path);
    const json_t *rows = json_object_get(json_object_get(reference, "files"), "llama2-hf4");
    size_t compared = 0;
    for (size_t r = 0; r < json_array_size(rows); r++) {
        size_t len;
        char *text = row_text(json_array_get(rows, r), &len);
        if (contains(text, len, "<s>") || contains(text, len, "</s>") ||
            contains(text, len, "<unk>") || contains(text, len, "<PAD>") || text[0] == ' ' ||
            contains(text, len, "  ") || contains(text, len, "\xe2\x96\x81")) {
            free(text);
            continue;
        }
        int32_t *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        ck_assert(vh_hf_tokenizer_encode(hf, text, len, false, &a, &na, &err) == VH_OK);
        ck_assert_msg(vh_tokenizer_encode(sp, text, len, &b, &nb, &err) == VH_OK, "%s",
                      err.message);
        ck_assert_msg(na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0),
                      "text \"%s\": tokenizer.json and tokenizer.model differ", text);
        compared++;
        free(a);
        free(b);
        free(text);
    }
    ck_assert_msg(compared > 250, "only %zu texts compared", compared);
    ck_assert_int_eq(vh_hf_tokenizer_bos_id(hf), vh_tokenizer_bos_id(sp));
    ck_assert_uint_eq(hf->vocab_size, 32001); /* + OpenVLA's <PAD> */
    vh_tokenizer_free(sp);
    vh_hf_tokenizer_free(hf);
}
END_TEST

/* Invalid UTF-8 reads as U+FFFD per bad byte, as the sentencepiece path does. */
START_TEST(test_invalid_utf8)
{
    vh_hf_tokenizer *tok = load_fixture("llama2-hf4");
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    vh_error err = {0};
    ck_assert(vh_hf_tokenizer_encode(tok, "a\xff" "b", 3, false, &a, &na, &err) == VH_OK);
    ck_assert(vh_hf_tokenizer_encode(tok, "a\xef\xbf\xbd" "b", 5, false, &b, &nb, &err) == VH_OK);
    ck_assert(na == nb && memcmp(a, b, na * sizeof *a) == 0);
    free(a);
    free(b);
    ck_assert(vh_hf_tokenizer_encode(tok, NULL, 1, false, &a, &na, &err) == VH_ERR_INVALID_ARGUMENT);
    ck_assert(vh_hf_tokenizer_encode(tok, "", 0, true, &a, &na, &err) == VH_OK);
    ck_assert_uint_eq(na, 1); /* <s> alone, as tokenizers gives for "" */
    free(a);
    vh_hf_tokenizer_free(tok);
}
END_TEST

/* A small valid file with one part replaced; `part` is a JSON fragment for key `key`. */
static vh_status load_variant(const char *key, const char *part, vh_error *err)
{
    char text[4096];
    const char *model = "{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}";
    snprintf(text, sizeof text,
             "{\"added_tokens\":[],\"normalizer\":%s,\"pre_tokenizer\":%s,\"model\":%s,"
             "\"post_processor\":%s}",
             strcmp(key, "normalizer") == 0 ? part : "null",
             strcmp(key, "pre_tokenizer") == 0 ? part : "null",
             strcmp(key, "model") == 0 ? part : model,
             strcmp(key, "post_processor") == 0 ? part : "null");
    vh_hf_tokenizer *tok = NULL;
    vh_status st = vh_hf_tokenizer_load_bytes(text, strlen(text), "variant", &tok, err);
    vh_hf_tokenizer_free(tok);
    return st;
}

typedef struct bad_case {
    const char *key, *part;
    vh_status status;
    const char *message; /* a substring of the error message */
} bad_case;

static const bad_case bad_cases[] = {
    {"normalizer", "{\"type\":\"Lowercase\"}", VH_ERR_UNSUPPORTED, "\"Lowercase\""},
    {"normalizer", "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFKC\"}]}", VH_ERR_UNSUPPORTED, "\"NFKC\""},
    {"normalizer", "{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" +\"},\"content\":\"x\"}", VH_ERR_UNSUPPORTED, "Regex"},
    {"normalizer", "{\"type\":\"Prepend\"}", VH_ERR_BAD_MODEL, "prepend"},
    {"normalizer", "[]", VH_ERR_BAD_MODEL, "not an object"},
    {"pre_tokenizer", "{\"type\":\"Whitespace\"}", VH_ERR_UNSUPPORTED, "\"Whitespace\""},
    {"pre_tokenizer", "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\d+\"},\"behavior\":\"Isolated\",\"invert\":false}", VH_ERR_UNSUPPORTED, "\\d+"},
    {"pre_tokenizer", "{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Isolated\"}", VH_ERR_UNSUPPORTED, "Regex"},
    {"pre_tokenizer", "{\"type\":\"Metaspace\",\"replacement\":\"ab\"}", VH_ERR_BAD_MODEL, "one character"},
    {"pre_tokenizer", "{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_scheme\":\"sometimes\"}", VH_ERR_BAD_MODEL, "sometimes"},
    {"model", "{\"type\":\"WordPiece\",\"vocab\":{}}", VH_ERR_UNSUPPORTED, "WordPiece"},
    {"model", "{\"type\":\"BPE\",\"dropout\":0.1,\"vocab\":{},\"merges\":[]}", VH_ERR_UNSUPPORTED, "dropout"},
    {"model", "{\"type\":\"BPE\",\"continuing_subword_prefix\":\"##\",\"vocab\":{},\"merges\":[]}", VH_ERR_UNSUPPORTED, "continuing_subword_prefix"},
    {"model", "{\"type\":\"BPE\",\"end_of_word_suffix\":\"</w>\",\"vocab\":{},\"merges\":[]}", VH_ERR_UNSUPPORTED, "end_of_word_suffix"},
    {"model", "{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a b\"]}", VH_ERR_BAD_MODEL, "\"b\" is not in the vocab"},
    {"model", "{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[\"a a a\"]}", VH_ERR_BAD_MODEL, "merges[0]"},
    {"model", "{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]}", VH_ERR_BAD_MODEL, "not an id"},
    {"model", "{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"unk_token\":\"<unk>\"}", VH_ERR_BAD_MODEL, "unk_token"},
    {"post_processor", "{\"type\":\"BertProcessing\"}", VH_ERR_UNSUPPORTED, "BertProcessing"},
    {"post_processor", "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\"}}],\"special_tokens\":{}}", VH_ERR_BAD_MODEL, "<s>"},
};

START_TEST(test_refused_parts)
{
    const bad_case *c = &bad_cases[_i];
    vh_error err = {0};
    vh_status st = load_variant(c->key, c->part, &err);
    ck_assert_msg(st == c->status, "%s %s: status %d (%s)", c->key, c->part, st, err.message);
    ck_assert_msg(strstr(err.message, c->message) != NULL, "message \"%s\" lacks \"%s\"",
                  err.message, c->message);
}
END_TEST

/* Truncated, garbage and wrong-shaped files: clear errors, no crash. */
START_TEST(test_malformed_files)
{
    char *path = vh_test_fixture_path("tokenizer/tokenizer_json/gpt2-style.tokenizer.json");
    size_t size;
    uint8_t *data = vh_test_read_file(path, &size);
    ck_assert_ptr_nonnull(data);
    vh_hf_tokenizer *tok = NULL;
    vh_error err = {0};
    for (size_t cut = 0; cut < size; cut += size / 7 + 1) {
        ck_assert_int_eq(vh_hf_tokenizer_load_bytes((char *)data, cut, "cut", &tok, &err),
                         VH_ERR_BAD_MODEL);
        ck_assert_ptr_null(tok);
        ck_assert(strstr(err.message, "JSON") != NULL);
    }
    const char *shapes[] = {"[]", "{}", "{\"model\":7}", "{\"model\":{\"type\":\"BPE\"}}",
                            "{\"model\":{\"type\":\"BPE\",\"vocab\":{}},\"added_tokens\":{}}",
                            "{\"model\":{\"type\":\"BPE\",\"vocab\":{}},\"added_tokens\":[{\"id\":1}]}",
                            "{\"model\":{\"type\":\"BPE\",\"vocab\":{}},\"truncation\":{\"max_length\":5}}",
                            "\xff\xfe"};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        vh_status st = vh_hf_tokenizer_load_bytes(shapes[i], strlen(shapes[i]), "shape", &tok, &err);
        ck_assert_msg(st == VH_ERR_BAD_MODEL || st == VH_ERR_UNSUPPORTED, "%s: %d", shapes[i], st);
        ck_assert_ptr_null(tok);
    }
    ck_assert_int_eq(vh_hf_tokenizer_load("/nonexistent/tokenizer.json", &tok, &err), VH_ERR_IO);
    ck_assert_int_eq(vh_hf_tokenizer_load("/", &tok, &err), VH_ERR_IO);
    free(data);
    free(path);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tokenizer_json");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_unchecked_fixture(tc, load_reference, free_reference);
    tcase_add_loop_test(tc, test_reference_ids, 0, (int)(sizeof files / sizeof *files));
    tcase_add_test(tc, test_hf4_equals_sentencepiece);
    tcase_add_test(tc, test_invalid_utf8);
    tcase_add_loop_test(tc, test_refused_parts, 0, (int)(sizeof bad_cases / sizeof *bad_cases));
    tcase_add_test(tc, test_malformed_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return vh_test_run_suite(suite()); }
