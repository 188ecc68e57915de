/*
 * Checked tensor lookup for families building their block lists: a tensor of the checkpoint by
 * name, with its dtype (F32, F16, BF16) and exact shape checked against what the config implies,
 * as a view into the memory map. Messages name the file, the tensor, and both shapes.
 */
#ifndef VH_MODEL_TENSOR_LOOKUP_H
#define VH_MODEL_TENSOR_LOOKUP_H

#include "model/checkpoint.h"
#include "vlahybrid/backend.h"

typedef struct vh_tensor_shape {
    uint32_t ndim;
    int64_t dims[4];
} vh_tensor_shape;

#define VH_SHAPE(...) \
    ((vh_tensor_shape){(uint32_t)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}})

/* Look `name` up and fill `view`; a negative dimension of `shape` matches any (the model reads it). Absent and optional: view->data = NULL, VH_OK. */
vh_status vh_tensor_take(const vh_checkpoint *ck, vh_tensor_view *view, int optional, const char *name,
                         vh_tensor_shape shape, vh_error *err);

/* The same with a printf-formatted name. */
vh_status vh_tensor_takef(const vh_checkpoint *ck, vh_tensor_view *view, int optional, vh_tensor_shape shape,
                          vh_error *err, const char *fmt, ...) VH_PRINTF(6, 7);

#endif
