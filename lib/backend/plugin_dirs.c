#include "backend/plugin_dirs.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/file_read.h"

#ifndef VH_PLUGIN_SUBDIR
#define VH_PLUGIN_SUBDIR "vlahybrid/backends"
#endif

/* The folder holding the object this function is in (libvlahybrid.so.0, or the program that links
 * the core statically), symbolic links resolved: a library reached through a link to another
 * folder has its plugins beside its real file. 0 when unknown. */
static int own_folder(char *dir, size_t size)
{
    Dl_info info;
    if (!dladdr((void *)own_folder, &info) || !info.dli_fname || !*info.dli_fname) return 0;
    char real[PATH_MAX];
    if (!realpath(info.dli_fname, real)) return 0;
    char *slash = strrchr(real, '/');
    if (!slash) return 0;
    *slash = '\0';
    return snprintf(dir, size, "%s", real[0] ? real : "/") < (int)size;
}

/* The build tree's marker, one plugin folder a line, relative to the library's folder (or absolute). */
static void read_build_tree_marker(char *text, const char *lib_dir, vh_own_plugin_dirs *out)
{
    for (char *line = strtok(text, "\r\n"); line && out->n < VH_MAX_OWN_PLUGIN_DIRS; line = strtok(NULL, "\r\n")) {
        if (!line[0] || line[0] == '#') continue;
        char *dir = out->dirs[out->n];
        int n = line[0] == '/' ? snprintf(dir, sizeof out->dirs[0], "%s", line)
                               : snprintf(dir, sizeof out->dirs[0], "%s/%s", lib_dir, line);
        if (n > 0 && (size_t)n < sizeof out->dirs[0]) out->n++;
    }
}

void vh_own_plugin_dirs_find(vh_own_plugin_dirs *out)
{
    out->n = 0;
    char lib_dir[PATH_MAX];
    if (!own_folder(lib_dir, sizeof lib_dir)) return;
    char marker[PATH_MAX + 64];
    snprintf(marker, sizeof marker, "%s/%s", lib_dir, VH_BUILD_TREE_MARKER);
    /* the checked reader: a FIFO or device in the marker's place is refused, never waited on */
    char *text = NULL;
    vh_error err;
    vh_error_clear(&err);
    if (vh_read_text_file(marker, 64 << 10, &text, NULL, &err) == VH_OK) {
        read_build_tree_marker(text, lib_dir, out);
        free(text);
        return;
    }
    if (snprintf(out->dirs[0], sizeof out->dirs[0], "%s/%s", lib_dir, VH_PLUGIN_SUBDIR) < (int)sizeof out->dirs[0])
        out->n = 1;
}
