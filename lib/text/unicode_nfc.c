#include "text/unicode_nfc.h"

#include <stdlib.h>
#include <string.h>

#include "text/unicode_class.h"

/* Hangul syllable constants of the Unicode standard (chapter 3.12). */
enum { S_BASE = 0xAC00, L_BASE = 0x1100, V_BASE = 0x1161, T_BASE = 0x11A7, L_COUNT = 19,
       V_COUNT = 21, T_COUNT = 28, N_COUNT = V_COUNT * T_COUNT, S_COUNT = L_COUNT * N_COUNT };

static uint8_t ccc_of(uint32_t cp)
{
    size_t lo = 0, hi = vh_unicode_ccc_table_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (vh_unicode_ccc_table[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < vh_unicode_ccc_table_count && vh_unicode_ccc_table[lo].cp == cp
               ? vh_unicode_ccc_table[lo].ccc
               : 0;
}

static const vh_unicode_decomposition *decomposition_of(uint32_t cp)
{
    size_t lo = 0, hi = vh_unicode_decomposition_table_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (vh_unicode_decomposition_table[mid].cp < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < vh_unicode_decomposition_table_count && vh_unicode_decomposition_table[lo].cp == cp
               ? &vh_unicode_decomposition_table[lo]
               : NULL;
}

/* The primary composite of (first, second), 0 when there is none. */
static uint32_t compose_pair(uint32_t first, uint32_t second)
{
    if (first >= L_BASE && first < L_BASE + L_COUNT && second >= V_BASE && second < V_BASE + V_COUNT)
        return S_BASE + ((first - L_BASE) * V_COUNT + (second - V_BASE)) * T_COUNT;
    if (first >= S_BASE && first < S_BASE + S_COUNT && (first - S_BASE) % T_COUNT == 0 &&
        second > T_BASE && second < T_BASE + T_COUNT)
        return first + (second - T_BASE);
    size_t lo = 0, hi = vh_unicode_composition_table_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const vh_unicode_composition *c = &vh_unicode_composition_table[mid];
        if (c->first < first || (c->first == first && c->second < second)) lo = mid + 1;
        else hi = mid;
    }
    if (lo < vh_unicode_composition_table_count && vh_unicode_composition_table[lo].first == first &&
        vh_unicode_composition_table[lo].second == second)
        return vh_unicode_composition_table[lo].composite;
    return 0;
}

/* Append the full canonical decomposition of cp to out[*n ..]; a code point decomposes into at
 * most 4 (Unicode's stability guarantee keeps it small), the caller leaves room for 8. */
static void decompose(uint32_t cp, uint32_t *out, size_t *n)
{
    if (cp >= S_BASE && cp < S_BASE + S_COUNT) {
        uint32_t s = cp - S_BASE;
        out[(*n)++] = L_BASE + s / N_COUNT;
        out[(*n)++] = V_BASE + (s % N_COUNT) / T_COUNT;
        if (s % T_COUNT) out[(*n)++] = T_BASE + s % T_COUNT;
        return;
    }
    const vh_unicode_decomposition *d = decomposition_of(cp);
    if (!d) {
        out[(*n)++] = cp;
        return;
    }
    decompose(d->first, out, n);
    if (d->second) decompose(d->second, out, n);
}

vh_status vh_unicode_nfc(const uint8_t *text, size_t size, uint8_t **out, size_t *out_size,
                         vh_error *err)
{
    *out = NULL;
    *out_size = 0;
    /* Each input byte yields at most 4 code points after decomposition (a 1-byte character never
     * decomposes; a 2-byte one into at most 3 or so); 8 per character is a safe bound. */
    uint32_t *cps = malloc((size * 4 + 8) * sizeof *cps);
    uint8_t *bytes = malloc(size * 4 + 1);
    if (!cps || !bytes) {
        free(cps);
        free(bytes);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "NFC: out of memory for %zu bytes", size);
    }
    size_t n = 0;
    for (size_t pos = 0; pos < size;) {
        size_t len;
        uint32_t cp = vh_utf8_decode_valid(text + pos, size - pos, &len);
        pos += len;
        decompose(cp, cps, &n);
    }
    /* canonical ordering: stable insertion sort of each run of non-starters by their class */
    for (size_t i = 1; i < n; i++) {
        uint8_t c = ccc_of(cps[i]);
        if (c == 0) continue;
        uint32_t cp = cps[i];
        size_t j = i;
        while (j > 0 && ccc_of(cps[j - 1]) > c) {
            cps[j] = cps[j - 1];
            j--;
        }
        cps[j] = cp;
    }
    /* canonical composition: a character combines with the last starter unless a character
     * between them blocks it (has a class of 0 or >= its own) */
    size_t w = 0, starter = SIZE_MAX;
    int last_ccc = -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = cps[i];
        int c = ccc_of(cp);
        if (starter != SIZE_MAX && (last_ccc < c || (last_ccc == 0 && w == starter + 1))) {
            uint32_t composite = compose_pair(cps[starter], cp);
            if (composite) {
                cps[starter] = composite;
                continue;
            }
        }
        if (c == 0) starter = w;
        last_ccc = c;
        cps[w++] = cp;
    }
    size_t b = 0;
    for (size_t i = 0; i < w; i++) b += vh_utf8_encode(cps[i], bytes + b);
    bytes[b] = 0;
    free(cps);
    *out = bytes;
    *out_size = b;
    return VH_OK;
}
