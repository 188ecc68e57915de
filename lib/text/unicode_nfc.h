/* unicode_nfc: Unicode Normalization Form C (canonical decomposition, canonical ordering,
 * canonical composition), the "NFC" normalizer of tokenizer.json files (Qwen2's). Tables from
 * scripts/make_unicode_tables.py (Unicode version in vh_unicode_tables_version); Hangul syllables
 * are composed and decomposed algorithmically. */
#ifndef VH_TEXT_UNICODE_NFC_H
#define VH_TEXT_UNICODE_NFC_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct vh_unicode_ccc {
    uint32_t cp;
    uint8_t ccc; /* Canonical_Combining_Class, never 0 in the table */
} vh_unicode_ccc;

typedef struct vh_unicode_decomposition {
    uint32_t cp, first, second; /* second 0: a singleton decomposition */
} vh_unicode_decomposition;

typedef struct vh_unicode_composition {
    uint32_t first, second, composite; /* sorted by (first, second) */
} vh_unicode_composition;

extern const vh_unicode_ccc vh_unicode_ccc_table[];
extern const size_t vh_unicode_ccc_table_count;
extern const vh_unicode_decomposition vh_unicode_decomposition_table[];
extern const size_t vh_unicode_decomposition_table_count;
extern const vh_unicode_composition vh_unicode_composition_table[];
extern const size_t vh_unicode_composition_table_count;

/* NFC of the valid UTF-8 text[0 .. size): *out is a new malloc'd buffer of *out_size bytes
 * (NUL-terminated; the caller frees it). Errors: VH_ERR_OUT_OF_MEMORY. */
vh_status vh_unicode_nfc(const uint8_t *text, size_t size, uint8_t **out, size_t *out_size,
                         vh_error *err);

#endif
