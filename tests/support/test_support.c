#include "test_support.h"

#include "backend/plugin_loader.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *join_path(const char *env_name, const char *fallback, const char *relative)
{
    const char *base = getenv(env_name);
    if (!base || !*base) base = fallback;
    size_t n = strlen(base) + strlen(relative) + 2;
    char *path = malloc(n);
    if (!path) abort();
    snprintf(path, n, "%s/%s", base, relative);
    return path;
}

char *vh_test_fixture_path(const char *relative)
{
    return join_path("VH_TEST_DATA", "tests/fixtures", relative);
}

char *vh_test_source_path(const char *relative)
{
    return join_path("VH_SOURCE_ROOT", ".", relative);
}

uint8_t *vh_test_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0) { fclose(f); return NULL; }
    long n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) { fclose(f); return NULL; }
    uint8_t *data = malloc((size_t)n + 1);
    if (data && fread(data, 1, (size_t)n, f) != (size_t)n) { free(data); data = NULL; }
    fclose(f);
    if (data) {
        data[n] = 0;
        if (size) *size = (size_t)n;
    }
    return data;
}

char *vh_test_write_temp(const void *data, size_t size, const char *suffix)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    size_t n = strlen(tmp) + 64 + (suffix ? strlen(suffix) : 0);
    char *path = malloc(n);
    if (!path) abort();
    snprintf(path, n, "%s/vh_test_XXXXXX%s", tmp, suffix ? suffix : "");
    int fd = mkstemps(path, suffix ? (int)strlen(suffix) : 0);
    if (fd < 0) abort();
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    close(fd);
    return path;
}

char *vh_test_make_temp_dir(void)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    size_t n = strlen(tmp) + 32;
    char *path = malloc(n);
    if (!path) abort();
    snprintf(path, n, "%s/vh_dir_XXXXXX", tmp);
    if (!mkdtemp(path)) abort();
    return path;
}

void vh_test_remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            size_t n = strlen(path) + strlen(e->d_name) + 2;
            char *child = malloc(n);
            if (!child) abort();
            snprintf(child, n, "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode)) vh_test_remove_tree(child);
            else unlink(child);
            free(child);
        }
        closedir(d);
    }
    rmdir(path);
}

double vh_test_max_rel_error(const float *a, const double *b, size_t n, double floor)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double scale = fabs(b[i]) > floor ? fabs(b[i]) : floor;
        double e = fabs((double)a[i] - b[i]) / scale;
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e; /* a NaN stays the worst (a later e would replace it) */
    }
    return worst;
}

/* The maximum by comparison, not fmax: Debian 12's aarch64 GCC 12 crashes vectorising an fmax
 * reduction over a constant-length array its caller inlines (internal compiler error). */
double vh_test_rel_error_of_largest(const float *a, const double *b, size_t n)
{
    double scale = 1e-12;
    for (size_t i = 0; i < n; i++)
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
    return vh_test_max_rel_error(a, b, n, scale);
}

double vh_test_rel_error_of_largest_f32(const float *a, const float *b, size_t n)
{
    double scale = 1e-12, worst = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)b[i]) > scale) scale = fabs((double)b[i]);
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)a[i] - (double)b[i]) / scale;
        if (!(e <= worst)) worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

int vh_test_run_suite(Suite *suite)
{
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed == 0 ? 0 : 1;
}

int vh_test_backend_usable(const char *name)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        vh_plugin *p = NULL;
        vh_error err;
        if (vh_plugin_load(name, NULL, NULL, &p, &err) != VH_OK) {
            printf("backend %s: %s\n", name, err.message);
            fflush(stdout);
            _exit(1);
        }
        int usable = p->iface->score() > 0;
        if (!usable) printf("backend %s: no usable device here\n", name);
        vh_plugin_unload(p);
        fflush(stdout);
        _exit(usable ? 0 : 1);
    }
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
