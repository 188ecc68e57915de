/* A test helper of vh_run_npy.sh: reads FILE as vh-run reads --vision-tokens and --noise
 * (tools/npy_file.h: .npy or raw float32, of the shape DIM...) and writes the floats it got, raw
 * little-endian float32, to OUT; on a refusal prints the message on stderr and exits 2.
 * usage: npy_dump FILE OUT DIM [DIM...] */
#include <stdio.h>
#include <stdlib.h>

#include "npy_file.h"

int main(int argc, char **argv)
{
    if (argc < 4 || argc - 3 > VH_NPY_MAX_DIMS) {
        fprintf(stderr, "usage: npy_dump FILE OUT DIM [DIM...]\n");
        return 2;
    }
    uint32_t dims[VH_NPY_MAX_DIMS];
    size_t count = 1;
    for (int i = 3; i < argc; i++) count *= dims[i - 3] = (uint32_t)strtoul(argv[i], NULL, 10);
    char why[1024];
    float *data = vh_read_float_array(argv[1], "array", dims, (uint32_t)(argc - 3), why, sizeof why);
    if (!data) {
        fprintf(stderr, "%s\n", why);
        return 2;
    }
    FILE *out = fopen(argv[2], "wb");
    const int ok = out && fwrite(data, sizeof *data, count, out) == count;
    if (out) fclose(out);
    free(data);
    return ok ? 0 : 1;
}
