/* Reading PNG and JPEG files into RGB8 pixels, as PIL.Image.open(path).convert("RGB") does.
 *
 * For the command-line tools and the tests, not part of libvlahybrid (the library takes decoded
 * frames). Linked through the meson dependency vh_imageio_dep (libpng + libjpeg).
 *
 * What comes out, per input kind (matching Pillow 9.4 pixel for pixel):
 *   - PNG 8-bit RGB, RGBA, gray, gray+alpha: alpha is dropped, never composited; gray is copied
 *     to R, G and B; tRNS is ignored.
 *   - PNG 1/2/4-bit gray: scaled to 0..255 (x255, x85, x17).
 *   - PNG palette (1/2/4/8-bit, with or without tRNS): looked up; an index past the end of PLTE
 *     gives gray (i, i, i), as Pillow's default palette does.
 *   - PNG 16-bit RGB, RGBA, gray+alpha: the most significant byte of each sample.
 *   - PNG 16-bit gray: min(value, 255) (Pillow opens it as mode "I" and convert("RGB") clips),
 *     so most 16-bit gray images come out nearly white. That is what Pillow gives, hence what
 *     OpenVLA would see.
 *   - Interlaced (Adam7) PNG: as the non-interlaced image.
 *   - JPEG baseline or progressive, any chroma subsampling, 1 (gray), 3 (YCbCr/RGB) or
 *     4 (CMYK/YCCK, Adobe-inverted as Pillow always assumes) components, decoded by
 *     libjpeg(-turbo) with its defaults (ISLOW DCT, fancy upsampling), as Pillow does.
 *     CMYK -> RGB is Pillow's cmyk2rgb: with c, k the bytes as stored (255 = no ink),
 *     R = k - k * (255 - c) / 255, the product rounded as Pillow's MULDIV255 (same for G, B).
 *   - EXIF orientation, ICC profiles and gamma are ignored (Pillow's open+convert ignores them).
 *
 * Errors: every function returns a vh_status and, when err is not NULL, writes a one-line
 * NUL-terminated message into err[0..err_size-1]. Nothing is printed; libpng/libjpeg errors are
 * caught. A truncated file, a CRC error in a critical PNG chunk and corrupt JPEG entropy data
 * (any libjpeg "Corrupt JPEG data"/"Premature end" warning except extraneous bytes before a
 * marker) are errors, where Pillow would sometimes decode a partly grey image.
 */
#ifndef VH_TOOLS_IMAGE_FILE_H
#define VH_TOOLS_IMAGE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "vlahybrid/vlahybrid.h"

/* Largest accepted width or height, and number of pixels. */
#define VH_IMAGE_MAX_SIDE 16384u
#define VH_IMAGE_MAX_PIXELS (1u << 28)

/* Largest file vh_image_load reads. */
#define VH_IMAGE_MAX_FILE_BYTES ((size_t)1 << 30)

/* Decode the PNG or JPEG in data[0..size-1]; the format is told by its first bytes.
 * On success *rgb is a malloc'd width * height * 3 byte buffer (rows packed, R G B per pixel)
 * that the caller frees, and *width, *height are set. On failure *rgb is NULL.
 * Returns VH_OK;
 *   VH_ERR_INVALID_ARGUMENT  an output pointer is NULL, or data is NULL with size > 0;
 *   VH_ERR_UNSUPPORTED       not a PNG or JPEG, a JPEG with 2 or more than 4 components, or
 *                            larger than VH_IMAGE_MAX_SIDE per side / VH_IMAGE_MAX_PIXELS;
 *   VH_ERR_BAD_FRAME         empty, truncated or corrupt data;
 *   VH_ERR_OUT_OF_MEMORY     an allocation failed.
 * Thread-safe. */
vh_status vh_image_decode_memory(const uint8_t *data, size_t size, uint8_t **rgb, uint32_t *width,
                                 uint32_t *height, char *err, size_t err_size);

/* Read the file at `path` and decode it as vh_image_decode_memory does; the message starts
 * with the path. Also returns VH_ERR_IO when the file cannot be opened or read, and
 * VH_ERR_UNSUPPORTED for a file over VH_IMAGE_MAX_FILE_BYTES. Thread-safe. */
vh_status vh_image_load(const char *path, uint8_t **rgb, uint32_t *width, uint32_t *height,
                        char *err, size_t err_size);

#endif
