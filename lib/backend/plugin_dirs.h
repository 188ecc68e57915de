/*
 * Where the library's own plugins are, found at run time from where the library itself is, so that
 * an installed tree can be moved (no absolute path is compiled in) and a program run from the build
 * tree finds the plugins built beside it.
 *
 * The library's folder is found with dladdr on one of its own functions. Then:
 *   - Build tree: meson writes the marker file BUILD_TREE_MARKER next to the built library
 *     (lib/meson.build); each of its lines is a plugin folder relative to the library's folder
 *     ("../backends/cpu_generic"). The marker is never installed.
 *   - Installed: the folder VH_PLUGIN_SUBDIR ("vlahybrid/backends") under the library's folder
 *     (the install's libdir), where meson installs the plugins.
 * When the core is linked statically into a program (the tests), the program's folder stands in
 * for the library's: neither exists there, and VH_BACKEND_PATH or plugin_path names the plugins.
 */
#ifndef VH_BACKEND_PLUGIN_DIRS_H
#define VH_BACKEND_PLUGIN_DIRS_H

#include <stddef.h>
#include <stdint.h>

#define VH_BUILD_TREE_MARKER "vlahybrid-build-tree-plugin-dirs"
#define VH_MAX_OWN_PLUGIN_DIRS 8

typedef struct vh_own_plugin_dirs {
    uint32_t n;
    char dirs[VH_MAX_OWN_PLUGIN_DIRS][4096];
} vh_own_plugin_dirs;

/* Fill `out` with the library's own plugin folders (build tree: the marker's folders; installed:
 * <libdir>/vlahybrid/backends). n is 0 when the library cannot tell where it is. Folders are not
 * checked for existence. Thread-safe. */
void vh_own_plugin_dirs_find(vh_own_plugin_dirs *out);

#endif
