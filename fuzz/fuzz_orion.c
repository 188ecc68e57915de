/* libFuzzer target: Orion's config.json (first byte even), or a prompt text through the agent's
 * tokenization rules (first byte odd: the text split at "<image>", at the special tokens and at the
 * added <waypoint_ego>, whitespace around it stripped, each piece encoded by the bundled Llama-2
 * tokenizer). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "family/orion/orion_config.h"
#include "family/orion/orion_prompt.h"
#include "fuzz_support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    vh_error err;
    if (data[0] % 2 == 0) {
        vh_orion_config cfg;
        if (vh_orion_config_parse(text, len, "fuzz config.json", &cfg, &err) == VH_OK) vh_orion_config_free(&cfg);
        return 0;
    }
    static vh_tokenizer *tok;
    if (!tok) {
        size_t model_len = 0;
        const char *model = vh_fuzz_bundled_file("tokenizer.model", &model_len);
        if (!model || vh_tokenizer_load_bytes((const uint8_t *)model, model_len, "tokenizer.model", &tok, &err))
            return 0;
    }
    char *prompt = malloc(len + 1); /* a C string: the config's prompt text is one */
    if (!prompt) return 0;
    memcpy(prompt, text, len);
    prompt[len] = '\0';
    const vh_added_token added[1] = {{"<waypoint_ego>", 32000}};
    int32_t *ids = NULL;
    size_t n = 0, image = 0;
    if (vh_orion_prompt_ids(tok, prompt, "<image>", added, 1, 1, 1, &ids, &n, &image, &err) == VH_OK) free(ids);
    free(prompt);
    return 0;
}
