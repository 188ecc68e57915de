/* libFuzzer target: a safetensors file (header length, JSON header, byte buffer) parsed from memory,
 * then every tensor's bytes asked for (the aligned-copy path included) and a metadata lookup. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy: the parser keeps pointers into the bytes until close */
    uint8_t *bytes = malloc(size ? size : 1);
    if (!bytes) return 0;
    memcpy(bytes, data, size);
    vh_st_file *f = NULL;
    vh_error err;
    if (vh_st_parse_memory(bytes, size, "fuzz", &f, &err) == VH_OK) {
        const uint32_t n = vh_st_count(f);
        volatile uint8_t sink = 0;
        for (uint32_t i = 0; i < n; i++) {
            const vh_st_tensor *t = vh_st_at(f, i);
            const void *p = NULL;
            if (t && vh_st_data(f, t, &p, &err) == VH_OK && t->nbytes > 0)
                sink ^= ((const uint8_t *)p)[0] ^ ((const uint8_t *)p)[t->nbytes - 1];
            if (t) (void)vh_st_find(f, t->name);
        }
        (void)vh_st_metadata(f, "format");
        (void)sink;
        vh_st_close(f);
    }
    free(bytes);
    return 0;
}
