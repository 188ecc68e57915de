/* added_vocabulary: the "added_tokens" of a tokenizer.json file, and the first step of encoding:
 * cutting the input at added tokens, as tokenizers' AddedVocabulary does.
 *
 * Tokens with normalized false are matched in the raw input, those with normalized true in each
 * normalized piece between the first ones. Matching is leftmost-longest over all tokens of a set
 * (special or not); a match of a single_word token is skipped unless no word character (\w) is
 * next to it; lstrip / rstrip make the token take the whitespace before / after it. */
#ifndef VH_TEXT_ADDED_VOCABULARY_H
#define VH_TEXT_ADDED_VOCABULARY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/prefix_matcher.h"
#include "text/string_table.h"
#include "util/error.h"

typedef struct vh_hf_added_token {
    int32_t id;
    bool special, normalized, lstrip, rstrip, single_word;
} vh_hf_added_token;

/* The tokens matched in one kind of text (raw or normalized). */
typedef struct vh_hf_added_set {
    vh_prefix_matcher matcher;   /* the contents */
    vh_string_table index;       /* content -> index in tokens */
} vh_hf_added_set;

typedef struct vh_hf_added_vocabulary {
    vh_hf_added_token *tokens;
    size_t n_tokens;
    vh_hf_added_set raw, normalized;
    int32_t max_id;              /* -1 when there are none */
} vh_hf_added_vocabulary;

/* A span of text: an added token (id >= 0) or text to encode (id -1). */
typedef struct vh_hf_segment {
    size_t start, end;
    int32_t id;
} vh_hf_segment;

/* Read "added_tokens" (NULL or null: none). Release with vh_hf_added_vocabulary_release(). */
vh_status vh_hf_added_vocabulary_from_json(const json_t *list, const char *name,
                                           vh_hf_added_vocabulary *out, vh_error *err);

void vh_hf_added_vocabulary_release(vh_hf_added_vocabulary *v);

/* Cut the valid UTF-8 text[0 .. size) at the tokens of the raw (normalized false) or normalized
 * set into *segments (malloc'd, *n_segments of them, empty spans left out). Errors:
 * VH_ERR_OUT_OF_MEMORY. */
vh_status vh_hf_added_vocabulary_split(const vh_hf_added_vocabulary *v, bool normalized,
                                       const uint8_t *text, size_t size,
                                       vh_hf_segment **segments, size_t *n_segments,
                                       vh_error *err);

#endif
