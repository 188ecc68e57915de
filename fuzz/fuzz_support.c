#include "fuzz_support.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char temp_dir[4096];

static void remove_temp_dir(void)
{
    DIR *d = opendir(temp_dir);
    if (!d) return;
    struct dirent *e;
    char path[8192];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", temp_dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(temp_dir);
}

const char *vh_fuzz_temp_dir(void)
{
    if (temp_dir[0]) return temp_dir;
    const char *tmp = getenv("TMPDIR");
    snprintf(temp_dir, sizeof temp_dir, "%s/vh-fuzz-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(temp_dir)) {
        temp_dir[0] = 0;
        return NULL;
    }
    atexit(remove_temp_dir);
    return temp_dir;
}

const char *vh_fuzz_write_input(const char *name, const uint8_t *data, size_t size)
{
    static char path[4096];
    const char *dir = vh_fuzz_temp_dir();
    if (!dir) abort();
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();
    return path;
}

char *vh_fuzz_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *data = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            char *bigger = realloc(data, cap = cap ? 2 * cap : 65536);
            if (!bigger) {
                free(data);
                fclose(f);
                return NULL;
            }
            data = bigger;
        }
        const size_t got = fread(data + n, 1, cap - n, f);
        if (got == 0) break;
        n += got;
    }
    fclose(f);
    *len = n;
    return data;
}

const char *vh_fuzz_bundled_file(const char *name, size_t *len)
{
    static struct { const char *name; char *text; size_t len; } cache[4];
    for (size_t i = 0; i < sizeof cache / sizeof cache[0]; i++) {
        if (cache[i].name && !strcmp(cache[i].name, name)) {
            *len = cache[i].len;
            return cache[i].text;
        }
        if (cache[i].name) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", VH_FUZZ_MODEL_DIR, name);
        char *text = vh_fuzz_read_file(path, &cache[i].len);
        if (!text) return NULL;
        cache[i].name = name, cache[i].text = text;
        *len = cache[i].len;
        return text;
    }
    return NULL;
}
