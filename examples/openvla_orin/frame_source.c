#include "frame_source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/videodev2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "image_file.h"

#define MAX_IMAGES 4096
#define CAMERA_BUFFERS 4

struct frame_source {
    /* folder */
    uint8_t **images;
    uint32_t *widths, *heights, n_images, next;
    /* camera */
    int fd;
    void *buffers[CAMERA_BUFFERS];
    size_t lengths[CAMERA_BUFFERS];
    uint32_t n_buffers, width, height, bytes_per_line;
    int streaming;
    uint8_t *rgb;
};

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".png") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

frame_source *frame_source_open_folder(const char *dir, char *err, size_t err_size)
{
    frame_source *s = calloc(1, sizeof *s);
    char **names = calloc(MAX_IMAGES, sizeof *names);
    DIR *d = opendir(dir);
    if (!s || !names || !d) {
        snprintf(err, err_size, "%s: %s", dir, d ? "out of memory" : strerror(errno));
        goto fail;
    }
    s->fd = -1;
    uint32_t n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < MAX_IMAGES;)
        if (is_image_name(e->d_name) && !(names[n++] = strdup(e->d_name))) {
            snprintf(err, err_size, "out of memory");
            goto fail;
        }
    if (n == 0) {
        snprintf(err, err_size, "%s: no .png or .jpg images", dir);
        goto fail;
    }
    qsort(names, n, sizeof *names, by_name);
    s->images = calloc(n, sizeof *s->images);
    s->widths = calloc(n, sizeof *s->widths);
    s->heights = calloc(n, sizeof *s->heights);
    if (!s->images || !s->widths || !s->heights) {
        snprintf(err, err_size, "out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (vh_image_load(path, &s->images[i], &s->widths[i], &s->heights[i], err, err_size) != VH_OK) goto fail;
        s->n_images++;
    }
    for (uint32_t i = 0; i < n; i++) free(names[i]);
    free(names);
    closedir(d);
    return s;
fail:
    for (uint32_t i = 0; names && i < MAX_IMAGES && names[i]; i++) free(names[i]);
    free(names);
    if (d) closedir(d);
    frame_source_close(s);
    return NULL;
}

static int xioctl(int fd, unsigned long request, void *arg)
{
    int r;
    while ((r = ioctl(fd, request, arg)) < 0 && errno == EINTR) {}
    return r;
}

frame_source *frame_source_open_camera(const char *device, uint32_t width, uint32_t height, char *err,
                                       size_t err_size)
{
    frame_source *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    const char *step = "open";
    if ((s->fd = open(device, O_RDWR)) < 0) goto fail;
    struct v4l2_capability cap = {0};
    step = "VIDIOC_QUERYCAP";
    if (xioctl(s->fd, VIDIOC_QUERYCAP, &cap) < 0) goto fail;
    if (!(cap.capabilities & V4L2_CAP_VIDEO_CAPTURE) || !(cap.capabilities & V4L2_CAP_STREAMING)) {
        snprintf(err, err_size, "%s: not a streaming video capture device", device);
        frame_source_close(s);
        return NULL;
    }
    struct v4l2_format fmt = {.type = V4L2_BUF_TYPE_VIDEO_CAPTURE};
    fmt.fmt.pix.width = width;
    fmt.fmt.pix.height = height;
    fmt.fmt.pix.pixelformat = V4L2_PIX_FMT_YUYV;
    fmt.fmt.pix.field = V4L2_FIELD_NONE;
    step = "VIDIOC_S_FMT";
    if (xioctl(s->fd, VIDIOC_S_FMT, &fmt) < 0) goto fail;
    if (fmt.fmt.pix.pixelformat != V4L2_PIX_FMT_YUYV) {
        snprintf(err, err_size, "%s: the camera does not offer YUYV (the one format this example converts)", device);
        frame_source_close(s);
        return NULL;
    }
    s->width = fmt.fmt.pix.width;
    s->height = fmt.fmt.pix.height;
    s->bytes_per_line = fmt.fmt.pix.bytesperline ? fmt.fmt.pix.bytesperline : 2 * s->width;
    struct v4l2_requestbuffers req = {.count = CAMERA_BUFFERS, .type = V4L2_BUF_TYPE_VIDEO_CAPTURE,
                                      .memory = V4L2_MEMORY_MMAP};
    step = "VIDIOC_REQBUFS";
    if (xioctl(s->fd, VIDIOC_REQBUFS, &req) < 0) goto fail;
    s->n_buffers = req.count < CAMERA_BUFFERS ? req.count : CAMERA_BUFFERS;
    for (uint32_t i = 0; i < s->n_buffers; i++) {
        struct v4l2_buffer b = {.type = V4L2_BUF_TYPE_VIDEO_CAPTURE, .memory = V4L2_MEMORY_MMAP, .index = i};
        step = "VIDIOC_QUERYBUF";
        if (xioctl(s->fd, VIDIOC_QUERYBUF, &b) < 0) goto fail;
        s->lengths[i] = b.length;
        s->buffers[i] = mmap(NULL, b.length, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, b.m.offset);
        step = "mmap";
        if (s->buffers[i] == MAP_FAILED) {
            s->buffers[i] = NULL;
            goto fail;
        }
        step = "VIDIOC_QBUF";
        if (xioctl(s->fd, VIDIOC_QBUF, &b) < 0) goto fail;
    }
    enum v4l2_buf_type type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
    step = "VIDIOC_STREAMON";
    if (xioctl(s->fd, VIDIOC_STREAMON, &type) < 0) goto fail;
    s->streaming = 1;
    if (!(s->rgb = malloc((size_t)s->width * s->height * 3))) {
        snprintf(err, err_size, "out of memory");
        frame_source_close(s);
        return NULL;
    }
    return s;
fail:
    snprintf(err, err_size, "%s: %s: %s", device, step, strerror(errno));
    frame_source_close(s);
    return NULL;
}

static uint8_t clamp_byte(int v) { return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v; }

/* YUYV (4:2:2, BT.601 limited range, as UVC webcams send) to RGB8. */
static void yuyv_to_rgb(const uint8_t *src, uint32_t stride, uint32_t width, uint32_t height, uint8_t *rgb)
{
    for (uint32_t y = 0; y < height; y++) {
        const uint8_t *row = src + (size_t)y * stride;
        for (uint32_t x = 0; x < width; x++) {
            const int luma = row[2 * x] - 16, u = row[4 * (x / 2) + 1] - 128, v = row[4 * (x / 2) + 3] - 128;
            uint8_t *p = rgb + 3 * ((size_t)y * width + x);
            p[0] = clamp_byte((298 * luma + 409 * v + 128) >> 8);
            p[1] = clamp_byte((298 * luma - 100 * u - 208 * v + 128) >> 8);
            p[2] = clamp_byte((298 * luma + 516 * u + 128) >> 8);
        }
    }
}

int frame_source_next(frame_source *s, const uint8_t **rgb, uint32_t *width, uint32_t *height,
                      int64_t *capture_ns, char *err, size_t err_size)
{
    if (s->images) {
        const uint32_t i = s->next++ % s->n_images;
        *rgb = s->images[i], *width = s->widths[i], *height = s->heights[i];
        *capture_ns = monotonic_ns();
        return 0;
    }
    struct v4l2_buffer b = {.type = V4L2_BUF_TYPE_VIDEO_CAPTURE, .memory = V4L2_MEMORY_MMAP};
    if (xioctl(s->fd, VIDIOC_DQBUF, &b) < 0) {
        snprintf(err, err_size, "VIDIOC_DQBUF: %s", strerror(errno));
        return -1;
    }
    *capture_ns = monotonic_ns(); /* when the frame reached us (the driver's timestamp clock varies) */
    if (b.index >= s->n_buffers || b.bytesused < (size_t)s->bytes_per_line * (s->height - 1) + 2 * s->width) {
        snprintf(err, err_size, "camera buffer %u: %u bytes, short for %ux%u YUYV", b.index, b.bytesused, s->width,
                 s->height);
        xioctl(s->fd, VIDIOC_QBUF, &b);
        return -1;
    }
    yuyv_to_rgb(s->buffers[b.index], s->bytes_per_line, s->width, s->height, s->rgb);
    if (xioctl(s->fd, VIDIOC_QBUF, &b) < 0) {
        snprintf(err, err_size, "VIDIOC_QBUF: %s", strerror(errno));
        return -1;
    }
    *rgb = s->rgb, *width = s->width, *height = s->height;
    return 0;
}

int frame_source_is_live(const frame_source *s) { return s->images == NULL; }

void frame_source_close(frame_source *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->n_images; i++) free(s->images[i]);
    free(s->images);
    free(s->widths);
    free(s->heights);
    if (s->streaming) {
        enum v4l2_buf_type type = V4L2_BUF_TYPE_VIDEO_CAPTURE;
        xioctl(s->fd, VIDIOC_STREAMOFF, &type);
    }
    for (uint32_t i = 0; i < CAMERA_BUFFERS; i++)
        if (s->buffers[i]) munmap(s->buffers[i], s->lengths[i]);
    if (s->fd > 0) close(s->fd);
    free(s->rgb);
    free(s);
}
