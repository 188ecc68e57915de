/* JPEG decoding on libjpeg(-turbo), giving the pixels Pillow 9.4's Image.open(f).convert("RGB")
 * gives. Pillow decodes with the library defaults (ISLOW DCT, fancy upsampling) into gray, RGB
 * or CMYK by the number of components, so do we; then gray is copied to R, G, B and CMYK goes
 * through Pillow's conversion.
 *
 * libjpeg reports fatal errors through error_exit, which must not return: ours records the
 * message and longjmps back into decode(). Warnings that mean the entropy-coded data is broken
 * or missing (libjpeg would fill in grey) are made fatal too. Everything that must be freed
 * afterwards lives in the caller-owned jpeg_decoder, so the jump cannot lose it.
 */
#include "jpeg_decoder.h"

#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "image_file.h"

/* A progressive JPEG may hold any number of scans, each a pass over the whole image: a corrupt
 * or hostile file can make decoding take minutes. Real encoders use about 10. */
#define MAX_SCANS 500

typedef struct jpeg_decoder {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr errors;
    struct jpeg_progress_mgr progress;
    jmp_buf jump;
    bool created;       /* cinfo needs jpeg_destroy_decompress */
    vh_status status;   /* of the error that jumped */
    uint8_t *cmyk_row;  /* one row of CMYK samples */
    uint8_t *rgb;       /* the result */
    uint32_t width, height;
    char *message;
    size_t message_size;
} jpeg_decoder;

static _Noreturn void jump_back(jpeg_decoder *d, vh_status status)
{
    d->status = status;
    longjmp(d->jump, 1);
}

/* libjpeg error_exit: keep libjpeg's message, jump back to decode(). */
static void on_jpeg_error(j_common_ptr cinfo)
{
    jpeg_decoder *d = cinfo->client_data;
    char text[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, text);
    snprintf(d->message, d->message_size, "JPEG: %s", text);
    jump_back(d, cinfo->err->msg_code == JERR_OUT_OF_MEMORY ? VH_ERR_OUT_OF_MEMORY
                                                             : VH_ERR_BAD_FRAME);
}

/* Warnings that mean pixels are missing or garbage. Others (extraneous bytes before a marker,
 * an unknown Adobe transform or JFIF version, a bad ICC marker) leave the image intact. */
static bool warning_is_corruption(int code)
{
    switch (code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER:
    case JWRN_HUFF_BAD_CODE:
#if JPEG_LIB_VERSION >= 70 || defined(D_ARITH_CODING_SUPPORTED) /* where jerror.h has it */
    case JWRN_ARITH_BAD_CODE:
#endif
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL:
    case JWRN_BOGUS_PROGRESSION:
        return true;
    default:
        return false;
    }
}

/* libjpeg emit_message: level < 0 is a warning, >= 0 trace output (ignored). */
static void on_jpeg_message(j_common_ptr cinfo, int level)
{
    if (level < 0 && warning_is_corruption(cinfo->err->msg_code))
        on_jpeg_error(cinfo);
}

/* libjpeg output_message: never print. */
static void on_jpeg_output(j_common_ptr cinfo)
{
    (void)cinfo;
}

/* libjpeg progress monitor: stop a file with too many scans. */
static void on_jpeg_progress(j_common_ptr cinfo)
{
    jpeg_decoder *d = cinfo->client_data;
    if (cinfo->is_decompressor && ((j_decompress_ptr)cinfo)->input_scan_number > MAX_SCANS) {
        snprintf(d->message, d->message_size, "JPEG: more than %d scans", MAX_SCANS);
        jump_back(d, VH_ERR_BAD_FRAME);
    }
}

/* 255 * 255 products to 0..255 the way Pillow's MULDIV255 rounds: (t + (t >> 8)) >> 8. */
static inline uint8_t mul_div_255(unsigned a, unsigned b)
{
    unsigned t = a * b + 128;
    return (uint8_t)(((t >> 8) + t) >> 8);
}

/* One row of CMYK as stored (Adobe convention: inverted, 255 = no ink) to RGB. Pillow inverts
 * the samples on reading (rawmode "CMYK;I"), then cmyk2rgb gives
 * R = (255 - K) - (255 - K) * C / 255, with C, K its (inverted) values. */
static void cmyk_row_to_rgb(const uint8_t *cmyk, uint32_t width, uint8_t *rgb)
{
    for (uint32_t x = 0; x < width; x++) {
        unsigned k_inv = cmyk[4 * x + 3]; /* 255 - Pillow's K */
        for (int c = 0; c < 3; c++)
            rgb[3 * x + c] = (uint8_t)(k_inv - mul_div_255(255u - cmyk[4 * x + c], k_inv));
    }
}

/* Spread a row of gray samples, stored at the start of rgb, to R, G, B in place. */
static void gray_row_to_rgb_in_place(uint8_t *rgb, uint32_t width)
{
    for (uint32_t x = width; x-- > 0;) {
        uint8_t v = rgb[x];
        rgb[3 * x + 0] = rgb[3 * x + 1] = rgb[3 * x + 2] = v;
    }
}

/* The libjpeg part; returns with d->rgb filled, or a status and d->message. */
static vh_status decode(jpeg_decoder *d, const uint8_t *data, size_t size)
{
    d->cinfo.err = jpeg_std_error(&d->errors);
    d->errors.error_exit = on_jpeg_error;
    d->errors.emit_message = on_jpeg_message;
    d->errors.output_message = on_jpeg_output;
    d->cinfo.client_data = d; /* kept by jpeg_create_decompress */
    if (setjmp(d->jump))
        return d->status;

    jpeg_create_decompress(&d->cinfo);
    d->created = true;
    d->progress.progress_monitor = on_jpeg_progress;
    d->cinfo.progress = &d->progress;
    jpeg_mem_src(&d->cinfo, data, (unsigned long)size);
    jpeg_read_header(&d->cinfo, TRUE);

    uint32_t width = d->cinfo.image_width, height = d->cinfo.image_height;
    if (width > VH_IMAGE_MAX_SIDE || height > VH_IMAGE_MAX_SIDE ||
        (uint64_t)width * height > VH_IMAGE_MAX_PIXELS) {
        snprintf(d->message, d->message_size, "JPEG: image %ux%u is larger than %ux%u or %u pixels",
                 width, height, VH_IMAGE_MAX_SIDE, VH_IMAGE_MAX_SIDE, VH_IMAGE_MAX_PIXELS);
        return VH_ERR_UNSUPPORTED;
    }
    int components = d->cinfo.num_components;
    switch (components) { /* Pillow's modes "L", "RGB", "CMYK" */
    case 1:
        d->cinfo.out_color_space = JCS_GRAYSCALE;
        break;
    case 3:
        d->cinfo.out_color_space = JCS_RGB;
        break;
    case 4:
        d->cinfo.out_color_space = JCS_CMYK;
        break;
    default:
        snprintf(d->message, d->message_size, "JPEG: %d components (only 1, 3 or 4 are supported)",
                 components);
        return VH_ERR_UNSUPPORTED;
    }

    jpeg_start_decompress(&d->cinfo);
    if (d->cinfo.output_width != width || d->cinfo.output_height != height ||
        d->cinfo.output_components != components) {
        snprintf(d->message, d->message_size, "JPEG: unexpected output layout");
        return VH_ERR_INTERNAL;
    }
    size_t row_bytes = (size_t)width * 3;
    if (!(d->rgb = malloc(row_bytes * height)) ||
        (components == 4 && !(d->cmyk_row = malloc((size_t)width * 4)))) {
        snprintf(d->message, d->message_size, "JPEG: out of memory for the pixels");
        return VH_ERR_OUT_OF_MEMORY;
    }
    while (d->cinfo.output_scanline < height) {
        uint8_t *out = d->rgb + (size_t)d->cinfo.output_scanline * row_bytes;
        JSAMPROW row = components == 4 ? d->cmyk_row : out;
        if (jpeg_read_scanlines(&d->cinfo, &row, 1) != 1) { /* cannot happen with a memory source */
            snprintf(d->message, d->message_size, "JPEG: decoder stalled");
            return VH_ERR_BAD_FRAME;
        }
        if (components == 1)
            gray_row_to_rgb_in_place(out, width);
        else if (components == 4)
            cmyk_row_to_rgb(d->cmyk_row, width, out);
    }
    jpeg_finish_decompress(&d->cinfo); /* reads on to EOI: a missing end is an error */
    d->width = width;
    d->height = height;
    return VH_OK;
}

vh_status vh_jpeg_decode(const uint8_t *data, size_t size, uint8_t **rgb, uint32_t *width,
                         uint32_t *height, char *message, size_t message_size)
{
    jpeg_decoder *d = calloc(1, sizeof *d); /* jmp_buf and libjpeg state: keep them off the stack */
    if (!d) {
        snprintf(message, message_size, "JPEG: out of memory creating the decoder");
        return VH_ERR_OUT_OF_MEMORY;
    }
    d->message = message;
    d->message_size = message_size;
    vh_status status = decode(d, data, size);
    if (d->created)
        jpeg_destroy_decompress(&d->cinfo);
    free(d->cmyk_row);
    if (status == VH_OK) {
        *rgb = d->rgb;
        *width = d->width;
        *height = d->height;
    } else {
        free(d->rgb);
    }
    free(d);
    return status;
}
