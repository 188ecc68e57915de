/* libFuzzer target: MindDrive's config.json as the converter writes it (the two rounds' prompts,
 * the experts, two planners, the speed tokens and the command mapping). */
#include <stdint.h>
#include <stdlib.h>

#include "family/minddrive/minddrive_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vh_error err;
    vh_minddrive_config cfg;
    if (vh_minddrive_config_parse((const char *)data, size, "fuzz config.json", &cfg, &err) == VH_OK)
        vh_minddrive_config_free(&cfg);
    return 0;
}
