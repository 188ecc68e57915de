#include "text/byte_level.h"

#include "text/unicode_class.h"

uint32_t vh_byte_level_char(uint8_t b)
{
    /* the bytes that do not stand for themselves, in order: 0x00-0x20 (33 of them), 0x7F-0xA0
     * (34), 0xAD (1); the n-th of them is U+0100 + n */
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return 0x100 + 33 + (uint32_t)(b - 0x7F);
    if (b == 0xAD) return 0x100 + 33 + 34;
    return b;
}

size_t vh_byte_level_spell(const uint8_t *text, size_t size, uint8_t *out)
{
    size_t w = 0;
    for (size_t i = 0; i < size; i++) w += vh_utf8_encode(vh_byte_level_char(text[i]), out + w);
    return w;
}
