/* id_list: a growable array of token ids. */
#ifndef VH_TEXT_ID_LIST_H
#define VH_TEXT_ID_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct vh_id_list {
    int32_t *ids;
    size_t n, capacity;
} vh_id_list;

/* Append id; false when out of memory (the list is unchanged). */
static inline bool vh_id_list_push(vh_id_list *l, int32_t id)
{
    if (l->n == l->capacity) {
        size_t capacity = l->capacity ? l->capacity * 2 : 64;
        int32_t *ids = realloc(l->ids, capacity * sizeof *ids);
        if (!ids) return false;
        l->ids = ids;
        l->capacity = capacity;
    }
    l->ids[l->n++] = id;
    return true;
}

#endif
