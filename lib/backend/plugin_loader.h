/*
 * Finding and loading backend plugins (include/vlahybrid/backend.h).
 *
 * A backend named NAME lives in a shared module `vh_backend_NAME.so`. The search order is: the
 * session's explicit plugin_path (a file, or a folder), each folder of the environment variable
 * VH_BACKEND_PATH (colon-separated; ignored in setuid programs), then the install's plugin folder.
 * Each session dlopens what it uses (the dynamic loader shares and counts the handles), so there is
 * no process-wide registry to lock.
 */
#ifndef VH_BACKEND_PLUGIN_LOADER_H
#define VH_BACKEND_PLUGIN_LOADER_H

#include <stddef.h>

#include "util/log.h"
#include "vlahybrid/backend.h"

typedef struct vh_plugin {
    void *handle;                      /* dlopen handle */
    const vh_backend_iface *iface;     /* negotiated table */
    char path[4096];                   /* where it was loaded from */
} vh_plugin;

/* Load the backend `name` ([a-z0-9_]+). VH_ERR_BACKEND_NOT_FOUND lists the folders searched;
 * VH_ERR_BACKEND_ABI names the plugin's and the library's ABI versions. */
vh_status vh_plugin_load(const char *name, const char *explicit_path, const vh_logger *log,
                         vh_plugin **plugin, vh_error *err);

/* Load every plugin in the search path and keep the usable one with the highest score. */
vh_status vh_plugin_load_best(const char *explicit_path, const vh_logger *log, vh_plugin **plugin,
                              vh_error *err);

void vh_plugin_unload(vh_plugin *plugin);

/* An optional function (or one of a later ABI minor version), or NULL when the plugin leaves it
 * out or its table ends before it: VH_PLUGIN_OPTIONAL(plugin, host_alloc). */
#define VH_PLUGIN_OPTIONAL(plugin, field)                                                          \
    ((plugin)->iface->struct_size >= offsetof(vh_backend_iface, field) + sizeof((plugin)->iface->field) \
         ? (plugin)->iface->field : NULL)

/* Host memory for hidden states handed to and from the plugin's executors: the plugin's own
 * (page-locked) when it offers it, malloc otherwise. Free with the same plugin. */
void *vh_plugin_host_alloc(const vh_plugin *plugin, size_t bytes);
void vh_plugin_host_free(const vh_plugin *plugin, void *ptr);

/* Check a table returned by a plugin's entry function against this library's ABI. Exposed for
 * tests. */
vh_status vh_plugin_check_iface(const vh_backend_iface *iface, const char *path, vh_error *err);

#endif
