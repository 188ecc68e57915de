#include "text/prefix_matcher.h"

#include <stdlib.h>
#include <string.h>

/* Children of a node form a singly linked list (first_child, next_sibling); index 0 is the root,
 * which is never anyone's child or sibling, so 0 also means "none". */
struct vh_trie_node {
    uint32_t first_child;
    uint32_t next_sibling;
    uint8_t byte;   /* the byte on the edge into this node */
    uint8_t is_key; /* a key ends here */
};

static uint32_t find_child(const vh_trie_node *nodes, uint32_t parent, uint8_t byte)
{
    for (uint32_t c = nodes[parent].first_child; c != 0; c = nodes[c].next_sibling)
        if (nodes[c].byte == byte) return c;
    return 0;
}

vh_status vh_prefix_matcher_build(vh_prefix_matcher *matcher, const char *const *keys,
                                  size_t n_keys, vh_error *err)
{
    memset(matcher, 0, sizeof *matcher);

    /* One node per key byte at most, plus the root. */
    size_t capacity = 1;
    for (size_t i = 0; i < n_keys; i++) {
        if (__builtin_add_overflow(capacity, strlen(keys[i]), &capacity) || capacity > UINT32_MAX)
            return vh_error_set(err, VH_ERR_BAD_MODEL, "user-defined pieces are too long in total");
    }
    if (capacity == 1) return VH_OK; /* no keys: nothing ever matches */

    vh_trie_node *nodes = calloc(capacity, sizeof *nodes);
    if (!nodes)
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "cannot allocate a trie of %zu nodes",
                            capacity);
    uint32_t n_nodes = 1;
    for (size_t i = 0; i < n_keys; i++) {
        const uint8_t *key = (const uint8_t *)keys[i];
        if (!key[0]) continue;
        uint32_t node = 0;
        for (; *key; key++) {
            uint32_t child = find_child(nodes, node, *key);
            if (child == 0) {
                child = n_nodes++;
                nodes[child].byte = *key;
                nodes[child].next_sibling = nodes[node].first_child;
                nodes[node].first_child = child;
            }
            node = child;
        }
        nodes[node].is_key = 1;
    }
    matcher->nodes = nodes;
    matcher->n_nodes = n_nodes;
    return VH_OK;
}

size_t vh_prefix_matcher_longest(const vh_prefix_matcher *matcher, const uint8_t *text,
                                 size_t size)
{
    if (!matcher->nodes) return 0;
    size_t longest = 0;
    uint32_t node = 0;
    for (size_t i = 0; i < size; i++) {
        node = find_child(matcher->nodes, node, text[i]);
        if (node == 0) break;
        if (matcher->nodes[node].is_key) longest = i + 1;
    }
    return longest;
}

void vh_prefix_matcher_release(vh_prefix_matcher *matcher)
{
    if (!matcher) return;
    free(matcher->nodes);
    matcher->nodes = NULL;
    matcher->n_nodes = 0;
}
