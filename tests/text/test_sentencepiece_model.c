/* sentencepiece model files: the fields read from Llama-2's tokenizer.model, and one test per
 * defect class of a malformed or unsupported file (built here byte by byte), each of which must
 * give its status and a message, never a crash. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_support.h"
#include "text/bpe_tokenizer.h"
#include "text/sentencepiece_model.h"

/* ---- a protobuf writer for hand-made model files ------------------------------------------- */

typedef struct pbuf {
    uint8_t *data;
    size_t size, cap;
} pbuf;

static void put_bytes(pbuf *b, const void *p, size_t n)
{
    if (b->size + n > b->cap) {
        b->cap = (b->size + n) * 2 + 64;
        b->data = realloc(b->data, b->cap);
        ck_assert_ptr_nonnull(b->data);
    }
    if (n) memcpy(b->data + b->size, p, n);
    b->size += n;
}

static void put_varint(pbuf *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7F);
        v >>= 7;
        if (v) c |= 0x80;
        put_bytes(b, &c, 1);
    } while (v);
}

static void put_tag(pbuf *b, uint32_t field, uint32_t wire)
{
    put_varint(b, (uint64_t)field << 3 | wire);
}

static void put_len_field(pbuf *b, uint32_t field, const void *p, size_t n)
{
    put_tag(b, field, 2);
    put_varint(b, n);
    put_bytes(b, p, n);
}

static void put_string(pbuf *b, uint32_t field, const char *s)
{
    put_len_field(b, field, s, strlen(s));
}

static void put_message(pbuf *b, uint32_t field, const pbuf *m)
{
    put_len_field(b, field, m->data, m->size);
}

static void put_uint(pbuf *b, uint32_t field, uint64_t v)
{
    put_tag(b, field, 0);
    put_varint(b, v);
}

static void put_float(pbuf *b, uint32_t field, float f)
{
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint8_t le[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16),
                     (uint8_t)(bits >> 24)};
    put_tag(b, field, 5);
    put_bytes(b, le, 4);
}

static void put_piece(pbuf *b, const char *text, float score, int type)
{
    pbuf p = {0};
    put_string(&p, 1, text);
    put_float(&p, 2, score);
    if (type != 1) put_uint(&p, 3, (uint64_t)type);
    put_message(b, 1, &p);
    free(p.data);
}

/* What a hand-made model holds; tests change one thing at a time. */
typedef struct model_spec {
    int model_type;               /* 0: field absent */
    int byte_fallback;
    const char *normalizer_name;  /* NULL: absent */
    const char *charsmap;         /* NULL: absent */
    int remove_extra_whitespaces; /* -1: absent */
    int unk_type;                 /* type of piece 0, normally UNKNOWN (2) */
    const char *extra_piece;      /* appended NORMAL piece, or NULL */
    int extra_piece_type;
    int unknown_fields;           /* add unknown fields of every wire type everywhere */
} model_spec;

static model_spec default_spec(void)
{
    return (model_spec){.model_type = 2, .normalizer_name = "identity",
                        .remove_extra_whitespaces = 0, .unk_type = 2, .extra_piece_type = 1};
}

static void put_unknown_fields(pbuf *b)
{
    put_uint(b, 1000, 12345);                         /* varint */
    put_tag(b, 1001, 1);                              /* I64 */
    put_bytes(b, "\1\2\3\4\5\6\7\x08", 8);
    put_string(b, 1002, "unknown bytes");             /* LEN */
    put_tag(b, 1003, 5);                              /* I32 */
    put_bytes(b, "\1\2\3\4", 4);
    put_tag(b, 1004, 3);                              /* a group holding a field and a group */
    put_uint(b, 1, 7);
    put_tag(b, 2, 3);
    put_string(b, 3, "inner");
    put_tag(b, 2, 4);
    put_tag(b, 1004, 4);
}

static pbuf build_model(const model_spec *spec)
{
    static const char *const normal[] = {"\xe2\x96\x81", "a", "b", "c", "\xe2\x96\x81" "a", "ab",
                                         "abc", "\xe2\x96\x81" "ab"};
    pbuf m = {0};
    if (spec->unknown_fields) put_unknown_fields(&m);
    put_piece(&m, "<unk>", 0, spec->unk_type);
    put_piece(&m, "<s>", 0, 3);
    put_piece(&m, "</s>", 0, 3);
    if (spec->byte_fallback) {
        for (int i = 0; i < 256; i++) {
            char text[8];
            snprintf(text, sizeof text, "<0x%02X>", i);
            put_piece(&m, text, 0, 6);
        }
    }
    for (size_t i = 0; i < sizeof normal / sizeof normal[0]; i++)
        put_piece(&m, normal[i], -(float)i, 1);
    if (spec->extra_piece) put_piece(&m, spec->extra_piece, -100, spec->extra_piece_type);

    pbuf trainer = {0};
    if (spec->unknown_fields) put_unknown_fields(&trainer);
    if (spec->model_type) put_uint(&trainer, 3, (uint64_t)spec->model_type);
    if (spec->byte_fallback) put_uint(&trainer, 35, 1);
    put_uint(&trainer, 43, (uint64_t)(int64_t)-1); /* pad_id = -1: a 10-byte varint */
    put_message(&m, 2, &trainer);
    free(trainer.data);

    pbuf normalizer = {0};
    if (spec->unknown_fields) put_unknown_fields(&normalizer);
    if (spec->normalizer_name) put_string(&normalizer, 1, spec->normalizer_name);
    if (spec->charsmap) put_string(&normalizer, 2, spec->charsmap);
    if (spec->remove_extra_whitespaces >= 0)
        put_uint(&normalizer, 4, (uint64_t)spec->remove_extra_whitespaces);
    put_message(&m, 3, &normalizer);
    free(normalizer.data);
    if (spec->unknown_fields) put_unknown_fields(&m);
    return m;
}

/* Load bytes as a tokenizer; the status, with the message checked to be there on failure. */
static vh_status try_load(const uint8_t *data, size_t size, vh_tokenizer **out, char *message,
                          size_t message_size)
{
    vh_error err = {0};
    vh_tokenizer *tok = NULL;
    vh_status st = vh_tokenizer_load_bytes(data, size, "test.model", &tok, &err);
    if (st != VH_OK) {
        ck_assert_ptr_null(tok);
        ck_assert_msg(err.status == st, "the error's status differs from the returned one");
        ck_assert_msg(strlen(err.message) > 10, "no message for status %d", (int)st);
        ck_assert_msg(strstr(err.message, "test.model") != NULL,
                      "message without the file name: %s", err.message);
    }
    if (message) snprintf(message, message_size, "%s", err.message);
    if (out)
        *out = tok;
    else
        vh_tokenizer_free(tok);
    return st;
}

static void expect_status(const pbuf *m, vh_status expected, const char *message_part)
{
    char message[VH_ERROR_MESSAGE_SIZE];
    vh_status st = try_load(m->data, m->size, NULL, message, sizeof message);
    ck_assert_msg(st == expected, "status %d, expected %d (%s)", (int)st, (int)expected, message);
    if (message_part)
        ck_assert_msg(strstr(message, message_part) != NULL, "message \"%s\" lacks \"%s\"",
                      message, message_part);
}

static void expect_spec_status(model_spec spec, vh_status expected, const char *message_part)
{
    pbuf m = build_model(&spec);
    expect_status(&m, expected, message_part);
    free(m.data);
}

static void encode_ok(const vh_tokenizer *tok, const char *text, int32_t **ids, size_t *n)
{
    vh_error err = {0};
    ck_assert_msg(vh_tokenizer_encode(tok, text, strlen(text), ids, n, &err) == VH_OK, "%s",
                  err.message);
}

/* ---- Llama-2's model ----------------------------------------------------------------------- */

/* Field values as decoded from the file by an independent Python protobuf reader. */
START_TEST(llama2_fields)
{
    char *path = vh_test_fixture_path("tokenizer/llama2-tokenizer.model");
    size_t size;
    uint8_t *data = vh_test_read_file(path, &size);
    ck_assert_ptr_nonnull(data);
    vh_sp_model m;
    vh_error err = {0};
    ck_assert_msg(vh_sp_model_parse(data, size, path, &m, &err) == VH_OK, "%s", err.message);
    free(data);
    free(path);

    ck_assert_uint_eq(m.n_pieces, 32000);
    ck_assert_int_eq(m.model_type, VH_SP_MODEL_BPE);
    ck_assert(m.byte_fallback);
    ck_assert(!m.treat_whitespace_as_suffix);
    ck_assert_int_eq(m.unk_id, 0);
    ck_assert_int_eq(m.bos_id, 1);
    ck_assert_int_eq(m.eos_id, 2);
    ck_assert_int_eq(m.pad_id, -1);
    ck_assert_str_eq(m.unk_piece, "<unk>");
    ck_assert_str_eq(m.bos_piece, "<s>");
    ck_assert_str_eq(m.eos_piece, "</s>");
    ck_assert_str_eq(m.pad_piece, "<pad>");
    ck_assert_str_eq(m.normalizer_name, "identity");
    ck_assert_uint_eq(m.precompiled_charsmap_size, 0);
    ck_assert(m.add_dummy_prefix);
    ck_assert(!m.remove_extra_whitespaces);
    ck_assert(m.escape_whitespaces);
    ck_assert_uint_eq(m.n_self_test_samples, 0);

    ck_assert_str_eq(m.pieces[0].text, "<unk>");
    ck_assert_int_eq(m.pieces[0].type, VH_SP_PIECE_UNKNOWN);
    ck_assert_int_eq(m.pieces[1].type, VH_SP_PIECE_CONTROL);
    ck_assert_str_eq(m.pieces[3].text, "<0x00>");
    ck_assert_int_eq(m.pieces[3].type, VH_SP_PIECE_BYTE);
    ck_assert_str_eq(m.pieces[259].text, "\xe2\x96\x81\xe2\x96\x81");
    ck_assert_uint_eq(m.pieces[259].size, 6);
    ck_assert_int_eq(m.pieces[259].type, VH_SP_PIECE_NORMAL);
    ck_assert(m.pieces[259].score == 0.0f || m.pieces[259].score < 0.0f);
    uint32_t counts[7] = {0};
    for (uint32_t i = 0; i < m.n_pieces; i++) counts[m.pieces[i].type]++;
    ck_assert_uint_eq(counts[VH_SP_PIECE_NORMAL], 31741);
    ck_assert_uint_eq(counts[VH_SP_PIECE_BYTE], 256);
    ck_assert_uint_eq(counts[VH_SP_PIECE_CONTROL], 2);
    ck_assert_uint_eq(counts[VH_SP_PIECE_UNKNOWN], 1);
    vh_sp_model_release(&m);
}
END_TEST

/* Every prefix of the file that cuts into the pieces is refused; no prefix crashes. */
START_TEST(llama2_truncated)
{
    char *path = vh_test_fixture_path("tokenizer/llama2-tokenizer.model");
    size_t size;
    uint8_t *data = vh_test_read_file(path, &size);
    ck_assert_ptr_nonnull(data);
    free(path);
    for (size_t cut = 0; cut < size; cut += (cut < 256 || cut > size - 600) ? 1 : 4999) {
        uint8_t *copy = malloc(cut ? cut : 1); /* exactly `cut` bytes, for memory checkers */
        memcpy(copy, data, cut);
        vh_status st = try_load(copy, cut, NULL, NULL, 0);
        free(copy);
        /* Cut inside a field: BAD_MODEL. Cut between pieces: no trainer_spec, so the model
         * type is the default UNIGRAM: UNSUPPORTED. Only the normalizer_spec at the very end
         * may be cut away whole (its defaults are valid). */
        if (cut < size - 600 || cut == size - 1)
            ck_assert_msg(st == VH_ERR_BAD_MODEL || st == VH_ERR_UNSUPPORTED,
                          "cut at %zu of %zu: status %d", cut, size, (int)st);
        else
            ck_assert(st == VH_OK || st == VH_ERR_BAD_MODEL || st == VH_ERR_UNSUPPORTED);
    }
    free(data);
}
END_TEST

/* Random byte changes to a small real model: any status, but no crash, and a model that loads
 * still encodes. */
START_TEST(mutated_models)
{
    char *path = vh_test_fixture_path("tokenizer/variant_unused.model");
    size_t size;
    uint8_t *data = vh_test_read_file(path, &size);
    ck_assert_ptr_nonnull(data);
    free(path);
    uint8_t *copy = malloc(size);
    uint32_t seed = 12345;
    size_t loaded = 0;
    for (int round = 0; round < 3000; round++) {
        memcpy(copy, data, size);
        int n_changes = 1 + round % 4;
        for (int k = 0; k < n_changes; k++) {
            seed = seed * 1664525u + 1013904223u;
            size_t at = (seed >> 8) % size;
            seed = seed * 1664525u + 1013904223u;
            copy[at] = (uint8_t)(seed >> 24);
        }
        vh_tokenizer *tok;
        if (try_load(copy, size, &tok, NULL, 0) == VH_OK) {
            loaded++;
            int32_t *ids;
            size_t n;
            vh_error err = {0};
            static const char text[] = "the  robot<image> picks \xff up 42 \xe6\x9c\xba [ACT]y  x";
            vh_status st = vh_tokenizer_encode(tok, text, sizeof text - 1, &ids, &n, &err);
            ck_assert(st == VH_OK || st == VH_ERR_INVALID_ARGUMENT);
            if (st == VH_OK) free(ids);
            vh_tokenizer_free(tok);
        }
    }
    ck_assert_uint_gt(loaded, 0); /* changes to scores and texts leave valid models */
    free(copy);
    free(data);
}
END_TEST

/* ---- hand-made models: one test per defect class ------------------------------------------- */

START_TEST(minimal_model_loads)
{
    model_spec spec = default_spec();
    pbuf m = build_model(&spec);
    vh_tokenizer *tok;
    ck_assert_int_eq(try_load(m.data, m.size, &tok, NULL, 0), VH_OK);
    ck_assert_uint_eq(vh_tokenizer_vocab_size(tok), 11);
    ck_assert_int_eq(vh_tokenizer_bos_id(tok), 1);
    ck_assert_int_eq(vh_tokenizer_eos_id(tok), 2);
    /* "abc" -> "▁abc": symbols ▁ a b c. ▁a (score -4) beats ab (-5) and merges first, then
     * ▁a + b = ▁ab (-7); ▁ab + c is no piece. */
    int32_t *ids;
    size_t n;
    encode_ok(tok, "abc", &ids, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 10); /* ▁ab */
    ck_assert_int_eq(ids[1], 6);  /* c */
    free(ids);
    /* "d" is unknown and there is no byte fallback: ▁ then one unk. */
    encode_ok(tok, "dd", &ids, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], 3);
    ck_assert_int_eq(ids[1], 0);
    free(ids);
    vh_tokenizer_free(tok);
    free(m.data);
}
END_TEST

START_TEST(unknown_fields_are_skipped)
{
    model_spec plain = default_spec(), extra = default_spec();
    extra.unknown_fields = 1;
    pbuf a = build_model(&plain), b = build_model(&extra);
    vh_tokenizer *ta, *tb;
    ck_assert_int_eq(try_load(a.data, a.size, &ta, NULL, 0), VH_OK);
    ck_assert_int_eq(try_load(b.data, b.size, &tb, NULL, 0), VH_OK);
    int32_t *ids_a, *ids_b;
    size_t na, nb;
    encode_ok(ta, "abc ab ca a", &ids_a, &na);
    encode_ok(tb, "abc ab ca a", &ids_b, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_mem_eq(ids_a, ids_b, na * sizeof *ids_a);
    free(ids_a);
    free(ids_b);
    vh_tokenizer_free(ta);
    vh_tokenizer_free(tb);
    free(a.data);
    free(b.data);
}
END_TEST

START_TEST(empty_and_garbage)
{
    ck_assert_int_eq(try_load((const uint8_t *)"", 0, NULL, NULL, 0), VH_ERR_BAD_MODEL);
    uint8_t garbage[4096];
    uint32_t seed = 99;
    for (int round = 0; round < 200; round++) {
        for (size_t i = 0; i < sizeof garbage; i++) {
            seed = seed * 1664525u + 1013904223u;
            garbage[i] = (uint8_t)(seed >> 24);
        }
        vh_status st = try_load(garbage, 1 + (size_t)round * 20, NULL, NULL, 0);
        ck_assert(st == VH_ERR_BAD_MODEL || st == VH_ERR_UNSUPPORTED);
    }
    /* Text is not a model. */
    static const char text[] = "this is not a sentencepiece model\n";
    ck_assert_int_eq(try_load((const uint8_t *)text, sizeof text - 1, NULL, NULL, 0),
                     VH_ERR_BAD_MODEL);
}
END_TEST

START_TEST(wire_format_defects)
{
    struct {
        const char *bytes;
        size_t size;
        const char *message_part;
    } cases[] = {
        {"\x0a", 1, "truncated varint"},                            /* tag, no length */
        {"\x0a\x80", 2, "truncated varint"},                        /* length cut */
        {"\x0a\x05\x0a\x01", 4, "past the end"},                    /* length > bytes left */
        {"\x0a\x03\x0a\x05" "a", 5, "past the end"},                /* inner length too long */
        {"\x0e\x00", 2, "wire type 6"},                             /* wire type 6 */
        {"\x0f\x00", 2, "wire type 7"},                             /* wire type 7 */
        {"\x02\x00", 2, "field number 0"},
        {"\x08\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 12, "overflows"}, /* 11 bytes */
        {"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 11, "overflows"},   /* > 64 bits */
        {"\xa3\x06\x08\x01", 4, "not closed"},                      /* group 100 left open */
        {"\xa3\x06\xac\x06", 4, "closed by field 101"},             /* wrong end-group */
        {"\xa4\x06", 2, "end-group"},                               /* end-group alone */
        {"\x09\x01\x02\x03", 4, "truncated 64-bit"},
        {"\x0d\x01\x02", 3, "truncated 32-bit"},
        {"\x10\x01", 2, "wire type 0, expected 2"},                 /* pieces as a varint */
        {"\x0a\x02\x10\x01", 4, "wire type 0, expected 5"},         /* score as a varint */
        {"\x0a\x02\x18\x07" "\x0a\x01\x61", 7, "the piece is empty"}, /* no text, type 7 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char message[VH_ERROR_MESSAGE_SIZE];
        vh_status st = try_load((const uint8_t *)cases[i].bytes, cases[i].size, NULL, message,
                                sizeof message);
        ck_assert_msg(st == VH_ERR_BAD_MODEL, "case %zu: status %d (%s)", i, (int)st, message);
        ck_assert_msg(strstr(message, cases[i].message_part) != NULL,
                      "case %zu: message \"%s\" lacks \"%s\"", i, message, cases[i].message_part);
    }
}
END_TEST

START_TEST(bad_pieces)
{
    model_spec spec = default_spec();
    spec.extra_piece = "\xff\xfe";
    expect_spec_status(spec, VH_ERR_BAD_MODEL, "not valid UTF-8");
    spec.extra_piece = "\xed\xa0\x80"; /* a surrogate */
    expect_spec_status(spec, VH_ERR_BAD_MODEL, "not valid UTF-8");
    spec.extra_piece = "";
    expect_spec_status(spec, VH_ERR_BAD_MODEL, "empty");
    spec.extra_piece = "xyz";
    spec.extra_piece_type = 7;
    expect_spec_status(spec, VH_ERR_BAD_MODEL, "unknown piece type 7");
    spec.extra_piece_type = 0;
    expect_spec_status(spec, VH_ERR_BAD_MODEL, "unknown piece type 0");

    /* A NaN score. */
    pbuf m = {0};
    pbuf p = {0};
    put_string(&p, 1, "x");
    put_float(&p, 2, NAN);
    put_message(&m, 1, &p);
    expect_status(&m, VH_ERR_BAD_MODEL, "NaN");
    free(p.data);
    free(m.data);
}
END_TEST

START_TEST(inconsistent_vocabulary)
{
    model_spec spec = default_spec();
    spec.extra_piece = "ab"; /* already piece 8 */
    expect_spec_status(spec, VH_ERR_BAD_MODEL, "already defined");
    spec.extra_piece = "<s>"; /* a second CONTROL "<s>" */
    spec.extra_piece_type = 3;
    expect_spec_status(spec, VH_ERR_BAD_MODEL, "already defined");
    spec.extra_piece = "<unk2>"; /* a second UNKNOWN */
    spec.extra_piece_type = 2;
    expect_spec_status(spec, VH_ERR_BAD_MODEL, "both UNKNOWN");

    spec = default_spec();
    spec.unk_type = 3; /* no UNKNOWN piece at all */
    expect_spec_status(spec, VH_ERR_BAD_MODEL, "no UNKNOWN");

    spec = default_spec();
    spec.extra_piece = "<0x41>"; /* a BYTE piece without byte_fallback */
    spec.extra_piece_type = 6;
    expect_spec_status(spec, VH_ERR_BAD_MODEL, "byte_fallback is off");

    spec = default_spec();
    spec.byte_fallback = 1;
    spec.extra_piece = "<0x4g>";
    spec.extra_piece_type = 6;
    expect_spec_status(spec, VH_ERR_BAD_MODEL, "not of the form");
    spec.extra_piece = "<0x4a>"; /* lowercase hex is not sentencepiece's spelling */
    expect_spec_status(spec, VH_ERR_BAD_MODEL, "not of the form");

    /* byte_fallback with the 256 byte pieces loads; without them it does not. */
    spec = default_spec();
    spec.byte_fallback = 1;
    expect_spec_status(spec, VH_OK, NULL);
    pbuf m = {0};
    put_piece(&m, "<unk>", 0, 2);
    put_piece(&m, "<0x00>", 0, 6);
    pbuf trainer = {0};
    put_uint(&trainer, 3, 2);
    put_uint(&trainer, 35, 1);
    put_message(&m, 2, &trainer);
    expect_status(&m, VH_ERR_BAD_MODEL, "no piece <0x01>");
    free(trainer.data);
    free(m.data);
}
END_TEST

START_TEST(unsupported_models)
{
    model_spec spec = default_spec();
    spec.model_type = 0; /* absent: UNIGRAM */
    expect_spec_status(spec, VH_ERR_UNSUPPORTED, "UNIGRAM");
    spec.model_type = 1;
    expect_spec_status(spec, VH_ERR_UNSUPPORTED, "UNIGRAM");
    spec.model_type = 3;
    expect_spec_status(spec, VH_ERR_UNSUPPORTED, "WORD");
    spec.model_type = 4;
    expect_spec_status(spec, VH_ERR_UNSUPPORTED, "CHAR");
    spec.model_type = 9;
    expect_spec_status(spec, VH_ERR_UNSUPPORTED, "only BPE");

    spec = default_spec();
    spec.charsmap = "\x04\x00\x00\x00rules";
    expect_spec_status(spec, VH_ERR_UNSUPPORTED, "precompiled_charsmap");
    spec = default_spec();
    spec.normalizer_name = "nmt_nfkc";
    expect_spec_status(spec, VH_ERR_UNSUPPORTED, "nmt_nfkc");

    /* Supported: no normalizer name, and remove_extra_whitespaces (absent means true). */
    spec = default_spec();
    spec.normalizer_name = NULL;
    spec.remove_extra_whitespaces = -1;
    expect_spec_status(spec, VH_OK, NULL);
}
END_TEST

START_TEST(too_many_pieces)
{
    /* VH_SP_MAX_PIECES + 1 empty piece fields, 2 bytes each. */
    size_t n = (size_t)VH_SP_MAX_PIECES + 1;
    uint8_t *data = malloc(2 * n);
    ck_assert_ptr_nonnull(data);
    for (size_t i = 0; i < n; i++) data[2 * i] = 0x0a, data[2 * i + 1] = 0x00;
    char message[VH_ERROR_MESSAGE_SIZE];
    ck_assert_int_eq(try_load(data, 2 * n, NULL, message, sizeof message), VH_ERR_BAD_MODEL);
    ck_assert_msg(strstr(message, "more than") != NULL, "%s", message);
    free(data);
}
END_TEST

START_TEST(file_errors)
{
    vh_tokenizer *tok = (vh_tokenizer *)1;
    vh_error err = {0};
    ck_assert_int_eq(vh_tokenizer_load("/nonexistent/tokenizer.model", &tok, &err), VH_ERR_IO);
    ck_assert_ptr_null(tok);
    ck_assert(strstr(err.message, "/nonexistent/tokenizer.model") != NULL);
    char *dir = vh_test_make_temp_dir();
    ck_assert_int_eq(vh_tokenizer_load(dir, &tok, &err), VH_ERR_IO);
    vh_test_remove_tree(dir);
    free(dir);
    char *empty = vh_test_write_temp("", 0, ".model");
    ck_assert_int_eq(vh_tokenizer_load(empty, &tok, &err), VH_ERR_BAD_MODEL);
    unlink(empty);
    free(empty);
    ck_assert_int_eq(vh_tokenizer_load(NULL, &tok, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_tokenizer_load("x", NULL, &err), VH_ERR_INVALID_ARGUMENT);
}
END_TEST

static Suite *sentencepiece_model_suite(void)
{
    Suite *s = suite_create("sentencepiece_model");
    TCase *tc = tcase_create("model");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, llama2_fields);
    tcase_add_test(tc, llama2_truncated);
    tcase_add_test(tc, mutated_models);
    tcase_add_test(tc, minimal_model_loads);
    tcase_add_test(tc, unknown_fields_are_skipped);
    tcase_add_test(tc, empty_and_garbage);
    tcase_add_test(tc, wire_format_defects);
    tcase_add_test(tc, bad_pieces);
    tcase_add_test(tc, inconsistent_vocabulary);
    tcase_add_test(tc, unsupported_models);
    tcase_add_test(tc, too_many_pieces);
    tcase_add_test(tc, file_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return vh_test_run_suite(sentencepiece_model_suite()); }
