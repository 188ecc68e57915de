/* byte_level: GPT-2's byte <-> character map (tokenizers' bytes_char), which byte-level BPE
 * vocabularies are spelled in: the printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for
 * themselves, the other 68 bytes for U+0100.. in byte order ("Ġ" U+0120 is the space). */
#ifndef VH_TEXT_BYTE_LEVEL_H
#define VH_TEXT_BYTE_LEVEL_H

#include <stddef.h>
#include <stdint.h>

/* The character that byte b is spelled as. */
uint32_t vh_byte_level_char(uint8_t b);

/* Spell text[0 .. size) byte by byte into out (room for 2 size bytes: every character is 1 or 2
 * bytes of UTF-8); returns the bytes written. */
size_t vh_byte_level_spell(const uint8_t *text, size_t size, uint8_t *out);

#endif
