#include "session/frame_copy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"

static int all_finite(const float *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

static vh_status check_image(const char *what, const uint8_t *rgb, uint32_t width, uint32_t height, size_t stride,
                             vh_error *err)
{
    if (!rgb) return vh_error_set(err, VH_ERR_BAD_FRAME, "%s is NULL", what);
    if (width == 0 || height == 0 || width > VH_MAX_IMAGE_SIDE || height > VH_MAX_IMAGE_SIDE)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "frame size must be 1..16384 pixels a side%s", "");
    if ((stride ? stride : (size_t)width * 3) < (size_t)width * 3)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "frame stride is smaller than width * 3%s", "");
    return VH_OK;
}

/* A float array given with its count: both or neither, finite values. */
static vh_status check_floats(const char *what, const float *v, size_t n, vh_error *err)
{
    if (!v) return VH_OK;
    if (!all_finite(v, n)) return vh_error_set(err, VH_ERR_BAD_FRAME, "%s holds a value that is not finite", what);
    return VH_OK;
}

vh_status vh_frame_check_structure(const vh_frame *f, vh_error *err)
{
    vh_status st;
    if (f->deadline_ns < 0) return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "%s is negative", "frame->deadline_ns");
    if (f->rgb && (st = check_image("frame->rgb", f->rgb, f->width, f->height, f->stride, err))) return st;
    if (f->instruction && strnlen(f->instruction, VH_MAX_INSTRUCTION_BYTES + 1) > VH_MAX_INSTRUCTION_BYTES)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "the instruction is longer than %s bytes", "8192");
    if (f->n_cameras > VH_MAX_CAMERAS || (f->n_cameras && !f->cameras))
        return vh_error_set(err, VH_ERR_BAD_FRAME, "frame->n_cameras is %u (at most %u, with frame->cameras set)",
                            f->n_cameras, VH_MAX_CAMERAS);
    for (uint32_t c = 0; c < f->n_cameras; c++)
        if ((st = check_image("frame->cameras[].rgb", f->cameras[c].rgb, f->cameras[c].width, f->cameras[c].height,
                              f->cameras[c].stride, err)))
            return st;
    if (!f->n_cameras && (f->lidar2img || f->intrinsics || f->extrinsics))
        return vh_error_set(err, VH_ERR_BAD_FRAME, "%s", "camera matrices given without cameras (frame->n_cameras is 0)");
    if ((st = check_floats("frame->lidar2img", f->lidar2img, (size_t)f->n_cameras * 16, err)) ||
        (st = check_floats("frame->intrinsics", f->intrinsics, (size_t)f->n_cameras * 16, err)) ||
        (st = check_floats("frame->extrinsics", f->extrinsics, (size_t)f->n_cameras * 16, err)) ||
        (st = check_floats("frame->ego_pose", f->ego_pose, 16, err)) ||
        (st = check_floats("frame->can_bus", f->can_bus, VH_CAN_BUS_FLOATS, err)))
        return st;
    if (f->command < VH_COMMAND_NONE || f->command > 5)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "frame->command is %d; a command is 0..5 (RoadOption - 1) or "
                            "VH_COMMAND_NONE (-1)", f->command);
    const uint64_t token_floats = (uint64_t)f->n_vision_tokens * f->vision_token_width;
    if ((f->vision_tokens != NULL) != (token_floats != 0) || token_floats > VH_MAX_VISION_TOKEN_FLOATS)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "frame->vision_tokens: %u tokens of width %u%s", f->n_vision_tokens,
                            f->vision_token_width, f->vision_tokens ? " (too many, or a zero count)" : " but no data");
    if ((st = check_floats("frame->vision_tokens", f->vision_tokens, (size_t)token_floats, err))) return st;
    if ((f->noise != NULL) != (f->n_noise != 0) || f->n_noise > VH_MAX_NOISE_FLOATS)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "frame->noise: %u floats%s", f->n_noise,
                            f->noise ? " (a zero count, or more than 4096)" : " but no data");
    return check_floats("frame->noise", f->noise, f->n_noise, err);
}

/* Room for n items of `size` bytes at *offset of one block, 64-byte aligned. */
static size_t reserve(size_t *offset, size_t n, size_t size)
{
    size_t at = (*offset + 63) & ~(size_t)63;
    *offset = at + n * size;
    return at;
}

vh_frame_record *vh_frame_copy(const vh_frame *f)
{
    vh_frame_record *rec = calloc(1, sizeof *rec);
    if (!rec) return NULL;
    vh_action_init(&rec->result);
    rec->result.submitted_ns = vh_now_ns();
    if (f->rgb) { /* the pixels, rows tightly packed */
        const size_t row_bytes = (size_t)f->width * 3, stride = f->stride ? f->stride : row_bytes;
        rec->width = f->width;
        rec->height = f->height;
        if (!(rec->rgb = malloc(row_bytes * f->height))) goto oom;
        for (uint32_t y = 0; y < f->height; y++) memcpy(rec->rgb + y * row_bytes, f->rgb + y * stride, row_bytes);
    }
    if (f->instruction && !(rec->instruction = strdup(f->instruction))) goto oom;
    if (f->unnorm_key && !(rec->unnorm_key = strdup(f->unnorm_key))) goto oom;

    /* the driving fields, in one block */
    vh_frame_input *d = &rec->driving;
    const size_t n_mat = (size_t)f->n_cameras * 16, n_tok = (size_t)f->n_vision_tokens * f->vision_token_width;
    size_t size = 0, at_cam = reserve(&size, f->n_cameras, sizeof(vh_camera_image)), at_pix[VH_MAX_CAMERAS];
    for (uint32_t c = 0; c < f->n_cameras; c++) at_pix[c] = reserve(&size, (size_t)f->cameras[c].width * 3, f->cameras[c].height);
    const size_t at_l2i = reserve(&size, f->lidar2img ? n_mat : 0, 4), at_in = reserve(&size, f->intrinsics ? n_mat : 0, 4),
                 at_ex = reserve(&size, f->extrinsics ? n_mat : 0, 4), at_pose = reserve(&size, f->ego_pose ? 16 : 0, 4),
                 at_can = reserve(&size, f->can_bus ? VH_CAN_BUS_FLOATS : 0, 4), at_tok = reserve(&size, n_tok, 4),
                 at_noise = reserve(&size, f->n_noise, 4);
    char *block = size ? malloc(size) : NULL;
    if (size && !block) goto oom;
    rec->owned = block;
    d->command = f->command;
    d->command_timestamp_ns = f->command_timestamp_ns;
    d->timestamp_ns = f->timestamp_ns;
    d->stream = f->stream;
    if (f->n_cameras) {
        vh_camera_image *cams = (vh_camera_image *)(block + at_cam);
        for (uint32_t c = 0; c < f->n_cameras; c++) {
            const vh_camera_image *src = &f->cameras[c];
            const size_t row_bytes = (size_t)src->width * 3, stride = src->stride ? src->stride : row_bytes;
            uint8_t *pix = (uint8_t *)block + at_pix[c];
            for (uint32_t y = 0; y < src->height; y++) memcpy(pix + y * row_bytes, src->rgb + y * stride, row_bytes);
            cams[c] = (vh_camera_image){.rgb = pix, .width = src->width, .height = src->height, .stride = row_bytes,
                                        .name = NULL}; /* names are the caller's: not kept */
        }
        d->cameras = cams;
        d->n_cameras = f->n_cameras;
    }
#define COPY_FLOATS(field, at, n)                                               \
    if (f->field) {                                                             \
        memcpy(block + (at), f->field, sizeof(float) * (n));                    \
        d->field = (const float *)(block + (at));                               \
    }
    COPY_FLOATS(lidar2img, at_l2i, n_mat)
    COPY_FLOATS(intrinsics, at_in, n_mat)
    COPY_FLOATS(extrinsics, at_ex, n_mat)
    COPY_FLOATS(ego_pose, at_pose, 16)
    COPY_FLOATS(can_bus, at_can, VH_CAN_BUS_FLOATS)
    COPY_FLOATS(vision_tokens, at_tok, n_tok)
    COPY_FLOATS(noise, at_noise, f->n_noise)
#undef COPY_FLOATS
    d->n_vision_tokens = f->n_vision_tokens;
    d->vision_token_width = f->vision_token_width;
    d->n_noise = f->n_noise;
    return rec;
oom:
    vh_frame_record_free(rec);
    return NULL;
}
