/* string_table: byte string -> int32 id, an open-addressing hash table that owns copies of its
 * keys. Used for tokenizer.json's vocab and added tokens. Read-only after it is filled, so any
 * number of threads may look up at once. */
#ifndef VH_TEXT_STRING_TABLE_H
#define VH_TEXT_STRING_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct vh_string_table_slot vh_string_table_slot;

typedef struct vh_string_table {
    vh_string_table_slot *slots; /* [mask + 1] */
    size_t mask, count;
    char *arena;                 /* the keys, back to back */
    size_t arena_size, arena_capacity;
} vh_string_table;

/* An empty table; release with vh_string_table_release(). */
void vh_string_table_init(vh_string_table *t);

/* Map text[0 .. size) to id (>= 0), replacing an earlier id for the same text. Errors:
 * VH_ERR_OUT_OF_MEMORY. */
vh_status vh_string_table_put(vh_string_table *t, const void *text, size_t size, int32_t id,
                              vh_error *err);

/* The id of text[0 .. size), -1 when it is absent. */
int32_t vh_string_table_get(const vh_string_table *t, const void *text, size_t size);

void vh_string_table_release(vh_string_table *t);

#endif
