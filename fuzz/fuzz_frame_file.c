/* libFuzzer target: vh-run's frame files (tools/frame_file.c, JSON Lines), the input written as a
 * file and read whole. */
#include <stdint.h>

#include "frame_file.h"
#include "fuzz_support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = vh_fuzz_write_input("frames.jsonl", data, size);
    vh_frame_file ff;
    char why[512];
    if (vh_frame_file_load(path, 4096, &ff, why, sizeof why) == 0) vh_frame_file_free(&ff);
    return 0;
}
