/* Runs a fuzz target over files without libFuzzer: every file named, and every file in every
 * directory named (sorted by name), once each. The CI build replays the committed seed corpus and
 * the regression corpus (every input that ever crashed a target) this way, under whatever
 * sanitizers the build has; a crash or sanitizer report fails the test. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long replayed;

static void replay_file(const char *path)
{
    size_t n = 0;
    char *data = vh_fuzz_read_file(path, &n);
    if (!data) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        exit(1);
    }
    LLVMFuzzerTestOneInput((const uint8_t *)data, n);
    free(data);
    replayed++;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) continue; /* a corpus directory git has not created: nothing to replay */
        if (!S_ISDIR(st.st_mode)) {
            replay_file(argv[i]);
            continue;
        }
        struct dirent **names;
        int n = scandir(argv[i], &names, NULL, by_name);
        for (int k = 0; k < n; k++) {
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", argv[i], names[k]->d_name);
            if (names[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) replay_file(path);
            free(names[k]);
        }
        free(names);
    }
    printf("replayed %ld inputs\n", replayed);
    return 0;
}
