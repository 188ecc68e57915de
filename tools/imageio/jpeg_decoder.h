/* JPEG -> RGB8 with Pillow 9.4's open().convert("RGB") semantics (see image_file.h), on
 * libjpeg(-turbo). Internal to tools/imageio: use vh_image_decode_memory. */
#ifndef VH_TOOLS_JPEG_DECODER_H
#define VH_TOOLS_JPEG_DECODER_H

#include <stddef.h>
#include <stdint.h>

#include "vlahybrid/vlahybrid.h"

/* Decode the JPEG in data[0..size-1] into a malloc'd packed RGB8 buffer *rgb (NULL on failure).
 * Statuses and message as vh_image_decode_memory; message is always written (msg_size > 0). */
vh_status vh_jpeg_decode(const uint8_t *data, size_t size, uint8_t **rgb, uint32_t *width,
                         uint32_t *height, char *message, size_t message_size);

#endif
