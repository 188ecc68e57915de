/*
 * MindDrive's prompts, tokenised as the released inference pipeline does
 * (data_utils.py::preprocess_qwen2(training_mode=False) and tokenizer_image_token_new(
 * add_special_tokens=False)): the round's text cut at the image marker, each side encoded by the
 * checkpoint's tokenizer.json without special tokens added around it, the vision rows between.
 */
#ifndef VH_FAMILY_MINDDRIVE_PROMPT_H
#define VH_FAMILY_MINDDRIVE_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "text/hf_tokenizer.h"

/* The ids of `text` with its one `marker` taken out; *image_index: where the vision rows go
 * (*ids malloc'd). VH_ERR_BAD_MODEL when the marker is not there exactly once. */
vh_status vh_minddrive_round_ids(const vh_hf_tokenizer *tok, const char *text, const char *marker, int32_t **ids,
                                 size_t *n_ids, size_t *image_index, vh_error *err);

/* The id of `token` when the tokenizer holds it as an added token (its text alone encodes to that
 * one id), or -1. */
int32_t vh_minddrive_token_id(const vh_hf_tokenizer *tok, const char *token);

#endif
