/* libFuzzer target: a serialized sentencepiece model (tokenizer.model) loaded from memory, then,
 * when it loads, an OpenVLA prompt and a few awkward strings encoded with it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/bpe_tokenizer.h"
#include "text/text_tokenizer.h"
#include "family/openvla/openvla_prompt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vh_tokenizer *tok = NULL;
    vh_text_tokenizer *text_tok = NULL;
    vh_error err;
    if (vh_tokenizer_load_bytes(data, size, "fuzz tokenizer.model", &tok, &err) != VH_OK) return 0;
    if (vh_text_tokenizer_adopt(tok, NULL, "fuzz tokenizer.model", &text_tok, &err) != VH_OK) return 0;
    static const char *const texts[] = {"pick up the red block", "", "  two  spaces ", "\xe2\x96\x81\xf0\x9f\xa4\x96 ",
                                        "\xff\xfe invalid utf-8"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (vh_tokenizer_encode(tok, texts[i], strlen(texts[i]), &ids, &n, &err) == VH_OK) free(ids);
        ids = NULL;
        if (vh_openvla_prompt_ids(text_tok, vh_tokenizer_bos_id(tok), texts[i], &ids, &n, &err) == VH_OK) free(ids);
    }
    vh_text_tokenizer_free(text_tok); /* frees tok */
    return 0;
}
