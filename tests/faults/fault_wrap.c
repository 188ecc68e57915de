#include "fault_wrap.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The real functions (the linker's --wrap names). */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
int __real_posix_memalign(void **p, size_t alignment, size_t n);
FILE *__real_fopen(const char *path, const char *mode);
size_t __real_fread(void *buf, size_t size, size_t n, FILE *f);
int __real_open(const char *path, int flags, ...);
ssize_t __real_read(int fd, void *buf, size_t n);
void *__real_mmap(void *addr, size_t n, int prot, int flags, int fd, off_t off);
int __real_fstat(int fd, struct stat *st);
DIR *__real_opendir(const char *path);
json_t *__real_json_loadb(const char *buffer, size_t buflen, size_t flags, json_error_t *error);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fault_mode mode;
static int target, fired, n_sites;
/* A call site: its offset in the object that holds it (the plugin is loaded anew, at another
 * address, by every session) and that object's file name. */
typedef struct site {
    uintptr_t offset;
    char object[96];                   /* copied: a plugin's name dies with its unloading */
    const char *function;
} site;
static site sites[FAULT_MAX_SITES];

static site site_of(const void *caller, const char *function)
{
    site s = {.offset = (uintptr_t)caller, .function = function};
    Dl_info info;
    if (dladdr(caller, &info) && info.dli_fbase) {
        s.offset = (uintptr_t)caller - (uintptr_t)info.dli_fbase;
        const char *base = info.dli_fname ? strrchr(info.dli_fname, '/') : NULL;
        snprintf(s.object, sizeof s.object, "%s", base ? base + 1 : info.dli_fname ? info.dli_fname : "");
    }
    return s;
}

static int same_site(const site *a, const site *b)
{
    return a->offset == b->offset && a->function == b->function && !strcmp(a->object, b->object);
}

void fault_arm(fault_mode m, int site)
{
    pthread_mutex_lock(&lock);
    if (m == FAULT_COUNT) n_sites = 0;
    mode = m, target = site, fired = 0;
    pthread_mutex_unlock(&lock);
}

void fault_disarm(void)
{
    pthread_mutex_lock(&lock);
    mode = FAULT_OFF;
    pthread_mutex_unlock(&lock);
}

int fault_site_count(void) { return n_sites; }
const char *fault_site_function(int site) { return site >= 0 && site < n_sites ? sites[site].function : "?"; }
int fault_fired(void) { return fired; }
const char *fault_site_object(int site) { return site >= 0 && site < n_sites ? sites[site].object : "?"; }

/* Whether this call (from `caller`, to `function`) is to fail. */
static int should_fail(const char *function, const void *caller)
{
    if (mode == FAULT_OFF) return 0;
    int fail = 0;
    pthread_mutex_lock(&lock);
    const site here = site_of(caller, function); /* dladdr allocates nothing */
    if (mode == FAULT_COUNT) {
        int known = 0;
        for (int i = 0; i < n_sites && !known; i++) known = same_site(&sites[i], &here);
        if (!known && n_sites < FAULT_MAX_SITES) sites[n_sites++] = here;
    } else if (mode == FAULT_FAIL && !fired && target < n_sites && same_site(&sites[target], &here)) {
        fired = fail = 1;
    }
    pthread_mutex_unlock(&lock);
    return fail;
}

#define CALLER __builtin_return_address(0)

void *__wrap_malloc(size_t n)
{
    if (should_fail("malloc", CALLER)) return errno = ENOMEM, NULL;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    if (should_fail("calloc", CALLER)) return errno = ENOMEM, NULL;
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    if (should_fail("realloc", CALLER)) return errno = ENOMEM, NULL;
    return __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
    if (should_fail("strdup", CALLER)) return errno = ENOMEM, NULL;
    return __real_strdup(s);
}

int __wrap_posix_memalign(void **p, size_t alignment, size_t n)
{
    if (should_fail("posix_memalign", CALLER)) return ENOMEM;
    return __real_posix_memalign(p, alignment, n);
}

FILE *__wrap_fopen(const char *path, const char *m)
{
    if (should_fail("fopen", CALLER)) return errno = EIO, NULL;
    return __real_fopen(path, m);
}

size_t __wrap_fread(void *buf, size_t size, size_t n, FILE *f)
{
    if (should_fail("fread", CALLER)) return errno = EIO, 0; /* a short read */
    return __real_fread(buf, size, n, f);
}

int __wrap_open(const char *path, int flags, ...)
{
    mode_t m = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        m = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    if (should_fail("open", CALLER)) return errno = EIO, -1;
    return __real_open(path, flags, m);
}

ssize_t __wrap_read(int fd, void *buf, size_t n)
{
    if (should_fail("read", CALLER)) return errno = EIO, -1;
    return __real_read(fd, buf, n);
}

void *__wrap_mmap(void *addr, size_t n, int prot, int flags, int fd, off_t off)
{
    if (should_fail("mmap", CALLER)) return errno = ENOMEM, MAP_FAILED;
    return __real_mmap(addr, n, prot, flags, fd, off);
}

int __wrap_fstat(int fd, struct stat *st)
{
    if (should_fail("fstat", CALLER)) return errno = EIO, -1;
    return __real_fstat(fd, st);
}

DIR *__wrap_opendir(const char *path)
{
    if (should_fail("opendir", CALLER)) return errno = EIO, NULL;
    return __real_opendir(path);
}

json_t *__wrap_json_loadb(const char *buffer, size_t buflen, size_t flags, json_error_t *error)
{
    if (should_fail("json_loadb", CALLER)) { /* jansson out of memory */
        if (error) snprintf(error->text, sizeof error->text, "out of memory"), error->line = error->column = -1;
        return NULL;
    }
    return __real_json_loadb(buffer, buflen, flags, error);
}
