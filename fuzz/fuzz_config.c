/* libFuzzer target: OpenVLA's config.json (first byte even) or preprocessor_config.json applied to
 * the bundled model's parsed config (first byte odd); then the dataset lookup an action needs. */
#include <stdint.h>
#include <string.h>

#include "family/openvla/openvla_config.h"
#include "fuzz_support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    vh_openvla_config cfg;
    vh_error err;
    const vh_action_stats *stats;
    if (data[0] % 2 == 0) {
        if (vh_openvla_config_parse(text, len, "fuzz config.json", &cfg, &err) == VH_OK) {
            (void)vh_openvla_config_dataset(&cfg, NULL, &stats, &err);
            (void)vh_openvla_config_dataset(&cfg, "bridge_orig", &stats, &err);
            vh_openvla_config_free(&cfg);
        }
        return 0;
    }
    size_t base_len = 0;
    const char *base = vh_fuzz_bundled_file("config.json", &base_len);
    if (!base || vh_openvla_config_parse(base, base_len, "config.json", &cfg, &err) != VH_OK) return 0;
    (void)vh_openvla_config_apply_preprocessor(&cfg, text, len, "fuzz preprocessor_config.json", &err);
    vh_openvla_config_free(&cfg);
    return 0;
}
