/* Reading an image file: format detection by magic bytes, file reading, and messages.
 * The decoding itself is in png_decoder.c and jpeg_decoder.c. */
#include "image_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jpeg_decoder.h"
#include "png_decoder.h"

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
static const uint8_t jpeg_signature[3] = {0xff, 0xd8, 0xff}; /* SOI, then any marker */

#define MESSAGE_SIZE 320

static vh_status fail(char *err, size_t err_size, vh_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Write a message into err (if there is room for one) and return status. */
static vh_status fail(char *err, size_t err_size, vh_status status, const char *fmt, ...)
{
    if (err && err_size > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_size, fmt, ap);
        va_end(ap);
    }
    return status;
}

static int starts_with(const uint8_t *data, size_t size, const uint8_t *magic, size_t n)
{
    return size >= n && memcmp(data, magic, n) == 0;
}

vh_status vh_image_decode_memory(const uint8_t *data, size_t size, uint8_t **rgb, uint32_t *width,
                                 uint32_t *height, char *err, size_t err_size)
{
    if (rgb)
        *rgb = NULL;
    if (!rgb || !width || !height || (!data && size > 0))
        return fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "image: NULL argument");
    if (size == 0)
        return fail(err, err_size, VH_ERR_BAD_FRAME, "image: empty data");

    char message[MESSAGE_SIZE] = "";
    vh_status status;
    if (starts_with(data, size, png_signature, sizeof png_signature)) {
        status = vh_png_decode(data, size, rgb, width, height, message, sizeof message);
    } else if (starts_with(data, size, jpeg_signature, sizeof jpeg_signature)) {
        status = vh_jpeg_decode(data, size, rgb, width, height, message, sizeof message);
    } else {
        uint8_t head[4] = {0};
        memcpy(head, data, size < 4 ? size : 4);
        return fail(err, err_size, VH_ERR_UNSUPPORTED,
                    "image: not a PNG or JPEG (starts %02x %02x %02x %02x)", head[0], head[1],
                    head[2], head[3]);
    }
    if (status != VH_OK) {
        *rgb = NULL;
        return fail(err, err_size, status, "%s", message);
    }
    return VH_OK;
}

/* Read a whole regular file into a malloc'd buffer. */
static vh_status read_file(const char *path, uint8_t **data, size_t *size, char *err,
                           size_t err_size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, err_size, VH_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, err_size, VH_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > VH_IMAGE_MAX_FILE_BYTES) {
        close(fd);
        return fail(err, err_size, VH_ERR_UNSUPPORTED, "%s: file of %lld bytes is larger than %zu",
                    path, (long long)st.st_size, VH_IMAGE_MAX_FILE_BYTES);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buffer = malloc(n > 0 ? n : 1);
    if (!buffer) {
        close(fd);
        return fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu bytes", path,
                    n);
    }
    size_t done = 0;
    while (done < n) {
        ssize_t got = read(fd, buffer + done, n - done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            int e = got < 0 ? errno : 0;
            close(fd);
            free(buffer);
            return fail(err, err_size, VH_ERR_IO, "%s: read failed: %s", path,
                        e ? strerror(e) : "file shrank while reading");
        }
        done += (size_t)got;
    }
    close(fd);
    *data = buffer;
    *size = n;
    return VH_OK;
}

vh_status vh_image_load(const char *path, uint8_t **rgb, uint32_t *width, uint32_t *height,
                        char *err, size_t err_size)
{
    if (rgb)
        *rgb = NULL;
    if (!path || !rgb || !width || !height)
        return fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "image: NULL argument");
    uint8_t *data = NULL;
    size_t size = 0;
    vh_status status = read_file(path, &data, &size, err, err_size);
    if (status != VH_OK)
        return status;
    char message[MESSAGE_SIZE];
    status = vh_image_decode_memory(data, size, rgb, width, height, message, sizeof message);
    free(data);
    if (status != VH_OK)
        return fail(err, err_size, status, "%s: %s", path, message);
    return VH_OK;
}
