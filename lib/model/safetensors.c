/* Strict safetensors reader: validate everything at open, then hand out views of the mapping. */
#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_LENGTH_BYTES 8 /* the u64 before the JSON */
#define ALIGNED_COPY_ALIGNMENT 64

typedef struct dtype_info {
    const char *name;
    uint32_t bits;
} dtype_info;

static const dtype_info dtype_table[VH_ST_DTYPE_COUNT] = {
    [VH_ST_BOOL] = {"BOOL", 8},
    [VH_ST_U8] = {"U8", 8},
    [VH_ST_I8] = {"I8", 8},
    [VH_ST_F8_E5M2] = {"F8_E5M2", 8},
    [VH_ST_F8_E4M3] = {"F8_E4M3", 8},
    [VH_ST_F8_E8M0] = {"F8_E8M0", 8},
    [VH_ST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8},
    [VH_ST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
    [VH_ST_F4] = {"F4", 4},
    [VH_ST_F6_E2M3] = {"F6_E2M3", 6},
    [VH_ST_F6_E3M2] = {"F6_E3M2", 6},
    [VH_ST_I16] = {"I16", 16},
    [VH_ST_U16] = {"U16", 16},
    [VH_ST_F16] = {"F16", 16},
    [VH_ST_BF16] = {"BF16", 16},
    [VH_ST_I32] = {"I32", 32},
    [VH_ST_U32] = {"U32", 32},
    [VH_ST_F32] = {"F32", 32},
    [VH_ST_C64] = {"C64", 64},
    [VH_ST_F64] = {"F64", 64},
    [VH_ST_I64] = {"I64", 64},
    [VH_ST_U64] = {"U64", 64},
};

typedef struct metadata_entry {
    const char *key;
    const char *value;
} metadata_entry;

struct vh_st_file {
    char *path;                    /* for messages */
    const uint8_t *bytes;          /* the whole file */
    size_t size;
    bool mapped;                   /* bytes is our mmap (munmap at close), else the caller's */
    const uint8_t *data;           /* the byte buffer, after the header */
    uint64_t data_size;
    vh_st_tensor *tensors;         /* [n_tensors], by increasing offset */
    const vh_st_tensor **by_name;  /* [n_tensors], sorted by strcmp of name */
    uint32_t n_tensors;
    metadata_entry *metadata;      /* [n_metadata], sorted by key */
    uint32_t n_metadata;
    char *strings;                 /* names, metadata keys and values, one allocation */
    pthread_mutex_t copies_lock;   /* guards aligned_copies */
    void **aligned_copies;         /* [n_tensors] or NULL: aligned copies of misaligned tensors */
};

/* Handed out for zero-byte tensors: non-NULL, aligned, never read. */
static const uint64_t empty_tensor_data[1];

const char *vh_st_dtype_name(vh_st_dtype dtype)
{
    return (unsigned)dtype < VH_ST_DTYPE_COUNT ? dtype_table[dtype].name : "?";
}

bool vh_st_dtype_from_name(const char *name, vh_st_dtype *dtype)
{
    for (int i = 0; i < VH_ST_DTYPE_COUNT; i++) {
        if (strcmp(name, dtype_table[i].name) == 0) {
            *dtype = (vh_st_dtype)i;
            return true;
        }
    }
    return false;
}

uint32_t vh_st_dtype_bits(vh_st_dtype dtype)
{
    return (unsigned)dtype < VH_ST_DTYPE_COUNT ? dtype_table[dtype].bits : 0;
}

size_t vh_st_dtype_size(vh_st_dtype dtype)
{
    uint32_t bits = vh_st_dtype_bits(dtype);
    return bits % 8 == 0 ? bits / 8 : 0;
}

/* The alignment vh_st_data guarantees: the element size rounded up to whole bytes (1..8). */
static size_t dtype_alignment(vh_st_dtype dtype)
{
    size_t bytes = (vh_st_dtype_bits(dtype) + 7) / 8;
    return bytes ? bytes : 1;
}

/* ------------------------------------------------------------------------------------------------
 * Header validation helpers.
 */

/* Index of the first byte that is not part of well-formed UTF-8 (no overlong forms, no
 * surrogates, nothing above U+10FFFF), or n if all of s is well-formed. */
static size_t utf8_first_invalid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len;
        uint8_t lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xc2 && c <= 0xdf) len = 2;
        else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            if (c == 0xe0) lo = 0xa0;       /* overlong */
            if (c == 0xed) hi = 0x9f;       /* surrogates */
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            if (c == 0xf0) lo = 0x90;       /* overlong */
            if (c == 0xf4) hi = 0x8f;       /* above U+10FFFF */
        } else return i;
        if (n - i < len) return i;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xc0) != 0x80) return i;
        i += len;
    }
    return n;
}

/* How a JSON value reads in a message: "a string", "a negative integer", ... */
static const char *json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return json_integer_value(v) < 0 ? "a negative integer" : "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "an unknown JSON value";
}

/* An exact non-negative JSON integer (reals such as 4.0 are refused). Jansson itself refuses
 * integers above INT64_MAX at parse time. */
static bool json_to_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* "[2, 3, 4]" into buf (truncated to size). */
static const char *format_shape(const vh_st_tensor *t, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "[");
    for (uint32_t i = 0; i < t->ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%llu", i ? ", " : "",
                                 (unsigned long long)t->shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}

/* Check one tensor entry {"dtype", "shape", "data_offsets"} and fill t (name excepted). */
static vh_status parse_tensor_entry(const char *file, const char *name, json_t *entry,
                                    vh_st_tensor *t, vh_error *err)
{
    if (!json_is_object(entry))
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: tensor '%s' is %s, not an object {dtype, shape, data_offsets}",
                            file, name, json_kind(entry));
    json_t *dtype = NULL, *shape = NULL, *offsets = NULL;
    for (void *it = json_object_iter(entry); it; it = json_object_iter_next(entry, it)) {
        const char *field = json_object_iter_key(it);
        json_t *value = json_object_iter_value(it);
        if (strcmp(field, "dtype") == 0) dtype = value;
        else if (strcmp(field, "shape") == 0) shape = value;
        else if (strcmp(field, "data_offsets") == 0) offsets = value;
        else
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: tensor '%s' has an unexpected field '%s' (only dtype, shape "
                                "and data_offsets are allowed)", file, name, field);
    }
    const char *missing = !dtype ? "dtype" : !shape ? "shape" : !offsets ? "data_offsets" : NULL;
    if (missing)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: tensor '%s' lacks the field '%s'",
                            file, name, missing);

    if (!json_is_string(dtype))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: tensor '%s': dtype is %s, not a string",
                            file, name, json_kind(dtype));
    if (!vh_st_dtype_from_name(json_string_value(dtype), &t->dtype))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: tensor '%s' has an unknown dtype '%s'",
                            file, name, json_string_value(dtype));

    if (!json_is_array(shape))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: tensor '%s': shape is %s, not an array",
                            file, name, json_kind(shape));
    size_t ndim = json_array_size(shape);
    if (ndim > VH_ST_MAX_DIMS)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: tensor '%s' has %zu dimensions; at most %d are supported",
                            file, name, ndim, VH_ST_MAX_DIMS);
    t->ndim = (uint32_t)ndim;
    uint64_t nelements = 1;
    for (size_t i = 0; i < ndim; i++) {
        json_t *v = json_array_get(shape, i);
        if (!json_to_u64(v, &t->shape[i]))
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: tensor '%s': shape[%zu] is %s, not a non-negative integer",
                                file, name, i, json_kind(v));
        if (__builtin_mul_overflow(nelements, t->shape[i], &nelements))
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: tensor '%s': the element count of its shape overflows 64 bits",
                                file, name);
    }
    t->nelements = nelements;

    char shape_text[160];
    uint64_t nbits;
    if (__builtin_mul_overflow(nelements, (uint64_t)vh_st_dtype_bits(t->dtype), &nbits))
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: tensor '%s': the byte size of %s %s overflows 64 bits", file,
                            name, vh_st_dtype_name(t->dtype),
                            format_shape(t, shape_text, sizeof shape_text));
    if (nbits % 8 != 0)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: tensor '%s': %s %s is %llu bits, not a whole number of bytes",
                            file, name, vh_st_dtype_name(t->dtype),
                            format_shape(t, shape_text, sizeof shape_text),
                            (unsigned long long)nbits);
    uint64_t nbytes = nbits / 8;

    uint64_t begin, end;
    if (!json_is_array(offsets) || json_array_size(offsets) != 2)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: tensor '%s': data_offsets is %s, not an array [begin, end]",
                            file, name, json_kind(offsets));
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_array_get(offsets, i);
        if (!json_to_u64(v, i == 0 ? &begin : &end))
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: tensor '%s': data_offsets[%zu] is %s, not a non-negative "
                                "integer", file, name, i, json_kind(v));
    }
    if (begin > end)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: tensor '%s': data_offsets [%llu, %llu) begin after they end",
                            file, name, (unsigned long long)begin, (unsigned long long)end);
    if (end - begin != nbytes)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: tensor '%s': %s %s needs %llu bytes, but data_offsets [%llu, "
                            "%llu) hold %llu", file, name, vh_st_dtype_name(t->dtype),
                            format_shape(t, shape_text, sizeof shape_text),
                            (unsigned long long)nbytes, (unsigned long long)begin,
                            (unsigned long long)end, (unsigned long long)(end - begin));
    t->offset = begin;
    t->nbytes = nbytes;
    return VH_OK;
}

/* Check "__metadata__": an object whose values are all strings. Adds the bytes its keys and
 * values need (with their NULs) to *string_bytes. */
static vh_status check_metadata(const char *file, json_t *metadata, size_t *string_bytes,
                                vh_error *err)
{
    if (!json_is_object(metadata))
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: __metadata__ is %s, not an object",
                            file, json_kind(metadata));
    for (void *it = json_object_iter(metadata); it; it = json_object_iter_next(metadata, it)) {
        json_t *value = json_object_iter_value(it);
        if (!json_is_string(value))
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: __metadata__ value of '%s' is %s; values must be strings",
                                file, json_object_iter_key(it), json_kind(value));
        size_t bytes = json_object_iter_key_len(it) + json_string_length(value) + 2;
        if (__builtin_add_overflow(*string_bytes, bytes, string_bytes))
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: header strings overflow", file);
    }
    return VH_OK;
}

static char *copy_string(char **cursor, const char *s, size_t len)
{
    char *dst = *cursor;
    memcpy(dst, s, len);
    dst[len] = '\0';
    *cursor += len + 1;
    return dst;
}

static int compare_by_offset(const void *a, const void *b)
{
    const vh_st_tensor *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int compare_by_name(const void *a, const void *b)
{
    const vh_st_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static int compare_metadata(const void *a, const void *b)
{
    const metadata_entry *x = a, *y = b;
    return strcmp(x->key, y->key);
}

/* With tensors sorted by offset: they must tile the byte buffer [0, data_size) exactly. */
static vh_status check_coverage(const vh_st_file *f, vh_error *err)
{
    uint64_t covered = 0; /* every byte before this one belongs to exactly one tensor */
    for (uint32_t i = 0; i < f->n_tensors; i++) {
        const vh_st_tensor *t = &f->tensors[i], *prev = i ? &f->tensors[i - 1] : NULL;
        unsigned long long begin = t->offset, end = t->offset + t->nbytes;
        if (t->offset != covered && !prev)
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: the first tensor '%s' starts at byte %llu of the byte buffer, "
                                "not at 0: bytes [0, %llu) belong to no tensor", f->path, t->name,
                                begin, begin);
        if (t->offset < covered)
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: tensor '%s' bytes [%llu, %llu) overlap tensor '%s' [%llu, "
                                "%llu)", f->path, t->name, begin, end, prev->name,
                                (unsigned long long)prev->offset,
                                (unsigned long long)(prev->offset + prev->nbytes));
        if (t->offset > covered)
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: bytes [%llu, %llu) between tensor '%s' and tensor '%s' belong "
                                "to no tensor", f->path, (unsigned long long)covered, begin,
                                prev->name, t->name);
        if (end > f->data_size)
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: tensor '%s' bytes [%llu, %llu) run past the end of the byte "
                                "buffer (%llu bytes; the file is truncated?)", f->path, t->name,
                                begin, end, (unsigned long long)f->data_size);
        covered = end;
    }
    if (covered != f->data_size)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: %llu trailing bytes after the last tensor: the tensors cover "
                            "[0, %llu) of a %llu-byte buffer", f->path,
                            (unsigned long long)(f->data_size - covered),
                            (unsigned long long)covered, (unsigned long long)f->data_size);
    return VH_OK;
}

/* Fill f's tables from the parsed header object. */
static vh_status load_entries(vh_st_file *f, json_t *root, vh_error *err)
{
    const char *file = f->path;
    json_t *metadata = json_object_get(root, "__metadata__");
    size_t string_bytes = 0;
    vh_status status = metadata ? check_metadata(file, metadata, &string_bytes, err) : VH_OK;
    if (status != VH_OK) return status;

    size_t n_tensors = json_object_size(root) - (metadata ? 1 : 0);
    if (n_tensors > VH_ST_MAX_TENSORS)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %zu tensors; at most %u are supported",
                            file, n_tensors, VH_ST_MAX_TENSORS);
    for (void *it = json_object_iter(root); it; it = json_object_iter_next(root, it)) {
        if (__builtin_add_overflow(string_bytes, json_object_iter_key_len(it) + 1, &string_bytes))
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: header strings overflow", file);
    }

    f->n_tensors = (uint32_t)n_tensors;
    f->n_metadata = metadata ? (uint32_t)json_object_size(metadata) : 0;
    f->strings = malloc(string_bytes ? string_bytes : 1);
    f->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *f->tensors);
    f->by_name = calloc(n_tensors ? n_tensors : 1, sizeof *f->by_name);
    f->metadata = calloc(f->n_metadata ? f->n_metadata : 1, sizeof *f->metadata);
    if (!f->strings || !f->tensors || !f->by_name || !f->metadata)
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu tensor entries",
                            file, n_tensors);

    char *cursor = f->strings;
    if (metadata) {
        uint32_t m = 0;
        for (void *it = json_object_iter(metadata); it; it = json_object_iter_next(metadata, it)) {
            json_t *value = json_object_iter_value(it);
            f->metadata[m].key = copy_string(&cursor, json_object_iter_key(it),
                                             json_object_iter_key_len(it));
            f->metadata[m].value = copy_string(&cursor, json_string_value(value),
                                               json_string_length(value));
            m++;
        }
        qsort(f->metadata, f->n_metadata, sizeof *f->metadata, compare_metadata);
    }

    uint32_t i = 0;
    for (void *it = json_object_iter(root); it; it = json_object_iter_next(root, it)) {
        const char *name = json_object_iter_key(it);
        if (strcmp(name, "__metadata__") == 0) continue;
        /* Jansson refuses NUL bytes in object keys, so key_len == strlen(name). */
        vh_st_tensor *t = &f->tensors[i++];
        t->name = copy_string(&cursor, name, json_object_iter_key_len(it));
        status = parse_tensor_entry(file, t->name, json_object_iter_value(it), t, err);
        if (status != VH_OK) return status;
    }

    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, compare_by_offset);
    for (i = 0; i < f->n_tensors; i++) f->by_name[i] = &f->tensors[i];
    qsort(f->by_name, f->n_tensors, sizeof *f->by_name, compare_by_name);
    /* JSON_REJECT_DUPLICATES already refused repeated names; binary search relies on it. */
    for (i = 1; i < f->n_tensors; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: tensor '%s' appears twice", file,
                                f->by_name[i]->name);
    return check_coverage(f, err);
}

/* Validate the whole file in f->bytes and build f's tables. */
static vh_status parse_file(vh_st_file *f, vh_error *err)
{
    const char *file = f->path;
    if (f->size < HEADER_LENGTH_BYTES)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: %zu bytes, too short to hold the 8-byte header length", file,
                            f->size);
    uint64_t n = 0;
    for (int i = HEADER_LENGTH_BYTES - 1; i >= 0; i--) n = (n << 8) | f->bytes[i];
    if (n > VH_ST_MAX_HEADER_BYTES && memcmp(f->bytes, "PK\x03\x04", 4) == 0)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: a zip archive (a PyTorch torch.save file?), not safetensors",
                            file);
    if (n > VH_ST_MAX_HEADER_BYTES)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: header length %llu exceeds the limit of %u bytes (not a "
                            "safetensors file?)", file, (unsigned long long)n,
                            VH_ST_MAX_HEADER_BYTES);
    if (n > f->size - HEADER_LENGTH_BYTES)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: header length %llu runs past the end of the %zu-byte file", file,
                            (unsigned long long)n, f->size);
    const uint8_t *header = f->bytes + HEADER_LENGTH_BYTES;
    f->data = header + n;
    f->data_size = f->size - HEADER_LENGTH_BYTES - n;

    size_t bad = utf8_first_invalid(header, (size_t)n);
    if (bad < n)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: header is not valid UTF-8 (at header byte %zu)", file, bad);
    if (n == 0 || header[0] != '{')
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: header is not a JSON object (it must begin with '{')", file);
    size_t len = (size_t)n;
    while (header[len - 1] == ' ') len--; /* padding; stops at the '{' at worst */
    if (header[len - 1] != '}')
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: header must end with '}' followed only by spaces", file);

    json_error_t jerr;
    json_t *root = json_loadb((const char *)header, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: header is not valid JSON: %s (at header byte %d)", file,
                            jerr.text, jerr.position);
    vh_status status = json_is_object(root) ? load_entries(f, root, err)
                       : vh_error_set(err, VH_ERR_BAD_MODEL,
                                      "%s: header is not a JSON object", file);
    json_decref(root);
    return status;
}

/* A file object for bytes (ours to unmap when mapped), validated; *out NULL on error. */
static vh_status create_file(const uint8_t *bytes, size_t size, bool mapped, const char *name,
                             vh_st_file **out, vh_error *err)
{
    vh_st_file *f = calloc(1, sizeof *f);
    if (!f) {
        if (mapped) munmap((void *)bytes, size);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    f->bytes = bytes;
    f->size = size;
    f->mapped = mapped;
    pthread_mutex_init(&f->copies_lock, NULL);
    f->path = strdup(name);
    if (!f->path) {
        vh_st_close(f);
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", name);
    }
    vh_status status = parse_file(f, err);
    if (status != VH_OK) {
        vh_st_close(f);
        return status;
    }
    *out = f;
    return VH_OK;
}

vh_status vh_st_parse_memory(const uint8_t *bytes, size_t size, const char *name,
                             vh_st_file **out, vh_error *err)
{
    if (!out)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_st_parse_memory: out is NULL");
    *out = NULL;
    if (!name) name = "<memory>";
    if (!bytes && size)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "%s: bytes is NULL", name);
    return create_file(bytes, size, false, name, out, err);
}

vh_status vh_st_open(const char *path, vh_st_file **out, vh_error *err)
{
    if (!out || !path)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_st_open: path or out is NULL");
    *out = NULL;
    char reason[128];
    /* O_NONBLOCK: opening a FIFO must not hang; fstat then refuses it. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return vh_error_set(err, VH_ERR_IO, "%s: cannot open: %s", path,
                            strerror_r(errno, reason, sizeof reason));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return vh_error_set(err, VH_ERR_IO, "%s: cannot stat: %s", path,
                            strerror_r(e, reason, sizeof reason));
    }
    const char *refusal = S_ISDIR(st.st_mode) ? "is a directory, not a safetensors file"
                          : !S_ISREG(st.st_mode) ? "is not a regular file"
                          : st.st_size == 0 ? "is empty"
                          : (uint64_t)st.st_size > SIZE_MAX ? "is too large to map" : NULL;
    if (refusal) {
        close(fd);
        return vh_error_set(err, VH_ERR_IO, "%s: %s", path, refusal);
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file */
    if (map == MAP_FAILED)
        return vh_error_set(err, VH_ERR_IO, "%s: cannot mmap %zu bytes: %s", path, size,
                            strerror_r(e, reason, sizeof reason));
    return create_file(map, size, true, path, out, err);
}

void vh_st_close(vh_st_file *f)
{
    if (!f) return;
    if (f->aligned_copies)
        for (uint32_t i = 0; i < f->n_tensors; i++) free(f->aligned_copies[i]);
    free(f->aligned_copies);
    pthread_mutex_destroy(&f->copies_lock);
    if (f->mapped) munmap((void *)f->bytes, f->size);
    free(f->tensors);
    free(f->by_name);
    free(f->metadata);
    free(f->strings);
    free(f->path);
    free(f);
}

const char *vh_st_path(const vh_st_file *f) { return f->path; }

uint64_t vh_st_file_size(const vh_st_file *f) { return f->size; }

uint32_t vh_st_count(const vh_st_file *f) { return f->n_tensors; }

const vh_st_tensor *vh_st_at(const vh_st_file *f, uint32_t i)
{
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

static int compare_name_key(const void *key, const void *entry)
{
    const vh_st_tensor *const *t = entry;
    return strcmp(key, (*t)->name);
}

const vh_st_tensor *vh_st_find(const vh_st_file *f, const char *name)
{
    if (!name || f->n_tensors == 0) return NULL;
    const vh_st_tensor *const *hit =
        bsearch(name, f->by_name, f->n_tensors, sizeof *f->by_name, compare_name_key);
    return hit ? *hit : NULL;
}

static int compare_metadata_key(const void *key, const void *entry)
{
    return strcmp(key, ((const metadata_entry *)entry)->key);
}

const char *vh_st_metadata(const vh_st_file *f, const char *key)
{
    if (!key || f->n_metadata == 0) return NULL;
    const metadata_entry *hit =
        bsearch(key, f->metadata, f->n_metadata, sizeof *f->metadata, compare_metadata_key);
    return hit ? hit->value : NULL;
}

vh_status vh_st_data(vh_st_file *f, const vh_st_tensor *t, const void **data, vh_error *err)
{
    if (!f || !t || !data)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "vh_st_data: NULL argument");
    *data = NULL;
    if (f->n_tensors == 0 || t < f->tensors || t >= f->tensors + f->n_tensors)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT,
                            "%s: vh_st_data: tensor '%s' is not from this file", f->path,
                            t->name ? t->name : "?");
    if (t->nbytes == 0) {
        *data = empty_tensor_data;
        return VH_OK;
    }
    const uint8_t *bytes = f->data + t->offset;
    if ((uintptr_t)bytes % dtype_alignment(t->dtype) == 0) {
        *data = bytes;
        return VH_OK;
    }

    size_t index = (size_t)(t - f->tensors);
    vh_status status = VH_OK;
    pthread_mutex_lock(&f->copies_lock);
    if (!f->aligned_copies) f->aligned_copies = calloc(f->n_tensors, sizeof *f->aligned_copies);
    if (!f->aligned_copies) {
        status = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", f->path);
    } else if (!f->aligned_copies[index]) {
        void *copy = NULL;
        if (posix_memalign(&copy, ALIGNED_COPY_ALIGNMENT, (size_t)t->nbytes) != 0)
            status = vh_error_set(err, VH_ERR_OUT_OF_MEMORY,
                                  "%s: out of memory for an aligned copy of tensor '%s' "
                                  "(%llu bytes)", f->path, t->name,
                                  (unsigned long long)t->nbytes);
        else
            f->aligned_copies[index] = memcpy(copy, bytes, (size_t)t->nbytes);
    }
    if (status == VH_OK) *data = f->aligned_copies[index];
    pthread_mutex_unlock(&f->copies_lock);
    return status;
}

void vh_st_prefetch(const vh_st_file *f, const vh_st_tensor *t)
{
    if (!f->mapped || !t || t < f->tensors || t >= f->tensors + f->n_tensors || t->nbytes == 0)
        return;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    uintptr_t begin = (uintptr_t)(f->data + t->offset), end = begin + (uintptr_t)t->nbytes;
    begin &= ~((uintptr_t)page - 1);
    madvise((void *)begin, end - begin, MADV_WILLNEED); /* a hint: failure changes nothing */
}
