/* text_normalizer: sentencepiece's Normalizer::Normalize for models without character rules
 * (normalizer "identity", empty precompiled_charsmap). The only model options that change the
 * text are the NormalizerSpec flags and TrainerSpec.treat_whitespace_as_suffix:
 *
 *   - input bytes are read one unit at a time: a user-defined piece (longest match) kept as is,
 *     else one valid UTF-8 character kept as is, else one byte replaced by U+FFFD (EF BF BD);
 *   - remove_extra_whitespaces: drop leading ' ' units, spaces at the start of a unit that
 *     follows a unit ending in ' ', and trailing space symbols;
 *   - escape_whitespaces: every ' ' byte becomes U+2581 (E2 96 81, "▁");
 *   - add_dummy_prefix: one space symbol before the text (after it when
 *     treat_whitespace_as_suffix), unless the text is empty or only removed spaces. */
#ifndef VH_TEXT_TEXT_NORMALIZER_H
#define VH_TEXT_TEXT_NORMALIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/prefix_matcher.h"
#include "util/error.h"

typedef struct vh_text_normalizer {
    bool add_dummy_prefix;
    bool remove_extra_whitespaces;
    bool escape_whitespaces;
    bool treat_whitespace_as_suffix;
    const vh_prefix_matcher *user_defined; /* not owned; user-defined pieces kept whole */
} vh_text_normalizer;

/* The most bytes vh_text_normalize() writes for `size` input bytes; 0 when that overflows. */
size_t vh_text_normalized_capacity(size_t size);

/* Normalize text[0 .. size) into out, which has room for vh_text_normalized_capacity(size)
 * bytes; returns the bytes written. Cannot fail. */
size_t vh_text_normalize(const vh_text_normalizer *normalizer, const uint8_t *text, size_t size,
                         uint8_t *out);

#endif
