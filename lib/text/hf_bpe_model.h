/* hf_bpe_model: the "BPE" model of a tokenizer.json file, encoding one pre-tokenized word into
 * ids exactly as Hugging Face tokenizers' models::bpe does (checked against tokenizers 0.23.2):
 *
 *   - the word is split into characters, each looked up in the vocab; a character that is not
 *     there becomes its UTF-8 bytes as <0xXX> tokens when byte_fallback is on and all of them
 *     exist, else the unk token (consecutive unknowns fused into one when fuse_unk), else it is
 *     dropped (tokenizers drops it silently too);
 *   - adjacent pairs are merged lowest merge rank first (ties: leftmost) until no pair of the
 *     merges list is left; with ignore_merges a word that is itself in the vocab is one token.
 *
 * Merges are read in both forms ["a", "b"] and "a b"; a merge whose parts or result are not in
 * the vocab is VH_ERR_BAD_MODEL (as tokenizers refuses the file). Refused with VH_ERR_UNSUPPORTED:
 * dropout other than null/0, continuing_subword_prefix, end_of_word_suffix. Immutable after
 * loading: any number of threads may encode at once. */
#ifndef VH_TEXT_HF_BPE_MODEL_H
#define VH_TEXT_HF_BPE_MODEL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/id_list.h"
#include "text/string_table.h"
#include "util/error.h"

typedef struct vh_hf_merge_slot vh_hf_merge_slot;

typedef struct vh_hf_bpe_model {
    vh_string_table vocab;        /* token text -> id */
    vh_hf_merge_slot *merges;     /* (left id, right id) -> (rank, merged id); [merge_mask + 1] */
    size_t merge_mask;
    int32_t unk_id;               /* -1: no unk_token */
    bool fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_ids[256];        /* <0xXX> tokens; -1 where absent */
    int32_t max_id;               /* the largest id of the vocab */
} vh_hf_bpe_model;

/* Read the "model" object of a tokenizer.json (`name` for messages). Errors: VH_ERR_BAD_MODEL,
 * VH_ERR_UNSUPPORTED, VH_ERR_OUT_OF_MEMORY. Release with vh_hf_bpe_model_release(). */
vh_status vh_hf_bpe_model_from_json(const json_t *model, const char *name, vh_hf_bpe_model *out,
                                    vh_error *err);

void vh_hf_bpe_model_release(vh_hf_bpe_model *m);

/* Append the ids of the valid UTF-8 word[0 .. size) to out. Errors: VH_ERR_OUT_OF_MEMORY. */
vh_status vh_hf_bpe_model_encode(const vh_hf_bpe_model *m, const uint8_t *word, size_t size,
                                 vh_id_list *out, vh_error *err);

#endif
