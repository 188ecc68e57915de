/* text_tokenizer: a model folder's tokenizer, whichever file the folder holds.
 *
 *   tokenizer.json   Hugging Face tokenizers' file (hf_tokenizer.h): preferred when both exist,
 *                    since it is what transformers' AutoTokenizer (fast, the default) reads, and so
 *                    what OpenVLA's predict_action tokenizes with (its AutoProcessor);
 *   tokenizer.model  sentencepiece's model (bpe_tokenizer.h), for folders without one. The two
 *                    agree on ordinary text (see doc/api.md, "Model folder files").
 *
 * Both encode without special tokens (the family adds BOS itself). Immutable after loading: any
 * number of threads may encode at once. */
#ifndef VH_TEXT_TEXT_TOKENIZER_H
#define VH_TEXT_TEXT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct vh_text_tokenizer vh_text_tokenizer;

/* Load dir/tokenizer.json, else dir/tokenizer.model. Errors: VH_ERR_IO (neither file; the
 * message names both), and those of the file's loader. */
vh_status vh_text_tokenizer_open_dir(const char *dir, vh_text_tokenizer **out, vh_error *err);

/* Wrap an already loaded tokenizer (exactly one of the two non-NULL), taking ownership of it
 * (freed here also on failure); `path` names it. For tests and fuzz targets that load from
 * memory. */
struct vh_tokenizer;
struct vh_hf_tokenizer;
vh_status vh_text_tokenizer_adopt(struct vh_tokenizer *sentencepiece, struct vh_hf_tokenizer *hf,
                                  const char *path, vh_text_tokenizer **out, vh_error *err);

void vh_text_tokenizer_free(vh_text_tokenizer *tok);

/* The ids of text[0 .. len) without BOS/EOS or other special tokens around it; *ids malloc'd
 * (NULL when *n_ids is 0). */
vh_status vh_text_tokenizer_encode(const vh_text_tokenizer *tok, const char *text, size_t len,
                                   int32_t **ids, size_t *n_ids, vh_error *err);

/* The BOS id the file names (sentencepiece's bos piece; tokenizer.json: the first special token
 * its template puts before the text), -1 when it names none. */
int32_t vh_text_tokenizer_bos_id(const vh_text_tokenizer *tok);

/* 1 + the largest id the tokenizer can produce. */
uint32_t vh_text_tokenizer_vocab_size(const vh_text_tokenizer *tok);

/* The file that was loaded. */
const char *vh_text_tokenizer_path(const vh_text_tokenizer *tok);

#endif
