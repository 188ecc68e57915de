/* Read a whole small file with a size cap. */
#include "util/file_read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Read until end of file into *buf (capacity *cap, grown as needed), refusing more than
 * max_size bytes. Reads to EOF rather than trusting st_size, which may change or be 0 (procfs). */
static vh_status read_all(int fd, const char *path, size_t max_size, char **buf, size_t *cap,
                          size_t *len, vh_error *err)
{
    char reason[128];
    *len = 0;
    for (;;) {
        if (*cap - *len < 2) { /* room for at least one byte and the NUL */
            size_t grown;
            if (__builtin_mul_overflow(*cap, 2, &grown) || grown > max_size + 2) grown = max_size + 2;
            if (grown <= *cap)
                return vh_error_set(err, VH_ERR_BAD_MODEL,
                                    "%s: larger than the limit of %zu bytes", path, max_size);
            char *bigger = realloc(*buf, grown);
            if (!bigger)
                return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
            *buf = bigger;
            *cap = grown;
        }
        ssize_t got = read(fd, *buf + *len, *cap - *len - 1);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            return vh_error_set(err, VH_ERR_IO, "%s: cannot read: %s", path,
                                strerror_r(errno, reason, sizeof reason));
        if (got == 0) break;
        *len += (size_t)got;
        if (*len > max_size)
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: larger than the limit of %zu bytes",
                                path, max_size);
    }
    (*buf)[*len] = '\0';
    return VH_OK;
}

vh_status vh_file_open_error(const char *path, int error_number, vh_error *err)
{
    struct stat link;
    if (error_number == ENOENT && lstat(path, &link) == 0 && S_ISLNK(link.st_mode)) {
        char target[4096];
        const ssize_t n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        return vh_error_set(err, VH_ERR_IO, "%s: a dangling symbolic link (to '%s', which does not exist)", path,
                            target);
    }
    char reason[128];
    return vh_error_set(err, VH_ERR_IO, "%s: cannot open: %s", path, strerror_r(error_number, reason, sizeof reason));
}

vh_status vh_read_text_file(const char *path, size_t max_size, char **text, size_t *len,
                            vh_error *err)
{
    if (!path || !text)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_read_text_file: NULL argument");
    *text = NULL;
    if (len) *len = 0;
    if (max_size > SIZE_MAX - 2) max_size = SIZE_MAX - 2;
    char reason[128];
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return vh_file_open_error(path, errno, err);
    struct stat st;
    vh_status status = VH_OK;
    if (fstat(fd, &st) != 0)
        status = vh_error_set(err, VH_ERR_IO, "%s: cannot stat: %s", path,
                              strerror_r(errno, reason, sizeof reason));
    else if (S_ISDIR(st.st_mode))
        status = vh_error_set(err, VH_ERR_IO, "%s: is a directory", path);
    else if (!S_ISREG(st.st_mode))
        status = vh_error_set(err, VH_ERR_IO, "%s: is not a regular file", path);
    else if ((uint64_t)st.st_size > max_size)
        status = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %lld bytes, larger than the limit of "
                              "%zu bytes", path, (long long)st.st_size, max_size);
    if (status != VH_OK) {
        close(fd);
        return status;
    }

    size_t cap = (size_t)st.st_size + 2, n = 0; /* +1 to see EOF in one read, +1 for the NUL */
    char *buf = malloc(cap);
    status = buf ? read_all(fd, path, max_size, &buf, &cap, &n, err)
                 : vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    close(fd);
    if (status != VH_OK) {
        free(buf);
        return status;
    }
    *text = buf;
    if (len) *len = n;
    return VH_OK;
}
