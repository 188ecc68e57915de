#include "family/openvla/openvla_prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char prompt_head[] = "In: What action should the robot take to ";
static const char prompt_tail[] = "?\nOut:";

vh_status vh_openvla_prompt_ids(const vh_text_tokenizer *tok, int32_t bos_id, const char *instruction,
                                int32_t **ids, size_t *n_ids, vh_error *err)
{
    *ids = NULL;
    *n_ids = 0;
    size_t len = strlen(instruction), text_len;
    if (__builtin_add_overflow(len, sizeof prompt_head + sizeof prompt_tail, &text_len))
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "instruction too long");
    char *text = malloc(text_len);
    if (!text) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (prompt)");
    int n = snprintf(text, text_len, "%s%s%s", prompt_head, instruction, prompt_tail);

    int32_t *body = NULL;
    size_t n_body = 0;
    vh_status st = vh_text_tokenizer_encode(tok, text, (size_t)n, &body, &n_body, err);
    free(text);
    if (st) return st;

    int needs_empty = n_body == 0 || body[n_body - 1] != VH_OPENVLA_EMPTY_TOKEN;
    size_t total = 1 + n_body + (size_t)needs_empty;
    int32_t *out = malloc(sizeof *out * total);
    if (!out) {
        free(body);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (prompt)");
    }
    out[0] = bos_id;
    if (n_body) memcpy(out + 1, body, sizeof *out * n_body);
    if (needs_empty) out[total - 1] = VH_OPENVLA_EMPTY_TOKEN;
    free(body);
    *ids = out;
    *n_ids = total;
    return VH_OK;
}
