/* sentencepiece_model: read sentencepiece's ModelProto (a `tokenizer.model` file).
 *
 * Only the fields the encoder needs are kept (field numbers from sentencepiece_model.proto):
 *
 *   ModelProto      1 repeated SentencePiece pieces, 2 TrainerSpec trainer_spec,
 *                   3 NormalizerSpec normalizer_spec, 4 SelfTestData self_test_data (counted)
 *   SentencePiece   1 string piece, 2 float score, 3 Type type (default NORMAL)
 *   TrainerSpec     3 model_type (default UNIGRAM), 24 treat_whitespace_as_suffix,
 *                   35 byte_fallback, 40-43 unk/bos/eos/pad_id, 45-48 unk/bos/eos/pad_piece
 *   NormalizerSpec  1 name, 2 precompiled_charsmap (its size only), 3 add_dummy_prefix,
 *                   4 remove_extra_whitespaces, 5 escape_whitespaces (each default true)
 *
 * Every other field is skipped whatever its wire type. A message field that appears twice is
 * merged as protobuf does (the later scalar wins). The parse is strict about the wire format and
 * about the pieces: a truncated or malformed file, a piece that is empty or not UTF-8, an unknown
 * piece type, a NaN score, or more than VH_SP_MAX_PIECES pieces give VH_ERR_BAD_MODEL.
 * Whether the model is one the tokenizer can run (BPE, identity normalizer, ...) is the
 * tokenizer's decision, not this reader's. */
#ifndef VH_TEXT_SENTENCEPIECE_MODEL_H
#define VH_TEXT_SENTENCEPIECE_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define VH_SP_MAX_MODEL_BYTES ((size_t)256 << 20) /* larger files are refused */
#define VH_SP_MAX_PIECES ((uint32_t)1 << 24)      /* a vocabulary larger than this is refused */

typedef enum vh_sp_piece_type {
    VH_SP_PIECE_NORMAL = 1,
    VH_SP_PIECE_UNKNOWN = 2,
    VH_SP_PIECE_CONTROL = 3,
    VH_SP_PIECE_USER_DEFINED = 4,
    VH_SP_PIECE_UNUSED = 5,
    VH_SP_PIECE_BYTE = 6
} vh_sp_piece_type;

typedef enum vh_sp_model_type {
    VH_SP_MODEL_UNIGRAM = 1,
    VH_SP_MODEL_BPE = 2,
    VH_SP_MODEL_WORD = 3,
    VH_SP_MODEL_CHAR = 4
} vh_sp_model_type;

typedef struct vh_sp_piece {
    const char *text;      /* UTF-8, NUL-terminated, never empty (may hold a NUL of its own) */
    uint32_t size;         /* bytes of text, without the terminator */
    float score;           /* higher merges first in BPE; never NaN */
    vh_sp_piece_type type;
} vh_sp_piece;

typedef struct vh_sp_model {
    vh_sp_piece *pieces;   /* [n_pieces]; the index is the token id */
    uint32_t n_pieces;

    /* TrainerSpec */
    int32_t model_type;                 /* a vh_sp_model_type, or another value the file holds */
    bool byte_fallback;
    bool treat_whitespace_as_suffix;
    int32_t unk_id, bos_id, eos_id, pad_id;              /* as written; sentencepiece's encoder
                                                            finds these by piece, see below */
    const char *unk_piece, *bos_piece, *eos_piece, *pad_piece; /* defaults when absent or "" */

    /* NormalizerSpec */
    const char *normalizer_name;        /* "" when absent */
    size_t precompiled_charsmap_size;   /* bytes; 0 means no character normalization rules */
    bool add_dummy_prefix;
    bool remove_extra_whitespaces;
    bool escape_whitespaces;

    uint32_t n_self_test_samples;       /* SelfTestData samples (not run by this library) */

    char *string_pool;                  /* owns every string above */
} vh_sp_model;

/* Parse a serialized ModelProto, data[0 .. size) (`name` is used in messages). On success fills
 * *model, which owns copies of everything it points to (data may be freed afterwards); release
 * it with vh_sp_model_release(). On failure *model holds nothing to release. */
vh_status vh_sp_model_parse(const uint8_t *data, size_t size, const char *name,
                            vh_sp_model *model, vh_error *err);

/* Free what vh_sp_model_parse() allocated; safe on a zeroed struct. */
void vh_sp_model_release(vh_sp_model *model);

#endif
