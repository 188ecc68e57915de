#include "text/text_normalizer.h"

#include <string.h>

#include "text/utf8.h"

static const uint8_t SPACE_SYMBOL[3] = {0xE2, 0x96, 0x81}; /* U+2581 */
static const uint8_t REPLACEMENT_CHAR[3] = {0xEF, 0xBF, 0xBD}; /* U+FFFD */

/* One unit of input after per-unit normalization: `bytes` to emit, `consumed` input bytes. */
typedef struct text_unit {
    const uint8_t *bytes;
    size_t size;
    size_t consumed;
} text_unit;

static text_unit next_unit(const vh_text_normalizer *nz, const uint8_t *text, size_t size)
{
    size_t len = nz->user_defined ? vh_prefix_matcher_longest(nz->user_defined, text, size) : 0;
    if (len > 0) return (text_unit){text, len, len};
    len = vh_utf8_valid_char_len(text, size);
    if (len > 0) return (text_unit){text, len, len};
    /* Malformed UTF-8: U+FFFD for a single byte, then carry on with the next byte. */
    return (text_unit){REPLACEMENT_CHAR, sizeof REPLACEMENT_CHAR, 1};
}

static size_t append_space(const vh_text_normalizer *nz, uint8_t *out, size_t n)
{
    if (nz->escape_whitespaces) {
        memcpy(out + n, SPACE_SYMBOL, sizeof SPACE_SYMBOL);
        return n + sizeof SPACE_SYMBOL;
    }
    out[n] = ' ';
    return n + 1;
}

size_t vh_text_normalized_capacity(size_t size)
{
    /* Each input byte becomes at most 3 bytes (' ' -> U+2581, a bad byte -> U+FFFD), plus the
     * dummy space symbol. */
    size_t capacity;
    if (__builtin_mul_overflow(size, 3, &capacity) ||
        __builtin_add_overflow(capacity, sizeof SPACE_SYMBOL, &capacity))
        return 0;
    return capacity;
}

size_t vh_text_normalize(const vh_text_normalizer *nz, const uint8_t *text, size_t size,
                         uint8_t *out)
{
    size_t pos = 0, n = 0;
    if (size == 0) return 0;

    if (nz->remove_extra_whitespaces) {
        while (pos < size) {
            text_unit u = next_unit(nz, text + pos, size - pos);
            if (!(u.size == 1 && u.bytes[0] == ' ')) break;
            pos += u.consumed;
        }
        if (pos == size) return 0; /* nothing but spaces */
    }

    if (nz->add_dummy_prefix && !nz->treat_whitespace_as_suffix) n = append_space(nz, out, n);

    /* With remove_extra_whitespaces, the text so far "ends in a space" at the start, so that a
     * unit's leading spaces are dropped while the previous unit ended with one. */
    bool prev_ends_in_space = nz->remove_extra_whitespaces;
    while (pos < size) {
        text_unit u = next_unit(nz, text + pos, size - pos);
        const uint8_t *b = u.bytes;
        size_t len = u.size;
        while (prev_ends_in_space && len > 0 && b[0] == ' ') b++, len--;
        if (len > 0) {
            for (size_t i = 0; i < len; i++) {
                if (nz->escape_whitespaces && b[i] == ' ')
                    n = append_space(nz, out, n);
                else
                    out[n++] = b[i];
            }
            prev_ends_in_space = b[len - 1] == ' ';
        }
        pos += u.consumed;
        if (!nz->remove_extra_whitespaces) prev_ends_in_space = false;
    }

    if (nz->remove_extra_whitespaces) {
        const uint8_t *space = nz->escape_whitespaces ? SPACE_SYMBOL : (const uint8_t *)" ";
        size_t space_len = nz->escape_whitespaces ? sizeof SPACE_SYMBOL : 1;
        while (n >= space_len && memcmp(out + n - space_len, space, space_len) == 0) n -= space_len;
    }

    if (nz->add_dummy_prefix && nz->treat_whitespace_as_suffix) n = append_space(nz, out, n);
    return n;
}
