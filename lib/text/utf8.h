/* UTF-8 decoding with the exact rules of sentencepiece's normalizer (util.cc DecodeUTF8).
 *
 * A character is valid when it is the shortest encoding of a code point in U+0000..U+10FFFF that
 * is not a surrogate (U+D800..U+DFFF): the usual strict UTF-8. */
#ifndef VH_TEXT_UTF8_H
#define VH_TEXT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length in bytes (1-4) of the valid UTF-8 character at s[0 .. n), or 0 when the bytes there do
 * not start a valid character (or n == 0). */
size_t vh_utf8_valid_char_len(const uint8_t *s, size_t n);

/* The length a lead byte announces, without checking the bytes after it: 1 for 0x00-0xBF
 * (ASCII and stray continuation bytes), 2 for 0xC0-0xDF, 3 for 0xE0-0xEF, 4 for 0xF0-0xFF.
 * This is sentencepiece's OneCharLen, used to split already valid text into characters. */
static inline size_t vh_utf8_lead_len(uint8_t lead)
{
    static const uint8_t len_by_high_nibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len_by_high_nibble[lead >> 4];
}

/* 1 when all of s[0 .. n) is valid UTF-8, else 0. */
int vh_utf8_is_valid(const uint8_t *s, size_t n);

#endif
