/* prefix_matcher: the longest key that is a prefix of a text, over a fixed set of keys.
 *
 * sentencepiece matches user-defined pieces this way, both in the normalizer (on the raw input)
 * and when it splits normalized text into symbols. Its keys are C strings, so a key ends at its
 * first NUL byte here too. A byte trie: matching costs at most one step per byte matched. */
#ifndef VH_TEXT_PREFIX_MATCHER_H
#define VH_TEXT_PREFIX_MATCHER_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct vh_trie_node vh_trie_node;

typedef struct vh_prefix_matcher {
    vh_trie_node *nodes; /* [n_nodes]; nodes[0] is the root; NULL when there are no keys */
    uint32_t n_nodes;
} vh_prefix_matcher;

/* Build a matcher over keys[0 .. n_keys) (NUL-terminated; empty keys are ignored). The keys are
 * not referenced afterwards. Release with vh_prefix_matcher_release(). */
vh_status vh_prefix_matcher_build(vh_prefix_matcher *matcher, const char *const *keys,
                                  size_t n_keys, vh_error *err);

/* Length of the longest key that text[0 .. size) starts with; 0 when none does. */
size_t vh_prefix_matcher_longest(const vh_prefix_matcher *matcher, const uint8_t *text,
                                 size_t size);

void vh_prefix_matcher_release(vh_prefix_matcher *matcher);

#endif
