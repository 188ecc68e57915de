/* Token ids against sentencepiece's own: the reference files in tests/fixtures/tokenizer/ were
 * written by tests/text/make_tokenizer_reference.py with the sentencepiece Python module. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"
#include "text/bpe_tokenizer.h"

/* One text and the ids sentencepiece gave it. */
typedef struct reference_case {
    char *text;
    size_t text_size;
    int32_t *ids;
    size_t n_ids;
} reference_case;

typedef struct reference_set {
    reference_case *cases;
    size_t n_cases;
} reference_set;

static int hex_value(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Parse "<hex>\t<id> <id> ...": see make_tokenizer_reference.py. */
static void parse_case(char *line, reference_case *c)
{
    char *tab = strchr(line, '\t');
    ck_assert_msg(tab != NULL, "reference line without a tab: %.60s", line);
    size_t hex_len = (size_t)(tab - line);
    ck_assert(hex_len % 2 == 0);
    c->text_size = hex_len / 2;
    c->text = malloc(c->text_size + 1);
    ck_assert_ptr_nonnull(c->text);
    for (size_t i = 0; i < c->text_size; i++) {
        int hi = hex_value(line[2 * i]), lo = hex_value(line[2 * i + 1]);
        ck_assert(hi >= 0 && lo >= 0);
        c->text[i] = (char)(hi * 16 + lo);
    }
    c->text[c->text_size] = '\0';

    size_t cap = 16;
    c->ids = malloc(cap * sizeof *c->ids);
    c->n_ids = 0;
    for (char *p = tab + 1; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) break;
        if (c->n_ids == cap) {
            cap *= 2;
            c->ids = realloc(c->ids, cap * sizeof *c->ids);
            ck_assert_ptr_nonnull(c->ids);
        }
        c->ids[c->n_ids++] = (int32_t)v;
        p = end;
    }
}

static reference_set load_reference(const char *fixture)
{
    char *path = vh_test_fixture_path(fixture);
    size_t size;
    char *data = (char *)vh_test_read_file(path, &size);
    ck_assert_msg(data != NULL, "cannot read %s", path);
    free(path);

    reference_set set = {0};
    size_t cap = 0;
    for (char *line = data; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (line[0] != '#') {
            if (set.n_cases == cap) {
                cap = cap ? 2 * cap : 256;
                set.cases = realloc(set.cases, cap * sizeof *set.cases);
                ck_assert_ptr_nonnull(set.cases);
            }
            parse_case(line, &set.cases[set.n_cases++]);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(data);
    ck_assert_msg(set.n_cases > 100, "%s: only %zu cases", fixture, set.n_cases);
    return set;
}

static void free_reference(reference_set *set)
{
    for (size_t i = 0; i < set->n_cases; i++) {
        free(set->cases[i].text);
        free(set->cases[i].ids);
    }
    free(set->cases);
}

static vh_tokenizer *load_fixture_tokenizer(const char *fixture)
{
    char *path = vh_test_fixture_path(fixture);
    vh_tokenizer *tok = NULL;
    vh_error err = {0};
    vh_status st = vh_tokenizer_load(path, &tok, &err);
    ck_assert_msg(st == VH_OK, "loading %s: %s", path, err.message);
    free(path);
    return tok;
}

/* Write ids as "1 2 3" (at most about 200 characters) for failure messages. */
static void format_ids(const int32_t *ids, size_t n, char *out, size_t out_size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && used + 16 < out_size; i++)
        used += (size_t)snprintf(out + used, out_size - used, "%s%d", i ? " " : "", ids[i]);
}

/* Number of cases whose ids differ; describes the first one in first_failure. */
static size_t count_mismatches(const vh_tokenizer *tok, const reference_set *set,
                               char *first_failure, size_t failure_size)
{
    size_t bad = 0;
    for (size_t i = 0; i < set->n_cases; i++) {
        const reference_case *c = &set->cases[i];
        int32_t *ids = NULL;
        size_t n = 0;
        vh_error err = {0};
        vh_status st = vh_tokenizer_encode(tok, c->text, c->text_size, &ids, &n, &err);
        int same = st == VH_OK && n == c->n_ids && (n == 0 || memcmp(ids, c->ids, n * 4) == 0);
        if (!same && bad++ == 0 && first_failure) {
            char want[256], got[256];
            format_ids(c->ids, c->n_ids, want, sizeof want);
            format_ids(ids, st == VH_OK ? n : 0, got, sizeof got);
            snprintf(first_failure, failure_size,
                     "case %zu (%zu bytes, \"%.40s\"): status %d (%s), %zu ids [%s], "
                     "sentencepiece %zu ids [%s]",
                     i, c->text_size, c->text, (int)st, err.message, n, got, c->n_ids, want);
        }
        free(ids);
    }
    return bad;
}

static void check_model_against_reference(const char *model, const char *reference)
{
    vh_tokenizer *tok = load_fixture_tokenizer(model);
    reference_set set = load_reference(reference);
    char failure[2048] = "";
    size_t bad = count_mismatches(tok, &set, failure, sizeof failure);
    ck_assert_msg(bad == 0, "%s: %zu of %zu texts differ from sentencepiece; first: %s", model,
                  bad, set.n_cases, failure);
    free_reference(&set);
    vh_tokenizer_free(tok);
}

START_TEST(llama2_ids_match_sentencepiece)
{
    check_model_against_reference("tokenizer/llama2-tokenizer.model",
                                  "tokenizer/llama2_reference_ids.tsv");
}
END_TEST

/* Small models trained by sentencepiece, covering the options Llama-2's model does not use. */
static const char *const VARIANTS[] = {
    "byte_fallback",   "no_byte_fallback", "remove_ws",        "remove_ws_no_byte_fallback",
    "no_dummy_prefix", "suffix_no_escape", "suffix_remove_ws", "unused",
    "unused_no_byte_fallback", "tiny_unused",
};

START_TEST(variant_ids_match_sentencepiece)
{
    char model[256], reference[256];
    snprintf(model, sizeof model, "tokenizer/variant_%s.model", VARIANTS[_i]);
    snprintf(reference, sizeof reference, "tokenizer/variant_%s_reference_ids.tsv", VARIANTS[_i]);
    check_model_against_reference(model, reference);
}
END_TEST

/* The OpenVLA prompt, spelled out: ids printed by sentencepiece 0.1.97 for Llama-2. */
START_TEST(llama2_openvla_prompt)
{
    static const char prompt[] =
        "In: What action should the robot take to pick up the red block?\nOut:";
    static const int32_t expected[] = {512,  29901, 1724, 3158, 881,   278, 19964, 2125, 304,
                                       5839, 701,   278,  2654, 2908, 29973, 13,   3744, 29901};
    vh_tokenizer *tok = load_fixture_tokenizer("tokenizer/llama2-tokenizer.model");
    int32_t *ids;
    size_t n;
    vh_error err = {0};
    ck_assert_int_eq(vh_tokenizer_encode(tok, prompt, strlen(prompt), &ids, &n, &err), VH_OK);
    ck_assert_uint_eq(n, sizeof expected / sizeof expected[0]);
    ck_assert_mem_eq(ids, expected, sizeof expected);
    free(ids);
    vh_tokenizer_free(tok);
}
END_TEST

/* Vocabulary queries; values from sentencepiece 0.1.97 (vocab_size, bos_id, eos_id, unk_id,
 * piece_to_id, id_to_piece). */
START_TEST(llama2_vocabulary)
{
    vh_tokenizer *tok = load_fixture_tokenizer("tokenizer/llama2-tokenizer.model");
    ck_assert_uint_eq(vh_tokenizer_vocab_size(tok), 32000);
    ck_assert_int_eq(vh_tokenizer_bos_id(tok), 1);
    ck_assert_int_eq(vh_tokenizer_eos_id(tok), 2);
    ck_assert_int_eq(vh_tokenizer_unk_id(tok), 0);
    ck_assert_int_eq(vh_tokenizer_piece_to_id(tok, "<s>"), 1);
    ck_assert_int_eq(vh_tokenizer_piece_to_id(tok, "\xe2\x96\x81the"), 278);
    ck_assert_int_eq(vh_tokenizer_piece_to_id(tok, "<0x0A>"), 13);
    ck_assert_int_eq(vh_tokenizer_piece_to_id(tok, "no such piece at all"), -1);
    ck_assert_str_eq(vh_tokenizer_id_to_piece(tok, 0), "<unk>");
    ck_assert_str_eq(vh_tokenizer_id_to_piece(tok, 19964), "\xe2\x96\x81robot");
    ck_assert_str_eq(vh_tokenizer_id_to_piece(tok, 31999), "\xe7\xbb\x99");
    ck_assert_ptr_null(vh_tokenizer_id_to_piece(tok, 32000));
    ck_assert_ptr_null(vh_tokenizer_id_to_piece(tok, -1));
    vh_tokenizer_free(tok);
}
END_TEST

START_TEST(encode_rejects_bad_arguments)
{
    vh_tokenizer *tok = load_fixture_tokenizer("tokenizer/llama2-tokenizer.model");
    int32_t *ids = (int32_t *)1;
    size_t n = 99;
    vh_error err = {0};
    ck_assert_int_eq(vh_tokenizer_encode(tok, NULL, 3, &ids, &n, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert(err.message[0] != '\0');
    ck_assert_int_eq(vh_tokenizer_encode(tok, NULL, 0, &ids, &n, &err), VH_OK);
    ck_assert_ptr_null(ids);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(vh_tokenizer_encode(tok, "x", VH_TOKENIZER_MAX_TEXT_BYTES + 1, &ids, &n, &err),
                     VH_ERR_INVALID_ARGUMENT);
    vh_tokenizer_free(tok);
}
END_TEST

/* Several threads encode the whole reference with one tokenizer at once. */
typedef struct thread_job {
    const vh_tokenizer *tok;
    const reference_set *set;
    size_t mismatches;
} thread_job;

static void *encode_all(void *arg)
{
    thread_job *job = arg;
    job->mismatches = count_mismatches(job->tok, job->set, NULL, 0);
    return NULL;
}

START_TEST(concurrent_encoding)
{
    vh_tokenizer *tok = load_fixture_tokenizer("tokenizer/llama2-tokenizer.model");
    reference_set set = load_reference("tokenizer/llama2_reference_ids.tsv");
    enum { N_THREADS = 4 };
    pthread_t threads[N_THREADS];
    thread_job jobs[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        jobs[i] = (thread_job){tok, &set, 0};
        ck_assert_int_eq(pthread_create(&threads[i], NULL, encode_all, &jobs[i]), 0);
    }
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(threads[i], NULL);
        ck_assert_uint_eq(jobs[i].mismatches, 0);
    }
    free_reference(&set);
    vh_tokenizer_free(tok);
}
END_TEST

/* The encode's work (merge candidates looked up, heap moves) for text[0 .. size). */
static uint64_t encode_steps(const vh_tokenizer *tok, const char *text, size_t size, size_t *n_ids)
{
    int32_t *ids;
    uint64_t steps = 0;
    vh_error err = {0};
    ck_assert_int_eq(vh_tokenizer_encode_counted(tok, text, size, &ids, n_ids, &steps, &err), VH_OK);
    free(ids);
    return steps;
}

/* O(n log n), not quadratic, counted in operations rather than timed (a timed ratio fails on a
 * busy machine): 4x the text does under 6x the work (n log n gives 4 (1 + 2 / log2 n) = 4.4x at
 * these sizes, a quadratic merge 16x), and the whole stays within a small multiple of
 * n log2 n for its n symbols. */
START_TEST(long_text_is_fast)
{
    vh_tokenizer *tok = load_fixture_tokenizer("tokenizer/llama2-tokenizer.model");
    static const char *const words[] = {"robot ", "pick ", "the ", "red ", "block ", "  ",
                                        "\xe6\x9c\xba\xe5\x99\xa8 ", "\xf0\x9f\xa4\x96", "42 "};
    size_t size = (size_t)1 << 20, used = 0;
    char *text = malloc(size);
    ck_assert_ptr_nonnull(text);
    unsigned seed = 7;
    while (used < size) {
        seed = seed * 1103515245u + 12345u;
        const char *w = words[(seed >> 16) % (sizeof words / sizeof words[0])];
        size_t len = strlen(w);
        if (used + len > size) len = size - used;
        memcpy(text + used, w, len);
        used += len;
    }
    size_t n_quarter, n;
    const uint64_t quarter = encode_steps(tok, text, size / 4, &n_quarter);
    const uint64_t whole = encode_steps(tok, text, size, &n);
    ck_assert_uint_gt(n, size / 16);
    ck_assert_uint_gt(n, 3 * n_quarter);
    ck_assert_uint_gt(quarter, size / 4); /* the counter counts: at least a step a byte */
    ck_assert_msg((double)whole < 6.0 * (double)quarter,
                  "1 MB took %llu steps, 256 KB %llu: worse than n log n", (unsigned long long)whole,
                  (unsigned long long)quarter);
    ck_assert_msg((double)whole < 8.0 * (double)size * 20.0, "1 MB took %llu steps (n log2 n = %.0f)",
                  (unsigned long long)whole, (double)size * 20.0);
    free(text);
    vh_tokenizer_free(tok);
}
END_TEST

static Suite *tokenizer_ids_suite(void)
{
    Suite *s = suite_create("tokenizer_ids");
    TCase *tc = tcase_create("ids");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, llama2_ids_match_sentencepiece);
    tcase_add_loop_test(tc, variant_ids_match_sentencepiece, 0,
                        (int)(sizeof VARIANTS / sizeof VARIANTS[0]));
    tcase_add_test(tc, llama2_openvla_prompt);
    tcase_add_test(tc, llama2_vocabulary);
    tcase_add_test(tc, encode_rejects_bad_arguments);
    tcase_add_test(tc, concurrent_encoding);
    tcase_add_test(tc, long_text_is_fast);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return vh_test_run_suite(tokenizer_ids_suite()); }
