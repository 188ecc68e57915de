#include "text/hf_tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "text/bpe_tokenizer.h"
#include "text/utf8.h"

void vh_hf_tokenizer_free(vh_hf_tokenizer *tok)
{
    if (!tok) return;
    vh_hf_added_vocabulary_release(&tok->added);
    vh_hf_normalizer_release(&tok->normalizer);
    vh_hf_pretokenizer_release(&tok->pretokenizer);
    vh_hf_bpe_model_release(&tok->model);
    free(tok->template_before);
    free(tok->template_after);
    free(tok);
}

int32_t vh_hf_tokenizer_bos_id(const vh_hf_tokenizer *tok)
{
    return tok->n_before > 0 ? tok->template_before[0] : -1;
}

/* A copy of text with every byte that does not start a valid UTF-8 character as U+FFFD. */
static uint8_t *valid_copy(const uint8_t *text, size_t len, size_t *out_len)
{
    uint8_t *out = malloc(len * 3 + 1);
    if (!out) return NULL;
    size_t w = 0;
    for (size_t pos = 0; pos < len;) {
        size_t n = vh_utf8_valid_char_len(text + pos, len - pos);
        if (n == 0) {
            memcpy(out + w, "\xEF\xBF\xBD", 3);
            w += 3;
            pos++;
        } else {
            memcpy(out + w, text + pos, n);
            w += n;
            pos += n;
        }
    }
    *out_len = w;
    return out;
}

/* Normalizer, normalized added tokens, pre-tokenizer and model for one piece between raw added
 * tokens. */
static vh_status encode_piece(const vh_hf_tokenizer *tok, const uint8_t *text, size_t size,
                              bool at_input_start, vh_id_list *out, vh_error *err)
{
    uint8_t *normalized = NULL;
    size_t n_size = 0, n_segs = 0;
    vh_hf_segment *segs = NULL;
    vh_status st = vh_hf_normalizer_apply(&tok->normalizer, text, size, &normalized, &n_size, err);
    if (!st) st = vh_hf_added_vocabulary_split(&tok->added, true, normalized, n_size, &segs,
                                               &n_segs, err);
    for (size_t i = 0; i < n_segs && !st; i++) {
        if (segs[i].id >= 0) {
            if (!vh_id_list_push(out, segs[i].id))
                st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "tokenizer.json: out of memory");
            continue;
        }
        vh_hf_word_list words;
        st = vh_hf_pretokenize(&tok->pretokenizer, normalized + segs[i].start,
                               segs[i].end - segs[i].start, at_input_start && segs[i].start == 0,
                               &words, err);
        for (size_t w = 0; w < words.n_words && !st; w++)
            st = vh_hf_bpe_model_encode(&tok->model, words.text + words.words[w].start,
                                        words.words[w].size, out, err);
        vh_hf_word_list_release(&words);
    }
    free(segs);
    free(normalized);
    return st;
}

static bool push_all(vh_id_list *out, const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!vh_id_list_push(out, ids[i])) return false;
    return true;
}

vh_status vh_hf_tokenizer_encode(const vh_hf_tokenizer *tok, const char *text, size_t len,
                                 bool add_special_tokens, int32_t **ids, size_t *n_ids,
                                 vh_error *err)
{
    if (!tok || !ids || !n_ids)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_hf_tokenizer_encode: NULL argument");
    *ids = NULL;
    *n_ids = 0;
    if (!text && len > 0)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_hf_tokenizer_encode: text is NULL");
    if (len > VH_TOKENIZER_MAX_TEXT_BYTES)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT,
                            "vh_hf_tokenizer_encode: %zu bytes of text is more than the %zu "
                            "allowed", len, VH_TOKENIZER_MAX_TEXT_BYTES);
    const uint8_t *input = (const uint8_t *)text;
    uint8_t *repaired = NULL;
    if (len > 0 && !vh_utf8_is_valid(input, len)) {
        if (!(repaired = valid_copy(input, len, &len)))
            return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "tokenizer.json: out of memory");
        input = repaired;
    }
    vh_id_list out = {0};
    vh_hf_segment *segs = NULL;
    size_t n_segs = 0;
    vh_status st = VH_OK;
    if (add_special_tokens && !push_all(&out, tok->template_before, tok->n_before))
        st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "tokenizer.json: out of memory");
    if (!st) st = vh_hf_added_vocabulary_split(&tok->added, false, input, len, &segs, &n_segs, err);
    for (size_t i = 0; i < n_segs && !st; i++) {
        if (segs[i].id >= 0) {
            if (!vh_id_list_push(&out, segs[i].id))
                st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "tokenizer.json: out of memory");
        } else {
            st = encode_piece(tok, input + segs[i].start, segs[i].end - segs[i].start,
                              segs[i].start == 0, &out, err);
        }
    }
    if (!st && add_special_tokens && !push_all(&out, tok->template_after, tok->n_after))
        st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "tokenizer.json: out of memory");
    free(segs);
    free(repaired);
    if (st || out.n == 0) {
        free(out.ids);
        return st;
    }
    *ids = out.ids;
    *n_ids = out.n;
    return VH_OK;
}
