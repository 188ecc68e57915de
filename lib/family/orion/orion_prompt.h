/*
 * Orion's prompt ids as the released agent makes them (LLaVA's tokenizer_image_token with the slow
 * LlamaTokenizer of transformers 4.31, the stack the model was trained and released with): the
 * conversation text is cut at the image marker; each part is split at the special tokens
 * (<s>, </s>, <unk>: kept as they are) and at the added tokens (<waypoint_ego>, ...: whitespace
 * on both sides of them dropped, 4.31's default for tokens added as plain strings); each remaining
 * piece is encoded by sentencepiece on its own (so each gets its "▁" prefix); BOS starts the first
 * part only. Newer transformers (legacy=False) insert a 29871 before <waypoint_ego>: not this.
 */
#ifndef VH_FAMILY_ORION_PROMPT_H
#define VH_FAMILY_ORION_PROMPT_H

#include "text/bpe_tokenizer.h"

typedef struct vh_added_token {
    char text[64];
    int32_t id;
} vh_added_token;

/* ids of `text` without its image marker (malloc'd, *n_ids of them); the image's rows go before
 * ids[*image_index]. */
vh_status vh_orion_prompt_ids(const vh_tokenizer *tok, const char *text, const char *image_marker,
                              const vh_added_token *added, uint32_t n_added, int32_t bos_id, int add_bos,
                              int32_t **ids, size_t *n_ids, size_t *image_index, vh_error *err);

#endif
