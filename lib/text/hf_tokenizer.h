/* hf_tokenizer: text -> token ids exactly as Hugging Face tokenizers encodes with a
 * tokenizer.json file (checked against tokenizers 0.23.2 on Llama-2's, OpenVLA-7B's, and
 * GPT-2- and Qwen2-style byte-level files).
 *
 *     vh_hf_tokenizer *tok;
 *     if (vh_hf_tokenizer_load("tokenizer.json", &tok, &err) != VH_OK) ...err.message...
 *     vh_hf_tokenizer_encode(tok, text, len, false, &ids, &n, &err); // encode(add_special_tokens=False)
 *     ... free(ids);
 *     vh_hf_tokenizer_free(tok);
 *
 * Encoding: the input is cut at added tokens (added_vocabulary.h); each piece between them is
 * normalized (hf_normalizer.h), cut at the added tokens that match normalized text, cut into
 * words (hf_pretokenize.h), and each word is encoded by the BPE model (hf_bpe_model.h). With
 * add_special_tokens, the post_processor's template puts its special tokens around the ids.
 *
 * Input that is not valid UTF-8 is read with each bad byte as U+FFFD (tokenizers only takes
 * valid strings; sentencepiece's path does the same). A loaded tokenizer is immutable: any number
 * of threads may encode at once. */
#ifndef VH_TEXT_HF_TOKENIZER_H
#define VH_TEXT_HF_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text/added_vocabulary.h"
#include "text/hf_bpe_model.h"
#include "text/hf_normalizer.h"
#include "text/hf_pretokenize.h"
#include "util/error.h"

/* Largest tokenizer.json read (Qwen2's is 7 MB, the largest known about 30 MB). */
#define VH_HF_TOKENIZER_MAX_FILE_BYTES ((size_t)256 << 20)

typedef struct vh_hf_tokenizer {
    vh_hf_added_vocabulary added;
    vh_hf_normalizer normalizer;
    vh_hf_pretokenizer pretokenizer;
    vh_hf_bpe_model model;
    int32_t *template_before, *template_after; /* post_processor's special ids around $A */
    size_t n_before, n_after;
    uint32_t vocab_size;                       /* 1 + the largest id of the model and added tokens */
} vh_hf_tokenizer;

/* Load a tokenizer.json file (hf_tokenizer_json.c). Errors: VH_ERR_IO (unreadable),
 * VH_ERR_BAD_MODEL (not JSON, malformed, inconsistent, too large), VH_ERR_UNSUPPORTED (a
 * component or option this encoder does not reproduce exactly; the message names it). */
vh_status vh_hf_tokenizer_load(const char *path, vh_hf_tokenizer **out, vh_error *err);

/* The same from the file's bytes data[0 .. size); `name` (may be NULL) for messages. */
vh_status vh_hf_tokenizer_load_bytes(const char *data, size_t size, const char *name,
                                     vh_hf_tokenizer **out, vh_error *err);

void vh_hf_tokenizer_free(vh_hf_tokenizer *tok);

/* tokenizers' encode(text, add_special_tokens).ids for text[0 .. len). *ids is malloc'd (NULL
 * when *n_ids is 0). Errors: VH_ERR_INVALID_ARGUMENT (NULL text with len > 0, more than
 * VH_TOKENIZER_MAX_TEXT_BYTES), VH_ERR_OUT_OF_MEMORY. */
vh_status vh_hf_tokenizer_encode(const vh_hf_tokenizer *tok, const char *text, size_t len,
                                 bool add_special_tokens, int32_t **ids, size_t *n_ids,
                                 vh_error *err);

/* The first special id the template puts before the text (Llama's <s>), -1 when none. */
int32_t vh_hf_tokenizer_bos_id(const vh_hf_tokenizer *tok);

#endif
