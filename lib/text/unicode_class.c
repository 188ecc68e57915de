#include "text/unicode_class.h"

static bool in_ranges(const vh_unicode_range *r, size_t n, uint32_t cp)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cp < r[mid].first) hi = mid;
        else if (cp > r[mid].last) lo = mid + 1;
        else return true;
    }
    return false;
}

bool vh_unicode_is_letter(uint32_t cp)
{
    return in_ranges(vh_unicode_letter_ranges, vh_unicode_letter_ranges_count, cp);
}

bool vh_unicode_is_number(uint32_t cp)
{
    return in_ranges(vh_unicode_number_ranges, vh_unicode_number_ranges_count, cp);
}

bool vh_unicode_is_white_space(uint32_t cp)
{
    return in_ranges(vh_unicode_white_space_ranges, vh_unicode_white_space_ranges_count, cp);
}

bool vh_unicode_is_word(uint32_t cp)
{
    return in_ranges(vh_unicode_word_ranges, vh_unicode_word_ranges_count, cp);
}

uint32_t vh_utf8_decode_valid(const uint8_t *s, size_t n, size_t *len)
{
    uint8_t b = s[0];
    if (b < 0x80 || n < 2) {
        *len = 1;
        return b;
    }
    if (b < 0xE0) {
        *len = 2;
        return ((uint32_t)(b & 0x1F) << 6) | (s[1] & 0x3F);
    }
    if (b < 0xF0 || n < 4) {
        *len = 3;
        return ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    }
    *len = 4;
    return ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
           ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
}

size_t vh_utf8_encode(uint32_t cp, uint8_t *out)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}
