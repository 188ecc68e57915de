/* piece_table: piece text -> token id, the two maps of sentencepiece's model_interface.
 *
 * sentencepiece keeps "normal" pieces (NORMAL, USER_DEFINED, UNUSED: the ones BPE may produce by
 * merging) apart from "reserved" pieces (UNKNOWN, CONTROL, BYTE). The same text may appear once
 * in each; when both exist, looking a text up as a token gives the reserved id. An open-addressing
 * hash table keyed by the piece bytes; read-only after it is built, so any number of threads may
 * look up at once. */
#ifndef VH_TEXT_PIECE_TABLE_H
#define VH_TEXT_PIECE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "text/sentencepiece_model.h"
#include "util/error.h"

typedef struct vh_piece_ids {
    int32_t normal_id;   /* id of the NORMAL/USER_DEFINED/UNUSED piece with this text, or -1 */
    int32_t reserved_id; /* id of the UNKNOWN/CONTROL/BYTE piece with this text, or -1 */
} vh_piece_ids;

typedef struct vh_piece_table_slot vh_piece_table_slot;

typedef struct vh_piece_table {
    vh_piece_table_slot *slots; /* [mask + 1] */
    size_t mask;
    const vh_sp_piece *pieces;  /* not owned: the model's pieces the ids index */
} vh_piece_table;

/* 1 for the piece types BPE may merge into (NORMAL, USER_DEFINED, UNUSED). */
static inline int vh_piece_type_is_normal(vh_sp_piece_type type)
{
    return type == VH_SP_PIECE_NORMAL || type == VH_SP_PIECE_USER_DEFINED ||
           type == VH_SP_PIECE_UNUSED;
}

/* Index pieces[0 .. n_pieces), which must outlive the table. A text defined twice in the same
 * map is VH_ERR_BAD_MODEL, as in sentencepiece ("... is already defined"). */
vh_status vh_piece_table_build(vh_piece_table *table, const vh_sp_piece *pieces,
                               uint32_t n_pieces, const char *name, vh_error *err);

/* Both ids of text[0 .. size). */
vh_piece_ids vh_piece_table_find(const vh_piece_table *table, const void *text, size_t size);

void vh_piece_table_release(vh_piece_table *table);

#endif
