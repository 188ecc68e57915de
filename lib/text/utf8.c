#include "text/utf8.h"

static int is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

size_t vh_utf8_valid_char_len(const uint8_t *s, size_t n)
{
    if (n == 0) return 0;
    uint8_t b0 = s[0];
    if (b0 < 0x80) return 1;

    /* Lead byte -> length and the smallest code point that length may encode (no overlongs). */
    size_t len;
    uint32_t cp, min_cp;
    if ((b0 & 0xE0) == 0xC0) {
        len = 2, cp = b0 & 0x1Fu, min_cp = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3, cp = b0 & 0x0Fu, min_cp = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        len = 4, cp = b0 & 0x07u, min_cp = 0x10000;
    } else {
        return 0; /* a continuation byte or 0xF8-0xFF */
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if (!is_continuation(s[i])) return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

int vh_utf8_is_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t len = vh_utf8_valid_char_len(s + i, n - i);
        if (len == 0) return 0;
        i += len;
    }
    return 1;
}
