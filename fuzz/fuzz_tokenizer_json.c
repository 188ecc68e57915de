/* libFuzzer target: a tokenizer.json (Hugging Face tokenizers' file) loaded from memory, then,
 * when it loads, a few awkward strings and the input itself encoded with it, with and without
 * special tokens. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/hf_tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void encode(const vh_hf_tokenizer *tok, const char *text, size_t len)
{
    vh_error err;
    for (int special = 0; special < 2; special++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (vh_hf_tokenizer_encode(tok, text, len, special, &ids, &n, &err) == VH_OK) {
            for (size_t i = 0; i < n; i++)
                if (ids[i] < 0) abort(); /* every id is a real one */
            free(ids);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vh_hf_tokenizer *tok = NULL;
    vh_error err;
    if (vh_hf_tokenizer_load_bytes((const char *)data, size, "fuzz tokenizer.json", &tok, &err) != VH_OK)
        return 0;
    static const char *const texts[] = {"pick up the red block", "", "  two  spaces \n\n ",
                                        "\xe2\x96\x81\xf0\x9f\xa4\x96 It's e\xcc\x81 <s>x</s>",
                                        "\xff\xfe invalid utf-8 \xe2\x96", "<|im_start|>a<|im_end|>\r\n"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) encode(tok, texts[i], strlen(texts[i]));
    encode(tok, (const char *)data, size < 4096 ? size : 4096);
    vh_hf_tokenizer_free(tok);
    return 0;
}
