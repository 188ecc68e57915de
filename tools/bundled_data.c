#include "bundled_data.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef VH_BINDIR_TO_DATADIR
#define VH_BINDIR_TO_DATADIR "../share/vlahybrid"
#endif

static char model_dir[PATH_MAX + 64];
static char frames_dir[PATH_MAX + 64];
static pthread_once_t found_once = PTHREAD_ONCE_INIT;

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The folder of the running program, links resolved (/proc/self/exe); "." when unknown. */
static void program_folder(char *dir, size_t size)
{
    ssize_t n = readlink("/proc/self/exe", dir, size - 1);
    if (n <= 0) {
        snprintf(dir, size, ".");
        return;
    }
    dir[n] = '\0';
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, size, ".");
    else if (slash == dir) slash[1] = '\0'; /* a program in / */
    else *slash = '\0';
}

/* The build tree's marker: "model=DIR" and "frames=DIR" lines. */
static void read_build_tree_marker(const char *bin_dir, char *model, char *frames, size_t size)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", bin_dir, VH_TOOLS_BUILD_TREE_MARKER);
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[PATH_MAX];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!strncmp(line, "model=", 6)) snprintf(model, size, "%s", line + 6);
        else if (!strncmp(line, "frames=", 7)) snprintf(frames, size, "%s", line + 7);
    }
    fclose(f);
}

static void find_bundled_data(void)
{
    char bin_dir[PATH_MAX];
    program_folder(bin_dir, sizeof bin_dir);
    snprintf(model_dir, sizeof model_dir, "%s/%s/models/openvla-tiny", bin_dir, VH_BINDIR_TO_DATADIR);
    snprintf(frames_dir, sizeof frames_dir, "%s/%s/frames", bin_dir, VH_BINDIR_TO_DATADIR);
    if (is_dir(model_dir)) { /* installed: named without the bin/.. detour */
        char real[PATH_MAX];
        if (realpath(model_dir, real)) snprintf(model_dir, sizeof model_dir, "%s", real);
        if (realpath(frames_dir, real)) snprintf(frames_dir, sizeof frames_dir, "%s", real);
        return;
    }
    read_build_tree_marker(bin_dir, model_dir, frames_dir, sizeof model_dir);
}

const char *vh_bundled_model_dir(void)
{
    pthread_once(&found_once, find_bundled_data);
    return model_dir;
}

const char *vh_bundled_frames_dir(void)
{
    pthread_once(&found_once, find_bundled_data);
    return frames_dir;
}
