/* PNG decoding on libpng, giving the pixels Pillow 9.4's Image.open(f).convert("RGB") gives.
 *
 * libpng is asked only for unpacked samples (one byte per sample below 8 bits), 16-bit samples
 * cut to their high byte (except 16-bit gray, which Pillow clips instead) and alpha dropped;
 * the conversion to RGB (gray scaling, palette lookup) is done here, because Pillow's rules
 * differ from libpng's expansions (e.g. for palette indices past the end of PLTE).
 *
 * libpng reports errors by calling our handler, which must not return: it records the message
 * and longjmps back into vh_png_decode's setjmp. Everything that must be freed afterwards lives
 * in a png_decoder owned by the caller of decode(), so the jump cannot lose it.
 */
#include "png_decoder.h"

#include <png.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image_file.h"

typedef struct png_decoder {
    const uint8_t *data; /* the whole file */
    size_t size;
    size_t offset;       /* next byte libpng reads */
    png_structp png;
    png_infop info;
    uint8_t *samples;    /* libpng's rows, when they still need converting to RGB */
    png_bytep *rows;     /* [height] pointers into samples or rgb */
    uint8_t *rgb;        /* the result */
    uint32_t width, height;
    char *message;
    size_t message_size;
} png_decoder;

/* libpng error callback: keep the message and jump back to decode(). */
static void on_png_error(png_structp png, png_const_charp text)
{
    png_decoder *d = png_get_error_ptr(png);
    snprintf(d->message, d->message_size, "PNG: %s", text);
    png_longjmp(png, 1);
}

/* libpng warning callback: silent (benign problems, e.g. a bad ancillary chunk CRC). */
static void on_png_warning(png_structp png, png_const_charp text)
{
    (void)png;
    (void)text;
}

/* libpng read callback: serve bytes from memory; running out means the file is truncated. */
static void read_from_memory(png_structp png, png_bytep out, size_t n)
{
    png_decoder *d = png_get_io_ptr(png);
    if (n > d->size - d->offset)
        png_error(png, "file is truncated");
    memcpy(out, d->data + d->offset, n);
    d->offset += n;
}

static vh_status fail(png_decoder *d, vh_status status, const char *text)
{
    snprintf(d->message, d->message_size, "PNG: %s", text);
    return status;
}

/* Status for a message libpng raised. */
static vh_status status_of_png_error(const char *message)
{
    return strstr(message, "memory") ? VH_ERR_OUT_OF_MEMORY : VH_ERR_BAD_FRAME;
}

/* Gray samples of 1, 2, 4 or 8 bits (one per byte) or 16 bits (big-endian) to RGB. */
static void gray_to_rgb(const uint8_t *samples, int bit_depth, size_t n_pixels, uint8_t *rgb)
{
    for (size_t i = 0; i < n_pixels; i++) {
        unsigned v;
        if (bit_depth == 16) {
            v = (unsigned)samples[2 * i] << 8 | samples[2 * i + 1];
            v = v > 255 ? 255 : v; /* Pillow: mode "I" -> "RGB" clips */
        } else {
            v = samples[i] * (255u / ((1u << bit_depth) - 1)); /* x255, x85, x17, x1 */
        }
        rgb[3 * i + 0] = rgb[3 * i + 1] = rgb[3 * i + 2] = (uint8_t)v;
    }
}

/* Palette indices (one per byte) to RGB. Entries past PLTE are gray (i, i, i): Pillow's
 * palette starts as a gray ramp and PLTE overwrites its first entries. */
static void palette_to_rgb(const uint8_t *indices, const png_color *plte, int n_plte,
                           size_t n_pixels, uint8_t *rgb)
{
    uint8_t table[256][3];
    for (int i = 0; i < 256; i++) {
        bool listed = i < n_plte;
        table[i][0] = listed ? plte[i].red : (uint8_t)i;
        table[i][1] = listed ? plte[i].green : (uint8_t)i;
        table[i][2] = listed ? plte[i].blue : (uint8_t)i;
    }
    for (size_t i = 0; i < n_pixels; i++)
        memcpy(rgb + 3 * i, table[indices[i]], 3);
}

/* The libpng part; returns with d->rgb filled, or a status and d->message. */
static vh_status decode(png_decoder *d)
{
    d->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, d, on_png_error, on_png_warning);
    if (!d->png || !(d->info = png_create_info_struct(d->png)))
        return fail(d, VH_ERR_OUT_OF_MEMORY, "out of memory creating the decoder");
    if (setjmp(png_jmpbuf(d->png)))
        return status_of_png_error(d->message);

    png_set_read_fn(d->png, d, read_from_memory);
    /* libpng's own size limit (1e6) would report oversize images as errors; we check below. */
    png_set_user_limits(d->png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    png_read_info(d->png, d->info);

    png_uint_32 width, height;
    int bit_depth, color_type;
    png_get_IHDR(d->png, d->info, &width, &height, &bit_depth, &color_type, NULL, NULL, NULL);
    if (width > VH_IMAGE_MAX_SIDE || height > VH_IMAGE_MAX_SIDE ||
        (uint64_t)width * height > VH_IMAGE_MAX_PIXELS) {
        snprintf(d->message, d->message_size, "PNG: image %ux%u is larger than %ux%u or %u pixels",
                 (unsigned)width, (unsigned)height, VH_IMAGE_MAX_SIDE, VH_IMAGE_MAX_SIDE,
                 VH_IMAGE_MAX_PIXELS);
        return VH_ERR_UNSUPPORTED;
    }

    bool is_palette = color_type & PNG_COLOR_MASK_PALETTE;
    bool is_rgb = (color_type & PNG_COLOR_MASK_COLOR) && !is_palette;
    /* Pillow clips 16-bit gray (mode "I") but keeps the high byte of 16-bit gray+alpha. */
    bool is_gray16 = color_type == PNG_COLOR_TYPE_GRAY && bit_depth == 16;
    if (bit_depth < 8)
        png_set_packing(d->png);
    if (bit_depth == 16 && !is_gray16)
        png_set_strip_16(d->png); /* Pillow keeps the high byte */
    if (color_type & PNG_COLOR_MASK_ALPHA)
        png_set_strip_alpha(d->png);
    png_set_interlace_handling(d->png);
    png_read_update_info(d->png, d->info);

    /* Bytes per pixel as libpng now delivers them: RGB, 16-bit gray, or one gray/index byte. */
    size_t pixel_bytes = is_rgb ? 3 : is_gray16 ? 2 : 1;
    size_t n_pixels = (size_t)width * height; /* <= 2^28 */
    size_t row_bytes = (size_t)width * pixel_bytes;
    if (png_get_rowbytes(d->png, d->info) != row_bytes)
        return fail(d, VH_ERR_INTERNAL, "unexpected row size after transformations");

    if (!(d->rgb = malloc(n_pixels * 3)) || !(d->rows = malloc(height * sizeof *d->rows)))
        return fail(d, VH_ERR_OUT_OF_MEMORY, "out of memory for the pixels");
    uint8_t *target = d->rgb;
    if (!is_rgb) {
        if (!(d->samples = malloc(n_pixels * pixel_bytes)))
            return fail(d, VH_ERR_OUT_OF_MEMORY, "out of memory for the samples");
        target = d->samples;
    }
    for (png_uint_32 y = 0; y < height; y++)
        d->rows[y] = target + (size_t)y * row_bytes;
    png_read_image(d->png, d->rows); /* all Adam7 passes when interlaced */
    png_read_end(d->png, NULL);      /* the chunks up to IEND: catches truncation there too */

    if (is_palette) {
        png_colorp plte = NULL;
        int n_plte = 0;
        if (!png_get_PLTE(d->png, d->info, &plte, &n_plte))
            return fail(d, VH_ERR_BAD_FRAME, "palette image without PLTE");
        palette_to_rgb(d->samples, plte, n_plte, n_pixels, d->rgb);
    } else if (!is_rgb) {
        gray_to_rgb(d->samples, is_gray16 || bit_depth < 8 ? bit_depth : 8, n_pixels, d->rgb);
    }
    d->width = width;
    d->height = height;
    return VH_OK;
}

vh_status vh_png_decode(const uint8_t *data, size_t size, uint8_t **rgb, uint32_t *width,
                        uint32_t *height, char *message, size_t message_size)
{
    png_decoder d = {.data = data, .size = size, .message = message, .message_size = message_size};
    vh_status status = decode(&d);
    if (d.png)
        png_destroy_read_struct(&d.png, d.info ? &d.info : NULL, NULL);
    free(d.rows);
    free(d.samples);
    if (status != VH_OK) {
        free(d.rgb);
        return status;
    }
    *rgb = d.rgb;
    *width = d.width;
    *height = d.height;
    return VH_OK;
}
