/* hf_pretokenize: the "pre_tokenizer" of a tokenizer.json file: cuts a normalized piece of text
 * into words for the model, as Hugging Face tokenizers' pre_tokenizers do. Supported:
 *
 *   Metaspace  replacement (one character), prepend_scheme "always" / "first" / "never" (or the
 *              older add_prefix_space), split. Spaces become the replacement; with "always" (and
 *              with "first" for the piece that starts the input) the replacement is prepended
 *              unless the piece already starts with it; split cuts before every replacement.
 *   ByteLevel  add_prefix_space (a space prepended unless the piece starts with one), use_regex
 *              (GPT-2's pattern, split_pattern.h), then every byte spelled as byte_level.h says.
 *   Split      a Regex pattern that split_pattern.h knows, behavior "Isolated", invert false.
 *   Sequence   of the above, in order.
 *
 * Anything else is refused with VH_ERR_UNSUPPORTED naming it. */
#ifndef VH_TEXT_HF_PRETOKENIZE_H
#define VH_TEXT_HF_PRETOKENIZE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/split_pattern.h"
#include "util/error.h"

typedef enum vh_hf_pretokenizer_kind {
    VH_HF_PRETOKENIZER_METASPACE,
    VH_HF_PRETOKENIZER_BYTE_LEVEL,
    VH_HF_PRETOKENIZER_SPLIT,
} vh_hf_pretokenizer_kind;

typedef enum vh_hf_prepend_scheme {
    VH_HF_PREPEND_ALWAYS,
    VH_HF_PREPEND_FIRST,
    VH_HF_PREPEND_NEVER,
} vh_hf_prepend_scheme;

typedef struct vh_hf_pretokenizer_step {
    vh_hf_pretokenizer_kind kind;
    uint8_t replacement[4];       /* Metaspace: the replacement character's UTF-8 */
    size_t replacement_size;
    vh_hf_prepend_scheme prepend_scheme; /* Metaspace */
    bool split;                   /* Metaspace */
    bool add_prefix_space;        /* ByteLevel */
    bool use_regex;               /* ByteLevel */
    vh_split_pattern pattern;     /* Split; ByteLevel with use_regex: GPT-2's */
} vh_hf_pretokenizer_step;

typedef struct vh_hf_pretokenizer {
    vh_hf_pretokenizer_step *steps; /* none: the whole piece is one word */
    size_t n_steps;
} vh_hf_pretokenizer;

/* A list of words: spans of one text buffer. */
typedef struct vh_hf_word {
    size_t start, size;
    bool at_input_start;          /* begins at offset 0 of the input text ("first" prepends) */
} vh_hf_word;

typedef struct vh_hf_word_list {
    uint8_t *text;
    size_t text_size, text_capacity;
    vh_hf_word *words;
    size_t n_words, words_capacity;
} vh_hf_word_list;

/* Read a "pre_tokenizer" value (NULL or null: none). Release with vh_hf_pretokenizer_release(). */
vh_status vh_hf_pretokenizer_from_json(const json_t *spec, const char *name,
                                       vh_hf_pretokenizer *out, vh_error *err);

void vh_hf_pretokenizer_release(vh_hf_pretokenizer *p);

/* Cut the valid UTF-8 text[0 .. size) into *out (filled anew; release with
 * vh_hf_word_list_release()). at_input_start: the text begins the input. Empty words are dropped.
 * Errors: VH_ERR_OUT_OF_MEMORY. */
vh_status vh_hf_pretokenize(const vh_hf_pretokenizer *p, const uint8_t *text, size_t size,
                            bool at_input_start, vh_hf_word_list *out, vh_error *err);

void vh_hf_word_list_release(vh_hf_word_list *list);

#endif
