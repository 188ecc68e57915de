#include "backend/plugin_loader.h"
#include "backend/plugin_dirs.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/knobs.h"

#define PLUGIN_PREFIX "vh_backend_"
#define PLUGIN_SUFFIX ".so"
#define MAX_SEARCH_DIRS 32

/* The table fields of ABI 2.0: a plugin's struct_size must cover them. */
#define IFACE_V2_0_SIZE (offsetof(vh_backend_iface, bind_hidden) + sizeof(((vh_backend_iface *)0)->bind_hidden))

typedef struct search_path {
    char *env_copy;                    /* VH_BACKEND_PATH, split in place */
    vh_own_plugin_dirs *own;           /* the library's own plugin folders (plugin_dirs.h) */
    const char *dirs[MAX_SEARCH_DIRS];
    uint32_t n_dirs;
} search_path;

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_valid_name(const char *name)
{
    if (!name || !*name || strlen(name) > 64) return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) return 0;
    return 1;
}

static void free_search_path(search_path *sp)
{
    free(sp->env_copy);
    free(sp->own);
}

/* The folders to search, in order: explicit folder, VH_BACKEND_PATH, the library's own plugin
 * folders (beside it in the build tree, or the install's, found from where the library is). */
static vh_status make_search_path(const char *explicit_path, search_path *sp, vh_error *err)
{
    memset(sp, 0, sizeof *sp);
    if (explicit_path && is_dir(explicit_path)) sp->dirs[sp->n_dirs++] = explicit_path;
    const char *env = vh_knob_backend_path();
    if (env && *env) {
        sp->env_copy = strdup(env);
        if (!sp->env_copy) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
        char *save = NULL;
        for (char *dir = strtok_r(sp->env_copy, ":", &save); dir && sp->n_dirs < MAX_SEARCH_DIRS - 1;
             dir = strtok_r(NULL, ":", &save))
            sp->dirs[sp->n_dirs++] = dir;
    }
    sp->own = malloc(sizeof *sp->own);
    if (!sp->own) {
        free_search_path(sp);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    }
    vh_own_plugin_dirs_find(sp->own);
    for (uint32_t i = 0; i < sp->own->n && sp->n_dirs < MAX_SEARCH_DIRS; i++) sp->dirs[sp->n_dirs++] = sp->own->dirs[i];
    return VH_OK;
}

static void describe_search_path(const search_path *sp, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < sp->n_dirs && used + 1 < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? ", " : "", sp->dirs[i]);
        if (n < 0) break;
        used += (size_t)n;
    }
}

vh_status vh_plugin_check_iface(const vh_backend_iface *iface, const char *path, vh_error *err)
{
    if (!iface) {
        return vh_error_set(err, VH_ERR_BACKEND_ABI, "%s: the plugin refused backend ABI %d.%d (its entry "
                            "function returned NULL)", path, VH_BACKEND_ABI_MAJOR, VH_BACKEND_ABI_MINOR);
    }
    if (iface->abi_major != VH_BACKEND_ABI_MAJOR) {
        return vh_error_set(err, VH_ERR_BACKEND_ABI, "%s: the plugin implements backend ABI %u.%u; this "
                            "library (vlahybrid %s) needs ABI %d.x (it speaks %d.%d)", path,
                            iface->abi_major, iface->abi_minor, vh_version(), VH_BACKEND_ABI_MAJOR,
                            VH_BACKEND_ABI_MAJOR, VH_BACKEND_ABI_MINOR);
    }
    if (iface->struct_size < IFACE_V2_0_SIZE) {
        return vh_error_set(err, VH_ERR_BACKEND_ABI, "%s: the plugin's function table is %u bytes, too short "
                            "for backend ABI %u.%u (at least %zu bytes); this library speaks %d.%d", path,
                            iface->struct_size, iface->abi_major, iface->abi_minor, (size_t)IFACE_V2_0_SIZE,
                            VH_BACKEND_ABI_MAJOR, VH_BACKEND_ABI_MINOR);
    }
    if (!iface->name || !is_valid_name(iface->name) || !iface->score || !iface->device_count ||
        !iface->device_info || !iface->executor_create || !iface->executor_destroy || !iface->executor_run ||
        !iface->read_hidden || !iface->write_hidden || !iface->memory) {
        return vh_error_set(err, VH_ERR_BACKEND_ABI, "%s: the plugin's function table has an invalid name or "
                            "a missing required function", path);
    }
    if (iface->n_kinds == 0 || iface->n_kinds > 1024 || !iface->kinds) {
        return vh_error_set(err, VH_ERR_BACKEND_ABI, "%s: the plugin lists no block kinds it can run (n_kinds %u)",
                            path, iface->n_kinds);
    }
    return VH_OK;
}

/* Only a regular file goes to dlopen: the loader would block opening a FIFO and read a device
 * without end. O_NONBLOCK keeps this check itself from blocking on a FIFO. */
static vh_status check_regular_file(const char *path, vh_error *err)
{
    char reason[128];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return vh_error_set(err, VH_ERR_BACKEND_FAILED, "%s: cannot load plugin: %s", path,
                            strerror_r(errno, reason, sizeof reason));
    struct stat st;
    const int stat_failed = fstat(fd, &st) != 0;
    close(fd);
    if (stat_failed)
        return vh_error_set(err, VH_ERR_BACKEND_FAILED, "%s: cannot load plugin: %s", path,
                            strerror_r(errno, reason, sizeof reason));
    if (!S_ISREG(st.st_mode))
        return vh_error_set(err, VH_ERR_BACKEND_FAILED, "%s: cannot load plugin: %s", path,
                            S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
    return VH_OK;
}

/* dlopen one file and negotiate its table. */
static vh_status open_plugin_file(const char *path, const vh_logger *log, vh_plugin **out, vh_error *err)
{
    *out = NULL;
    vh_status st = check_regular_file(path, err);
    if (st) return st;
    vh_plugin *p = calloc(1, sizeof *p);
    if (!p) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    snprintf(p->path, sizeof p->path, "%s", path);

    dlerror();
    p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!p->handle) {
        const char *why = dlerror();
        free(p);
        return vh_error_set(err, VH_ERR_BACKEND_FAILED, "%s: cannot load plugin: %s", path, why ? why : "?");
    }
    vh_backend_entry_fn entry;
    *(void **)&entry = dlsym(p->handle, VH_BACKEND_ENTRY_SYMBOL);
    if (!entry) {
        vh_plugin_unload(p);
        return vh_error_set(err, VH_ERR_BACKEND_ABI, "%s: not a vlahybrid backend (no symbol %s)", path,
                            VH_BACKEND_ENTRY_SYMBOL);
    }
    p->iface = entry(VH_BACKEND_ABI_MAJOR, VH_BACKEND_ABI_MINOR);
    st = vh_plugin_check_iface(p->iface, path, err);
    if (st) {
        vh_plugin_unload(p);
        return st;
    }
    vh_log_debug(log, "loaded backend '%s' (ABI %u.%u) from %s", p->iface->name, p->iface->abi_major,
                 p->iface->abi_minor, path);
    *out = p;
    return VH_OK;
}

vh_status vh_plugin_load(const char *name, const char *explicit_path, const vh_logger *log, vh_plugin **out,
                         vh_error *err)
{
    *out = NULL;
    if (!is_valid_name(name)) {
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "backend name '%s' is not valid (letters a-z, "
                            "digits and '_')", name ? name : "(null)");
    }
    char path[4096];
    vh_status st;
    if (explicit_path && *explicit_path && !is_dir(explicit_path)) {
        /* An explicit file: it must exist and be the backend asked for. */
        if (access(explicit_path, F_OK) != 0)
            return vh_error_set(err, VH_ERR_BACKEND_NOT_FOUND, "plugin_path %s does not exist", explicit_path);
        if ((st = open_plugin_file(explicit_path, log, out, err))) return st;
        if (strcmp((*out)->iface->name, name) != 0) {
            vh_error_set(err, VH_ERR_BACKEND_NOT_FOUND, "%s is backend '%s', not '%s'", explicit_path,
                         (*out)->iface->name, name);
            vh_plugin_unload(*out);
            *out = NULL;
            return VH_ERR_BACKEND_NOT_FOUND;
        }
        return VH_OK;
    }

    search_path sp;
    if ((st = make_search_path(explicit_path, &sp, err))) return st;
    for (uint32_t i = 0; i < sp.n_dirs; i++) {
        snprintf(path, sizeof path, "%s/%s%s%s", sp.dirs[i], PLUGIN_PREFIX, name, PLUGIN_SUFFIX);
        if (access(path, F_OK) != 0) continue;
        st = open_plugin_file(path, log, out, err);
        if (st == VH_OK && strcmp((*out)->iface->name, name) != 0) {
            st = vh_error_set(err, VH_ERR_BACKEND_ABI, "%s calls itself backend '%s'", path, (*out)->iface->name);
            vh_plugin_unload(*out);
            *out = NULL;
        }
        free_search_path(&sp);
        return st;
    }
    char searched[2048];
    describe_search_path(&sp, searched, sizeof searched);
    free_search_path(&sp);
    return vh_error_set(err, VH_ERR_BACKEND_NOT_FOUND, "backend '%s' not found (looked for %s%s%s in: %s)", name,
                        PLUGIN_PREFIX, name, PLUGIN_SUFFIX, searched);
}

static int has_plugin_file_name(const char *file)
{
    size_t n = strlen(file), pre = strlen(PLUGIN_PREFIX), suf = strlen(PLUGIN_SUFFIX);
    return n > pre + suf && !strncmp(file, PLUGIN_PREFIX, pre) && !strcmp(file + n - suf, PLUGIN_SUFFIX);
}

vh_status vh_plugin_load_best(const char *explicit_path, const vh_logger *log, vh_plugin **out, vh_error *err)
{
    *out = NULL;
    if (explicit_path && *explicit_path && !is_dir(explicit_path)) {
        if (access(explicit_path, F_OK) != 0)
            return vh_error_set(err, VH_ERR_BACKEND_NOT_FOUND, "plugin_path %s does not exist", explicit_path);
        return open_plugin_file(explicit_path, log, out, err);
    }

    search_path sp;
    vh_status st = make_search_path(explicit_path, &sp, err);
    if (st) return st;
    vh_plugin *best = NULL;
    int32_t best_score = 0;
    char path[4096];
    for (uint32_t i = 0; i < sp.n_dirs; i++) {
        DIR *dir = opendir(sp.dirs[i]);
        if (!dir) continue;
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (!has_plugin_file_name(e->d_name)) continue;
            snprintf(path, sizeof path, "%s/%s", sp.dirs[i], e->d_name);
            vh_plugin *p = NULL;
            vh_error why;
            vh_error_clear(&why);
            if (open_plugin_file(path, log, &p, &why) != VH_OK) {
                vh_log_warn(log, "skipping %s: %s", path, why.message);
                continue;
            }
            int32_t score = p->iface->score();
            vh_log_debug(log, "backend '%s' scores %d here", p->iface->name, score);
            if (score > best_score) {
                vh_plugin_unload(best);
                best = p;
                best_score = score;
            } else {
                vh_plugin_unload(p);
            }
        }
        closedir(dir);
    }
    if (best) {
        free_search_path(&sp);
        *out = best;
        return VH_OK;
    }
    char searched[2048];
    describe_search_path(&sp, searched, sizeof searched);
    free_search_path(&sp);
    return vh_error_set(err, VH_ERR_BACKEND_NOT_FOUND, "no usable backend plugin found (searched: %s); set "
                        "VH_BACKEND_PATH or the session's plugin_path", searched);
}

void vh_plugin_unload(vh_plugin *p)
{
    if (!p) return;
    if (p->handle) dlclose(p->handle);
    free(p);
}

void *vh_plugin_host_alloc(const vh_plugin *plugin, size_t bytes)
{
    void *(*alloc)(size_t) = VH_PLUGIN_OPTIONAL(plugin, host_alloc);
    return alloc && VH_PLUGIN_OPTIONAL(plugin, host_free) ? alloc(bytes) : malloc(bytes);
}

void vh_plugin_host_free(const vh_plugin *plugin, void *ptr)
{
    void (*release)(void *) = VH_PLUGIN_OPTIONAL(plugin, host_free);
    if (release && VH_PLUGIN_OPTIONAL(plugin, host_alloc)) release(ptr);
    else free(ptr);
}
