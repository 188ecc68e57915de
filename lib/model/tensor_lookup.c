#include "model/tensor_lookup.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int to_vh_dtype(vh_st_dtype st, vh_dtype *out)
{
    switch (st) {
    case VH_ST_F32: *out = VH_DTYPE_F32; return 1;
    case VH_ST_F16: *out = VH_DTYPE_F16; return 1;
    case VH_ST_BF16: *out = VH_DTYPE_BF16; return 1;
    default: return 0;
    }
}

static void format_shape(char *buf, size_t size, uint32_t ndim, const int64_t *shape)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (uint32_t i = 0; i < ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
}

vh_status vh_tensor_take(const vh_checkpoint *ck, vh_tensor_view *view, int optional, const char *name,
                         vh_tensor_shape shape, vh_error *err)
{
    memset(view, 0, sizeof *view);
    vh_st_file *file = NULL;
    const vh_st_tensor *t = vh_checkpoint_find(ck, name, &file);
    if (!t) {
        if (optional) return VH_OK;
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: tensor '%s' is missing from the checkpoint",
                            vh_checkpoint_dir(ck), name);
    }
    const char *file_name = vh_st_path(file);
    vh_dtype dtype;
    if (!to_vh_dtype(t->dtype, &dtype)) {
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: tensor '%s' has dtype %s; expected F32, F16 or BF16",
                            file_name, name, vh_st_dtype_name(t->dtype));
    }
    int ok = t->ndim == shape.ndim;
    for (uint32_t i = 0; ok && i < shape.ndim; i++)
        ok = shape.dims[i] < 0 ? t->shape[i] > 0 && t->shape[i] < (1ull << 40) : t->shape[i] == (uint64_t)shape.dims[i];
    if (!ok) {
        char want[128], got[128];
        int64_t got_dims[8];
        uint32_t got_ndim = t->ndim < 8 ? t->ndim : 8;
        for (uint32_t i = 0; i < got_ndim; i++) got_dims[i] = (int64_t)t->shape[i];
        format_shape(want, sizeof want, shape.ndim, shape.dims);
        format_shape(got, sizeof got, got_ndim, got_dims);
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: tensor '%s' has shape %s; the config implies %s",
                            file_name, name, got, want);
    }
    const void *data = NULL;
    vh_status st = vh_st_data(file, t, &data, err);
    if (st) return st;
    view->data = data;
    view->dtype = dtype;
    view->ndim = shape.ndim;
    for (uint32_t i = 0; i < shape.ndim; i++) view->shape[i] = (int64_t)t->shape[i];
    view->name = t->name;
    return VH_OK;
}

vh_status vh_tensor_takef(const vh_checkpoint *ck, vh_tensor_view *view, int optional, vh_tensor_shape shape,
                          vh_error *err, const char *fmt, ...)
{
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return vh_tensor_take(ck, view, optional, name, shape, err);
}
