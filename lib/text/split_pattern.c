#include "text/split_pattern.h"

#include <string.h>

#include "text/unicode_class.h"

const char vh_split_pattern_gpt2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char vh_split_pattern_qwen2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

bool vh_split_pattern_find(const char *regex, vh_split_pattern *out)
{
    if (strcmp(regex, vh_split_pattern_gpt2) == 0) {
        *out = VH_SPLIT_PATTERN_GPT2;
        return true;
    }
    if (strcmp(regex, vh_split_pattern_qwen2) == 0) {
        *out = VH_SPLIT_PATTERN_QWEN2;
        return true;
    }
    return false;
}

#define END_OF_TEXT UINT32_MAX

/* A cursor over valid UTF-8. */
typedef struct cursor {
    const uint8_t *text;
    size_t size;
} cursor;

/* The code point at pos (END_OF_TEXT past the end), *len its byte count. */
static uint32_t char_at(const cursor *c, size_t pos, size_t *len)
{
    if (pos >= c->size) {
        *len = 0;
        return END_OF_TEXT;
    }
    return vh_utf8_decode_valid(c->text + pos, c->size - pos, len);
}

static bool is_space(uint32_t cp) { return cp != END_OF_TEXT && vh_unicode_is_white_space(cp); }
static bool is_letter(uint32_t cp) { return cp != END_OF_TEXT && vh_unicode_is_letter(cp); }
static bool is_number(uint32_t cp) { return cp != END_OF_TEXT && vh_unicode_is_number(cp); }
static bool is_other(uint32_t cp) /* [^\s\p{L}\p{N}] */
{
    return cp != END_OF_TEXT && !is_space(cp) && !is_letter(cp) && !is_number(cp);
}
static bool is_newline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

typedef bool (*char_class)(uint32_t);

/* End of the run of class members starting at pos (pos itself when there is none). */
static size_t run_end(const cursor *c, size_t pos, char_class member)
{
    size_t len;
    for (uint32_t cp = char_at(c, pos, &len); member(cp); cp = char_at(c, pos, &len)) pos += len;
    return pos;
}

/* ' ?X+': an optional space then a run of X; 0 when it does not match. */
static size_t space_then_run(const cursor *c, size_t pos, char_class member)
{
    size_t start = pos;
    if (c->text[pos] == ' ' && pos + 1 < c->size) {
        size_t len;
        if (member(char_at(c, pos + 1, &len))) pos += 1;
    }
    size_t end = run_end(c, pos, member);
    return end > pos ? end - start : 0;
}

/* The contractions 's 't 're 've 'm 'll 'd; ignore_case: as (?i:...) in onig, where 's' also
 * matches U+017F (long s) and 'k'-like foldings do not occur in these letters. */
static size_t contraction(const cursor *c, size_t pos, bool ignore_case)
{
    if (c->text[pos] != '\'') return 0;
    size_t len1, len2;
    uint32_t a = char_at(c, pos + 1, &len1);
    uint32_t b = a == END_OF_TEXT ? END_OF_TEXT : char_at(c, pos + 1 + len1, &len2);
    if (ignore_case) {
        if (a == 0x17F) a = 's';
        if (a >= 'A' && a <= 'Z') a += 'a' - 'A';
        if (b == 0x17F) b = 's';
        if (b >= 'A' && b <= 'Z') b += 'a' - 'A';
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 1 + len1;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 1 + len1 + len2;
    return 0;
}

/* '\s+(?!\S)' then '\s+' at a whitespace character: the run, less its last character when a
 * non-space follows and the run is longer than one character. */
static size_t spaces(const cursor *c, size_t pos)
{
    size_t end = run_end(c, pos, is_space);
    if (end >= c->size) return end - pos;
    /* backtrack one character so that a space, not the \S, follows */
    size_t last = end, len;
    do last--;
    while ((c->text[last] & 0xC0) == 0x80);
    if (last > pos) return last - pos;
    (void)len;
    return end - pos;
}

static size_t match_gpt2(const cursor *c, size_t pos)
{
    size_t n;
    if ((n = contraction(c, pos, false))) return n;
    if ((n = space_then_run(c, pos, is_letter))) return n;
    if ((n = space_then_run(c, pos, is_number))) return n;
    if ((n = space_then_run(c, pos, is_other))) return n;
    return spaces(c, pos);
}

static bool is_not_newline_letter_number(uint32_t cp) /* [^\r\n\p{L}\p{N}] */
{
    return cp != END_OF_TEXT && !is_newline(cp) && !is_letter(cp) && !is_number(cp);
}

static size_t match_qwen2(const cursor *c, size_t pos)
{
    size_t n, len;
    if ((n = contraction(c, pos, true))) return n;
    uint32_t cp = char_at(c, pos, &len);
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (is_letter(cp)) return run_end(c, pos, is_letter) - pos;
    if (is_not_newline_letter_number(cp)) {
        size_t end = run_end(c, pos + len, is_letter);
        if (end > pos + len) return end - pos;
    }
    /* \p{N} */
    if (is_number(cp)) return len;
    /* ' ?[^\s\p{L}\p{N}]+[\r\n]*' */
    if ((n = space_then_run(c, pos, is_other))) return run_end(c, pos + n, is_newline) - pos;
    /* \s*[\r\n]+: the whitespace run up to and including its last newline */
    size_t end = run_end(c, pos, is_space), last_newline = SIZE_MAX;
    for (size_t i = pos; i < end; i++)
        if (is_newline(c->text[i])) last_newline = i;
    if (last_newline != SIZE_MAX) return last_newline + 1 - pos;
    return spaces(c, pos);
}

size_t vh_split_pattern_match(vh_split_pattern pattern, const uint8_t *text, size_t size,
                              size_t pos)
{
    cursor c = {text, size};
    size_t n = pattern == VH_SPLIT_PATTERN_GPT2 ? match_gpt2(&c, pos) : match_qwen2(&c, pos);
    if (n == 0) { /* cannot happen: the last alternative takes any character; stay total */
        size_t len;
        char_at(&c, pos, &len);
        n = len;
    }
    return n;
}
