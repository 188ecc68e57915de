/* Where the tools find the bundled tiny model and demo frames: the installed copies when they
 * exist, else the source tree's (both paths are compiled in by tools/meson.build). */
#ifndef VH_TOOLS_BUNDLED_DATA_H
#define VH_TOOLS_BUNDLED_DATA_H

#include <sys/stat.h>

static inline const char *vh_bundled_path(const char *installed, const char *source)
{
    struct stat st;
    return stat(installed, &st) == 0 ? installed : source;
}

#define VH_BUNDLED_MODEL_DIR vh_bundled_path(VH_INSTALLED_MODEL_DIR, VH_SOURCE_MODEL_DIR)
#define VH_BUNDLED_FRAMES_DIR vh_bundled_path(VH_INSTALLED_FRAMES_DIR, VH_SOURCE_FRAMES_DIR)

#endif
