#include "family/minddrive/minddrive_prompt.h"

#include <stdlib.h>
#include <string.h>

vh_status vh_minddrive_round_ids(const vh_hf_tokenizer *tok, const char *text, const char *marker, int32_t **ids,
                                 size_t *n_ids, size_t *image_index, vh_error *err)
{
    *ids = NULL;
    *n_ids = *image_index = 0;
    const char *at = strstr(text, marker);
    if (!at || strstr(at + strlen(marker), marker))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "a MindDrive prompt must hold the image marker '%s' exactly once",
                            marker);
    int32_t *before = NULL, *after = NULL;
    size_t n_before = 0, n_after = 0;
    const char *rest = at + strlen(marker);
    vh_status st = vh_hf_tokenizer_encode(tok, text, (size_t)(at - text), false, &before, &n_before, err);
    if (!st) st = vh_hf_tokenizer_encode(tok, rest, strlen(rest), false, &after, &n_after, err);
    if (!st && !(*ids = malloc(sizeof **ids * (n_before + n_after + 1))))
        st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (prompt)");
    if (!st) {
        if (n_before) memcpy(*ids, before, sizeof **ids * n_before);
        if (n_after) memcpy(*ids + n_before, after, sizeof **ids * n_after);
        *n_ids = n_before + n_after;
        *image_index = n_before;
    }
    free(before);
    free(after);
    return st;
}

int32_t vh_minddrive_token_id(const vh_hf_tokenizer *tok, const char *token)
{
    int32_t *ids = NULL;
    size_t n = 0;
    vh_error err;
    int32_t id = -1;
    if (vh_hf_tokenizer_encode(tok, token, strlen(token), false, &ids, &n, &err) == VH_OK && n == 1)
        for (size_t i = 0; i < tok->added.n_tokens; i++)
            if (tok->added.tokens[i].id == ids[0]) id = ids[0];
    free(ids);
    return id;
}
