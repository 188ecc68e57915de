/* hf_normalizer: the "normalizer" of a tokenizer.json file, applied to each piece of text
 * between added tokens, as Hugging Face tokenizers' normalizers do. Supported: Sequence (nested
 * sequences are flattened), Prepend (only before non-empty text), Replace with a String pattern
 * (every non-overlapping occurrence, leftmost first), NFC (unicode_nfc.h). Any other type, and
 * Replace with a Regex pattern, is refused with VH_ERR_UNSUPPORTED naming it. */
#ifndef VH_TEXT_HF_NORMALIZER_H
#define VH_TEXT_HF_NORMALIZER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef enum vh_hf_normalizer_kind {
    VH_HF_NORMALIZER_PREPEND,
    VH_HF_NORMALIZER_REPLACE,
    VH_HF_NORMALIZER_NFC,
} vh_hf_normalizer_kind;

typedef struct vh_hf_normalizer_step {
    vh_hf_normalizer_kind kind;
    char *text;          /* Prepend: what; Replace: the pattern */
    size_t text_size;
    char *content;       /* Replace: the replacement */
    size_t content_size;
} vh_hf_normalizer_step;

typedef struct vh_hf_normalizer {
    vh_hf_normalizer_step *steps; /* applied in order; none: the identity */
    size_t n_steps;
} vh_hf_normalizer;

/* Read a "normalizer" value (NULL or null: the identity). Release with
 * vh_hf_normalizer_release(). */
vh_status vh_hf_normalizer_from_json(const json_t *spec, const char *name, vh_hf_normalizer *out,
                                     vh_error *err);

void vh_hf_normalizer_release(vh_hf_normalizer *n);

/* Normalize the valid UTF-8 text[0 .. size) into a new malloc'd *out of *out_size bytes (valid
 * UTF-8; the caller frees it). Errors: VH_ERR_OUT_OF_MEMORY, VH_ERR_INVALID_ARGUMENT (text
 * that would grow past VH_TOKENIZER_MAX_TEXT_BYTES). */
vh_status vh_hf_normalizer_apply(const vh_hf_normalizer *n, const uint8_t *text, size_t size,
                                 uint8_t **out, size_t *out_size, vh_error *err);

#endif
