/*
 * Where the example's frames come from: a folder of PNG/JPEG images replayed in name order (as a
 * camera would deliver them, looping), or a V4L2 camera (/dev/videoN, YUYV, memory-mapped buffers,
 * plain ioctl). Either way next() hands the newest frame as packed RGB8 with its capture time.
 */
#ifndef OPENVLA_ORIN_FRAME_SOURCE_H
#define OPENVLA_ORIN_FRAME_SOURCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct frame_source frame_source;

/* A folder with at least one .png/.jpg/.jpeg file; NULL and a message in err on failure. */
frame_source *frame_source_open_folder(const char *dir, char *err, size_t err_size);
/* A V4L2 capture device at width x height (the driver may pick the nearest size). */
frame_source *frame_source_open_camera(const char *device, uint32_t width, uint32_t height, char *err,
                                       size_t err_size);
/* The next frame: *rgb stays valid until the next call. A folder returns at once (the loop paces
 * it); a camera blocks until the driver has a frame. 0 on success, -1 with a message in err. */
int frame_source_next(frame_source *s, const uint8_t **rgb, uint32_t *width, uint32_t *height,
                      int64_t *capture_ns, char *err, size_t err_size);
/* 1 when frames come at the device's own pace (a camera), 0 when the caller paces them. */
int frame_source_is_live(const frame_source *s);
void frame_source_close(frame_source *s);

#endif
