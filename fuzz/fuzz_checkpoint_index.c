/* libFuzzer target: model.safetensors.index.json, opened as a checkpoint folder holding two small
 * valid shards (a.safetensors: "x", b.safetensors: "y") that an index may name. The folder is made
 * once per process; each input is written as its index file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/checkpoint.h"
#include "fuzz_support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char index_path[4096];
static const char *dir;

/* A one-tensor F32 [2] safetensors file. */
static int write_shard(const char *name, const char *tensor)
{
    char header[128], path[4096];
    int n = snprintf(header, sizeof header, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", tensor);
    while (n % 8) header[n++] = ' ';
    const uint64_t len = (uint64_t)n;
    const float values[2] = {1.0f, -2.0f};
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(&len, 8, 1, f) == 1 && fwrite(header, 1, (size_t)n, f) == (size_t)n &&
             fwrite(values, sizeof values, 1, f) == 1;
    return fclose(f) == 0 && ok ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir) {
        dir = vh_fuzz_temp_dir();
        if (!dir || write_shard("a.safetensors", "x") || write_shard("b.safetensors", "y")) abort();
        snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", dir);
    }
    FILE *f = fopen(index_path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
    vh_checkpoint *c = NULL;
    vh_error err;
    if (vh_checkpoint_open(dir, &c, &err) == VH_OK) {
        vh_st_file *file = NULL;
        for (uint32_t i = 0; i < vh_checkpoint_count(c); i++) (void)vh_checkpoint_at(c, i, &file);
        (void)vh_checkpoint_find(c, "x", &file);
        vh_checkpoint_close(c);
    }
    return 0;
}
