/* libFuzzer target: vh-run's float arrays (tools/npy_file.c), the input written as a file: read as
 * .npy (first byte even) or through vh_read_float_array for a 2 x 3 array, which takes a .npy by its
 * magic or raw float32 (first byte odd). */
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_support.h"
#include "npy_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const char *path = vh_fuzz_write_input("input.npy", data + 1, size - 1);
    char why[512];
    if (data[0] % 2 == 0) {
        vh_npy_array a;
        if (vh_npy_read(path, &a, why, sizeof why) == 0) free(a.data);
        return 0;
    }
    static const uint32_t dims[2] = {2, 3};
    free(vh_read_float_array(path, "fuzz array", dims, 2, why, sizeof why));
    return 0;
}
