/* split_pattern: the pre-tokenizer regexes of tokenizer.json files, as hand-written matchers.
 *
 * tokenizers runs these patterns with the onig regex engine (leftmost match, alternatives tried
 * in order, backtracking). Each supported pattern matches at every position of any text, so its
 * matches tile the text; vh_split_pattern_match gives the length of the match at a position,
 * reproducing the alternative-by-alternative backtracking of the regex. Supported:
 *
 *   GPT-2 (ByteLevel's use_regex, and Split with the same pattern):
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   Qwen2 (Split):
 *     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
 *     \s*[\r\n]+|\s+(?!\S)|\s+
 *
 * Character classes from unicode_class.h. Any other pattern is refused by the caller. */
#ifndef VH_TEXT_SPLIT_PATTERN_H
#define VH_TEXT_SPLIT_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum vh_split_pattern {
    VH_SPLIT_PATTERN_GPT2,
    VH_SPLIT_PATTERN_QWEN2,
} vh_split_pattern;

extern const char vh_split_pattern_gpt2[];
extern const char vh_split_pattern_qwen2[];

/* The matcher for a regex given as its exact source text; false when there is none. */
bool vh_split_pattern_find(const char *regex, vh_split_pattern *out);

/* Length in bytes (> 0) of the pattern's match at text[pos ..) of the valid UTF-8
 * text[0 .. size), pos < size. */
size_t vh_split_pattern_match(vh_split_pattern pattern, const uint8_t *text, size_t size,
                              size_t pos);

#endif
