/* bpe_tokenizer: text -> token ids exactly as sentencepiece encodes with a BPE model
 * (Llama-2's tokenizer.model), checked against sentencepiece 0.1.97.
 *
 *     vh_tokenizer *tok;
 *     if (vh_tokenizer_load("tokenizer.model", &tok, &err) != VH_OK) ...err.message...
 *     int32_t *ids; size_t n;
 *     vh_tokenizer_encode(tok, text, strlen(text), &ids, &n, &err);   // no BOS/EOS
 *     ... free(ids);
 *     vh_tokenizer_free(tok);
 *
 * Encoding is sentencepiece's: normalize (text_normalizer.h), split into characters with
 * user-defined pieces matched whole and never merged, merge the adjacent pair whose concatenation
 * is a NORMAL/USER_DEFINED/UNUSED piece with the highest score (ties: leftmost) until none is
 * left, split UNUSED results back into the pair they were made from, and emit unknown symbols as
 * their UTF-8 bytes (<0xXX> pieces) when byte_fallback is on, else as one unk id per run.
 * O(n log n) in the text's length.
 *
 * Models refused with VH_ERR_UNSUPPORTED: model types other than BPE, normalizers with character
 * rules (a precompiled_charsmap, a name other than "identity"). Self-test samples in the model
 * are not run. A loaded tokenizer is immutable: any number of threads may encode at once. */
#ifndef VH_TEXT_BPE_TOKENIZER_H
#define VH_TEXT_BPE_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* Longest text vh_tokenizer_encode() accepts, in bytes. */
#define VH_TOKENIZER_MAX_TEXT_BYTES ((size_t)256 << 20)

typedef struct vh_tokenizer vh_tokenizer;

/* Load a sentencepiece model file (`tokenizer.model`). On success *out is a new tokenizer to
 * free with vh_tokenizer_free(). Errors: VH_ERR_IO (unreadable), VH_ERR_BAD_MODEL (malformed,
 * inconsistent), VH_ERR_UNSUPPORTED (a model kind this tokenizer does not implement exactly). */
vh_status vh_tokenizer_load(const char *path, vh_tokenizer **out, vh_error *err);

/* The same from a serialized model in memory, data[0 .. size), which is not referenced after the
 * call. `name` (may be NULL) is used in error messages. */
vh_status vh_tokenizer_load_bytes(const uint8_t *data, size_t size, const char *name,
                                  vh_tokenizer **out, vh_error *err);

/* Free a tokenizer; NULL is ignored. */
void vh_tokenizer_free(vh_tokenizer *tok);

/* sentencepiece's encode(text) for text[0 .. len), any bytes (invalid UTF-8 is encoded as U+FFFD
 * per bad byte, as sentencepiece does); no BOS or EOS is added. On success *ids is a malloc'd
 * array of *n_ids ids that the caller frees (NULL when *n_ids is 0, e.g. for empty text).
 * Errors: VH_ERR_INVALID_ARGUMENT (NULL text with len > 0, text longer than
 * VH_TOKENIZER_MAX_TEXT_BYTES, or a symbol that is a CONTROL piece, which sentencepiece also
 * refuses to encode), VH_ERR_OUT_OF_MEMORY. Safe to call from many threads at once. */
vh_status vh_tokenizer_encode(const vh_tokenizer *tok, const char *text, size_t len,
                              int32_t **ids, size_t *n_ids, vh_error *err);

/* vh_tokenizer_encode, also counting its work into *steps (may be NULL): one step per merge
 * candidate looked up and per heap move. The merge is O(n log n) in the text's symbols; tests
 * hold it to that by these counts, not by the clock. */
vh_status vh_tokenizer_encode_counted(const vh_tokenizer *tok, const char *text, size_t len,
                                      int32_t **ids, size_t *n_ids, uint64_t *steps, vh_error *err);

/* Ids of the model's bos_piece / eos_piece ("<s>", "</s>" unless the model renames them), or -1
 * when that piece is not a CONTROL piece (sentencepiece's bos_id()/eos_id()). */
int32_t vh_tokenizer_bos_id(const vh_tokenizer *tok);
int32_t vh_tokenizer_eos_id(const vh_tokenizer *tok);

/* Id of the UNKNOWN piece (every valid model has exactly one). */
int32_t vh_tokenizer_unk_id(const vh_tokenizer *tok);

/* Number of pieces; ids are 0 .. vocab_size - 1. */
uint32_t vh_tokenizer_vocab_size(const vh_tokenizer *tok);

/* Id of the piece whose text is `piece` (NUL-terminated), -1 when there is none. When a text is
 * both a reserved (UNKNOWN/CONTROL/BYTE) and a normal piece, the reserved id, as sentencepiece.
 * Unlike sentencepiece's PieceToId, an absent piece gives -1, not the unk id. */
int32_t vh_tokenizer_piece_to_id(const vh_tokenizer *tok, const char *piece);

/* Text of piece `id` (NUL-terminated UTF-8, owned by the tokenizer; "▁" is U+2581), or NULL when
 * id is out of range. */
const char *vh_tokenizer_id_to_piece(const vh_tokenizer *tok, int32_t id);

#endif
