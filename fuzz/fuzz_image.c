/* libFuzzer target: a PNG or JPEG file decoded from memory to RGB8 (tools/imageio, what vh-run and
 * the tests decode frames with). */
#include <stdint.h>
#include <stdlib.h>

#include "image_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *rgb = NULL;
    uint32_t w = 0, h = 0;
    char err[256];
    if (vh_image_decode_memory(data, size, &rgb, &w, &h, err, sizeof err) == VH_OK) {
        volatile uint8_t sink = rgb[0] ^ rgb[(size_t)w * h * 3 - 1]; /* the whole buffer is there */
        (void)sink;
        free(rgb);
    }
    return 0;
}
