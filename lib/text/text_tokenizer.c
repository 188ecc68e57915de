#include "text/text_tokenizer.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "text/bpe_tokenizer.h"
#include "text/hf_tokenizer.h"

struct vh_text_tokenizer {
    vh_tokenizer *sentencepiece;  /* one of the two */
    vh_hf_tokenizer *hf;
    char path[4096];
};

vh_status vh_text_tokenizer_open_dir(const char *dir, vh_text_tokenizer **out, vh_error *err)
{
    *out = NULL;
    vh_text_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (tokenizer)");
    struct stat sb;
    snprintf(tok->path, sizeof tok->path, "%s/tokenizer.json", dir);
    /* a tokenizer.json that is there in any form (a dangling link, unreadable, not JSON) is the one
     * used: the loader says why it cannot be, rather than tokenizer.model taken without a word */
    bool have_json = lstat(tok->path, &sb) == 0 || errno != ENOENT;
    if (!have_json) {
        snprintf(tok->path, sizeof tok->path, "%s/tokenizer.model", dir);
        if (lstat(tok->path, &sb) != 0 && errno == ENOENT) {
            free(tok);
            return vh_error_set(err, VH_ERR_IO, "%s has neither tokenizer.json nor tokenizer.model",
                                dir);
        }
    }
    vh_status st = have_json ? vh_hf_tokenizer_load(tok->path, &tok->hf, err)
                             : vh_tokenizer_load(tok->path, &tok->sentencepiece, err);
    if (st) {
        free(tok);
        return st;
    }
    *out = tok;
    return VH_OK;
}

vh_status vh_text_tokenizer_adopt(vh_tokenizer *sentencepiece, vh_hf_tokenizer *hf,
                                  const char *path, vh_text_tokenizer **out, vh_error *err)
{
    *out = NULL;
    vh_text_tokenizer *tok = (!sentencepiece) != (!hf) ? calloc(1, sizeof *tok) : NULL;
    if (!tok) {
        vh_tokenizer_free(sentencepiece);
        vh_hf_tokenizer_free(hf);
        return vh_error_set(err, (!sentencepiece) != (!hf) ? VH_ERR_OUT_OF_MEMORY : VH_ERR_INVALID_ARGUMENT,
                            "vh_text_tokenizer_adopt: %s", (!sentencepiece) != (!hf) ? "out of memory"
                                                                                    : "not exactly one tokenizer");
    }
    tok->sentencepiece = sentencepiece;
    tok->hf = hf;
    snprintf(tok->path, sizeof tok->path, "%s", path ? path : "(memory)");
    *out = tok;
    return VH_OK;
}

void vh_text_tokenizer_free(vh_text_tokenizer *tok)
{
    if (!tok) return;
    vh_tokenizer_free(tok->sentencepiece);
    vh_hf_tokenizer_free(tok->hf);
    free(tok);
}

vh_status vh_text_tokenizer_encode(const vh_text_tokenizer *tok, const char *text, size_t len,
                                   int32_t **ids, size_t *n_ids, vh_error *err)
{
    if (tok->sentencepiece) return vh_tokenizer_encode(tok->sentencepiece, text, len, ids, n_ids, err);
    return vh_hf_tokenizer_encode(tok->hf, text, len, false, ids, n_ids, err);
}

int32_t vh_text_tokenizer_bos_id(const vh_text_tokenizer *tok)
{
    return tok->sentencepiece ? vh_tokenizer_bos_id(tok->sentencepiece) : vh_hf_tokenizer_bos_id(tok->hf);
}

uint32_t vh_text_tokenizer_vocab_size(const vh_text_tokenizer *tok)
{
    return tok->sentencepiece ? vh_tokenizer_vocab_size(tok->sentencepiece) : tok->hf->vocab_size;
}

const char *vh_text_tokenizer_path(const vh_text_tokenizer *tok) { return tok->path; }
