#include "text/sentencepiece_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/protobuf_wire.h"
#include "text/utf8.h"

/* A string field while parsing: a range of the input, copied into the pool at the end. */
typedef struct text_span {
    const uint8_t *data;
    size_t size;
} text_span;

/* Piece texts are kept in pieces[i].text/size, pointing into the input, until copy_strings(). */
typedef struct parse_state {
    vh_sp_model *model;
    text_span unk_piece, bos_piece, eos_piece, pad_piece, normalizer_name;
} parse_state;

/* ---- typed field readers: each checks the wire type the schema gives the field ---------- */

static vh_status read_bool(vh_pb_reader *r, uint32_t field, uint32_t wire, bool *out,
                           const char *what, vh_error *err)
{
    uint64_t v;
    vh_status st = vh_pb_expect_wire(r, field, wire, VH_PB_WIRE_VARINT, what, err);
    if (st == VH_OK) st = vh_pb_read_varint(r, &v, what, err);
    if (st == VH_OK) *out = v != 0;
    return st;
}

/* An int32 or enum: protobuf keeps the low 32 bits of the varint (negatives use all 10 bytes). */
static vh_status read_int32(vh_pb_reader *r, uint32_t field, uint32_t wire, int32_t *out,
                            const char *what, vh_error *err)
{
    uint64_t v;
    vh_status st = vh_pb_expect_wire(r, field, wire, VH_PB_WIRE_VARINT, what, err);
    if (st == VH_OK) st = vh_pb_read_varint(r, &v, what, err);
    if (st == VH_OK) *out = (int32_t)(uint32_t)v;
    return st;
}

static vh_status read_span(vh_pb_reader *r, uint32_t field, uint32_t wire, text_span *out,
                           const char *what, vh_error *err)
{
    vh_status st = vh_pb_expect_wire(r, field, wire, VH_PB_WIRE_LEN, what, err);
    if (st == VH_OK) st = vh_pb_read_len(r, &out->data, &out->size, what, err);
    return st;
}

/* ---- messages ------------------------------------------------------------------------------ */

/* SentencePiece { string piece = 1; float score = 2; Type type = 3 [default NORMAL]; }
 * piece->text is left pointing into the input; the caller copies it into the pool. */
static vh_status parse_piece(vh_pb_reader *r, uint32_t index, vh_sp_piece *piece, vh_error *err)
{
    char what[64];
    snprintf(what, sizeof what, "ModelProto.pieces[%u]", index);

    text_span text = {(const uint8_t *)"", 0};
    int32_t type = VH_SP_PIECE_NORMAL;
    piece->score = 0.0f;
    while (vh_pb_more(r)) {
        uint32_t field, wire;
        vh_status st = vh_pb_read_tag(r, &field, &wire, what, err);
        if (st != VH_OK) return st;
        if (field == 1) {
            st = read_span(r, field, wire, &text, what, err);
        } else if (field == 2) {
            uint32_t bits;
            st = vh_pb_expect_wire(r, field, wire, VH_PB_WIRE_I32, what, err);
            if (st == VH_OK) st = vh_pb_read_fixed32(r, &bits, what, err);
            if (st == VH_OK) memcpy(&piece->score, &bits, sizeof bits);
        } else if (field == 3) {
            st = read_int32(r, field, wire, &type, what, err);
        } else {
            st = vh_pb_skip(r, field, wire, what, err);
        }
        if (st != VH_OK) return st;
    }

    if (text.size == 0)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %s: the piece is empty", r->name, what);
    if (text.size > UINT32_MAX)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %s: the piece is too long", r->name, what);
    if (!vh_utf8_is_valid(text.data, text.size))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %s: the piece is not valid UTF-8", r->name,
                            what);
    if (type < VH_SP_PIECE_NORMAL || type > VH_SP_PIECE_BYTE)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %s: unknown piece type %d", r->name, what,
                            (int)type);
    if (isnan(piece->score))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %s: the score is NaN", r->name, what);
    piece->text = (const char *)text.data;
    piece->size = (uint32_t)text.size;
    piece->type = (vh_sp_piece_type)type;
    return VH_OK;
}

static vh_status parse_trainer_spec(vh_pb_reader *r, parse_state *ps, vh_error *err)
{
    static const char what[] = "ModelProto.trainer_spec";
    vh_sp_model *m = ps->model;
    while (vh_pb_more(r)) {
        uint32_t field, wire;
        vh_status st = vh_pb_read_tag(r, &field, &wire, what, err);
        if (st != VH_OK) return st;
        switch (field) {
        case 3: st = read_int32(r, field, wire, &m->model_type, what, err); break;
        case 24: st = read_bool(r, field, wire, &m->treat_whitespace_as_suffix, what, err); break;
        case 35: st = read_bool(r, field, wire, &m->byte_fallback, what, err); break;
        case 40: st = read_int32(r, field, wire, &m->unk_id, what, err); break;
        case 41: st = read_int32(r, field, wire, &m->bos_id, what, err); break;
        case 42: st = read_int32(r, field, wire, &m->eos_id, what, err); break;
        case 43: st = read_int32(r, field, wire, &m->pad_id, what, err); break;
        case 45: st = read_span(r, field, wire, &ps->unk_piece, what, err); break;
        case 46: st = read_span(r, field, wire, &ps->bos_piece, what, err); break;
        case 47: st = read_span(r, field, wire, &ps->eos_piece, what, err); break;
        case 48: st = read_span(r, field, wire, &ps->pad_piece, what, err); break;
        default: st = vh_pb_skip(r, field, wire, what, err); break;
        }
        if (st != VH_OK) return st;
    }
    return VH_OK;
}

static vh_status parse_normalizer_spec(vh_pb_reader *r, parse_state *ps, vh_error *err)
{
    static const char what[] = "ModelProto.normalizer_spec";
    vh_sp_model *m = ps->model;
    while (vh_pb_more(r)) {
        uint32_t field, wire;
        text_span charsmap;
        vh_status st = vh_pb_read_tag(r, &field, &wire, what, err);
        if (st != VH_OK) return st;
        switch (field) {
        case 1: st = read_span(r, field, wire, &ps->normalizer_name, what, err); break;
        case 2:
            st = read_span(r, field, wire, &charsmap, what, err);
            if (st == VH_OK) m->precompiled_charsmap_size = charsmap.size;
            break;
        case 3: st = read_bool(r, field, wire, &m->add_dummy_prefix, what, err); break;
        case 4: st = read_bool(r, field, wire, &m->remove_extra_whitespaces, what, err); break;
        case 5: st = read_bool(r, field, wire, &m->escape_whitespaces, what, err); break;
        default: st = vh_pb_skip(r, field, wire, what, err); break;
        }
        if (st != VH_OK) return st;
    }
    return VH_OK;
}

/* SelfTestData { repeated Sample samples = 1; }: only counted. */
static vh_status parse_self_test_data(vh_pb_reader *r, vh_sp_model *m, vh_error *err)
{
    static const char what[] = "ModelProto.self_test_data";
    while (vh_pb_more(r)) {
        uint32_t field, wire;
        vh_status st = vh_pb_read_tag(r, &field, &wire, what, err);
        if (st == VH_OK && field == 1) {
            st = vh_pb_expect_wire(r, field, wire, VH_PB_WIRE_LEN, what, err);
            if (st == VH_OK && m->n_self_test_samples == UINT32_MAX)
                st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %s: too many samples", r->name, what);
            if (st == VH_OK) m->n_self_test_samples++;
        }
        if (st == VH_OK) st = vh_pb_skip(r, field, wire, what, err);
        if (st != VH_OK) return st;
    }
    return VH_OK;
}

/* Pass 1: count the pieces so that the array is allocated once. */
static vh_status count_pieces(const uint8_t *data, size_t size, const char *name, uint32_t *count,
                              vh_error *err)
{
    vh_pb_reader r;
    vh_pb_reader_init(&r, data, size, name);
    uint32_t n = 0;
    while (vh_pb_more(&r)) {
        uint32_t field, wire;
        vh_status st = vh_pb_read_tag(&r, &field, &wire, "ModelProto", err);
        if (st == VH_OK) st = vh_pb_skip(&r, field, wire, "ModelProto", err);
        if (st != VH_OK) return st;
        if (field == 1 && ++n > VH_SP_MAX_PIECES)
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: more than %u pieces", name,
                                VH_SP_MAX_PIECES);
    }
    *count = n;
    return VH_OK;
}

/* Pass 2: read every field the model keeps. */
static vh_status parse_model_proto(const uint8_t *data, size_t size, parse_state *ps,
                                   const char *name, vh_error *err)
{
    static const char what[] = "ModelProto";
    vh_sp_model *m = ps->model;
    vh_pb_reader r, sub;
    vh_pb_reader_init(&r, data, size, name);
    uint32_t n_read = 0;
    while (vh_pb_more(&r)) {
        uint32_t field, wire;
        vh_status st = vh_pb_read_tag(&r, &field, &wire, what, err);
        if (st != VH_OK) return st;
        if (field >= 1 && field <= 4) {
            st = vh_pb_expect_wire(&r, field, wire, VH_PB_WIRE_LEN, what, err);
            if (st == VH_OK) st = vh_pb_read_submessage(&r, &sub, what, err);
            if (st != VH_OK) return st;
        }
        switch (field) {
        case 1:
            if (n_read >= m->n_pieces) /* cannot happen after count_pieces, kept as a guard */
                return vh_error_set(err, VH_ERR_INTERNAL, "%s: piece count changed", name);
            st = parse_piece(&sub, n_read, &m->pieces[n_read], err);
            n_read++;
            break;
        case 2: st = parse_trainer_spec(&sub, ps, err); break;
        case 3: st = parse_normalizer_spec(&sub, ps, err); break;
        case 4: st = parse_self_test_data(&sub, m, err); break;
        default: st = vh_pb_skip(&r, field, wire, what, err); break;
        }
        if (st != VH_OK) return st;
    }
    return VH_OK;
}

/* Append span (or fallback when the span is empty) to the pool as a NUL-terminated string. */
static const char *pool_append(char **cursor, text_span span, const char *fallback)
{
    if (span.size == 0) return fallback;
    char *s = *cursor;
    memcpy(s, span.data, span.size);
    s[span.size] = '\0';
    *cursor += span.size + 1;
    return s;
}

/* Copy every string the model keeps into one allocation; the model then owns its text. */
static vh_status copy_strings(parse_state *ps, const char *name, vh_error *err)
{
    vh_sp_model *m = ps->model;
    const text_span *named[] = {&ps->unk_piece, &ps->bos_piece, &ps->eos_piece, &ps->pad_piece,
                                &ps->normalizer_name};
    size_t total = 1;
    int overflow = 0;
    for (uint32_t i = 0; i < m->n_pieces; i++)
        overflow |= __builtin_add_overflow(total, (size_t)m->pieces[i].size + 1, &total);
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        overflow |= __builtin_add_overflow(total, named[i]->size + 1, &total);
    if (overflow)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: string sizes overflow", name);

    m->string_pool = malloc(total);
    if (!m->string_pool)
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of strings",
                            name, total);
    char *cursor = m->string_pool;
    for (uint32_t i = 0; i < m->n_pieces; i++) {
        text_span span = {(const uint8_t *)m->pieces[i].text, m->pieces[i].size};
        m->pieces[i].text = pool_append(&cursor, span, "");
    }
    m->unk_piece = pool_append(&cursor, ps->unk_piece, "<unk>");
    m->bos_piece = pool_append(&cursor, ps->bos_piece, "<s>");
    m->eos_piece = pool_append(&cursor, ps->eos_piece, "</s>");
    m->pad_piece = pool_append(&cursor, ps->pad_piece, "<pad>");
    m->normalizer_name = pool_append(&cursor, ps->normalizer_name, "");
    return VH_OK;
}

vh_status vh_sp_model_parse(const uint8_t *data, size_t size, const char *name,
                            vh_sp_model *model, vh_error *err)
{
    if (!name) name = "(memory)";
    memset(model, 0, sizeof *model);
    if (!data && size > 0)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "%s: no data", name);
    if (size > VH_SP_MAX_MODEL_BYTES)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %zu bytes is larger than the %zu allowed",
                            name, size, VH_SP_MAX_MODEL_BYTES);

    vh_sp_model m = {
        .model_type = VH_SP_MODEL_UNIGRAM, /* the proto's defaults */
        .unk_id = 0, .bos_id = 1, .eos_id = 2, .pad_id = -1,
        .add_dummy_prefix = true, .remove_extra_whitespaces = true, .escape_whitespaces = true,
    };
    parse_state ps = {.model = &m};

    vh_status st = count_pieces(data, size, name, &m.n_pieces, err);
    if (st != VH_OK) return st;
    if (m.n_pieces > 0) {
        m.pieces = calloc(m.n_pieces, sizeof *m.pieces);
        if (!m.pieces)
            return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: cannot allocate %u pieces", name,
                                m.n_pieces);
    }
    st = parse_model_proto(data, size, &ps, name, err);
    if (st == VH_OK) st = copy_strings(&ps, name, err);
    if (st != VH_OK) {
        vh_sp_model_release(&m);
        return st;
    }
    *model = m;
    return VH_OK;
}

void vh_sp_model_release(vh_sp_model *model)
{
    if (!model) return;
    free(model->pieces);
    free(model->string_pool);
    memset(model, 0, sizeof *model);
}
