#include "text/protobuf_wire.h"

/* Groups inside groups deeper than this are refused rather than followed. */
#define VH_PB_MAX_GROUP_DEPTH 32

void vh_pb_reader_init(vh_pb_reader *r, const uint8_t *data, size_t size, const char *name)
{
    r->pos = data;
    r->end = data + size;
    r->base = data;
    r->name = name ? name : "(memory)";
}

static size_t bytes_left(const vh_pb_reader *r) { return (size_t)(r->end - r->pos); }

vh_status vh_pb_read_varint(vh_pb_reader *r, uint64_t *value, const char *what, vh_error *err)
{
    size_t start = vh_pb_offset(r);
    uint64_t v = 0;
    for (unsigned i = 0;; i++) {
        if (r->pos == r->end)
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: %s: truncated varint at byte %zu", r->name, what, start);
        uint8_t b = *r->pos++;
        /* The 10th byte may only hold the 64th bit, and must end the varint. */
        if (i == 9 && b > 1)
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: %s: varint at byte %zu overflows 64 bits", r->name, what,
                                start);
        v |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *value = v;
            return VH_OK;
        }
    }
}

vh_status vh_pb_read_tag(vh_pb_reader *r, uint32_t *field, uint32_t *wire, const char *what,
                         vh_error *err)
{
    size_t start = vh_pb_offset(r);
    uint64_t key;
    vh_status st = vh_pb_read_varint(r, &key, what, err);
    if (st != VH_OK) return st;
    uint64_t number = key >> 3;
    uint32_t type = (uint32_t)(key & 7);
    if (number == 0 || number > 0x1FFFFFFF)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %s: invalid field number %llu at byte %zu",
                            r->name, what, (unsigned long long)number, start);
    if (type > VH_PB_WIRE_I32)
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: %s: field %llu has invalid wire type %u at byte %zu", r->name,
                            what, (unsigned long long)number, type, start);
    *field = (uint32_t)number;
    *wire = type;
    return VH_OK;
}

vh_status vh_pb_read_fixed32(vh_pb_reader *r, uint32_t *value, const char *what, vh_error *err)
{
    if (bytes_left(r) < 4)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: %s: truncated 32-bit value at byte %zu",
                            r->name, what, vh_pb_offset(r));
    const uint8_t *p = r->pos;
    *value = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    r->pos += 4;
    return VH_OK;
}

vh_status vh_pb_read_len(vh_pb_reader *r, const uint8_t **data, size_t *size, const char *what,
                         vh_error *err)
{
    size_t start = vh_pb_offset(r);
    uint64_t n;
    vh_status st = vh_pb_read_varint(r, &n, what, err);
    if (st != VH_OK) return st;
    if (n > bytes_left(r))
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: %s: length %llu at byte %zu runs past the end of its message "
                            "(%zu bytes left)",
                            r->name, what, (unsigned long long)n, start, bytes_left(r));
    *data = r->pos;
    *size = (size_t)n;
    r->pos += n;
    return VH_OK;
}

vh_status vh_pb_read_submessage(vh_pb_reader *r, vh_pb_reader *sub, const char *what,
                                vh_error *err)
{
    const uint8_t *data = NULL;
    size_t size = 0;
    vh_status st = vh_pb_read_len(r, &data, &size, what, err);
    if (st != VH_OK) return st;
    sub->pos = data;
    sub->end = data + size;
    sub->base = r->base;
    sub->name = r->name;
    return VH_OK;
}

vh_status vh_pb_expect_wire(const vh_pb_reader *r, uint32_t field, uint32_t wire,
                            uint32_t expected, const char *what, vh_error *err)
{
    if (wire == expected) return VH_OK;
    return vh_error_set(err, VH_ERR_BAD_MODEL,
                        "%s: %s (field %u) has wire type %u, expected %u, near byte %zu", r->name,
                        what, field, wire, expected, vh_pb_offset(r));
}

/* Skip one value; for a start-group, skip fields up to the end-group of the same number. */
static vh_status skip_value(vh_pb_reader *r, uint32_t field, uint32_t wire, unsigned depth,
                            const char *what, vh_error *err)
{
    uint64_t ignored_varint;
    uint32_t ignored_fixed;
    const uint8_t *ignored_data;
    size_t ignored_size;
    switch (wire) {
    case VH_PB_WIRE_VARINT:
        return vh_pb_read_varint(r, &ignored_varint, what, err);
    case VH_PB_WIRE_I64:
        if (bytes_left(r) < 8)
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: %s: truncated 64-bit value of field %u at byte %zu",
                                r->name, what, field, vh_pb_offset(r));
        r->pos += 8;
        return VH_OK;
    case VH_PB_WIRE_LEN:
        return vh_pb_read_len(r, &ignored_data, &ignored_size, what, err);
    case VH_PB_WIRE_I32:
        return vh_pb_read_fixed32(r, &ignored_fixed, what, err);
    case VH_PB_WIRE_SGROUP:
        if (depth >= VH_PB_MAX_GROUP_DEPTH)
            return vh_error_set(err, VH_ERR_BAD_MODEL,
                                "%s: %s: groups nested deeper than %d at byte %zu", r->name, what,
                                VH_PB_MAX_GROUP_DEPTH, vh_pb_offset(r));
        for (;;) {
            if (!vh_pb_more(r))
                return vh_error_set(err, VH_ERR_BAD_MODEL,
                                    "%s: %s: group of field %u is not closed", r->name, what,
                                    field);
            uint32_t inner_field = 0, inner_wire = 0;
            vh_status st = vh_pb_read_tag(r, &inner_field, &inner_wire, what, err);
            if (st != VH_OK) return st;
            if (inner_wire == VH_PB_WIRE_EGROUP) {
                if (inner_field != field)
                    return vh_error_set(err, VH_ERR_BAD_MODEL,
                                        "%s: %s: group of field %u closed by field %u at byte %zu",
                                        r->name, what, field, inner_field, vh_pb_offset(r));
                return VH_OK;
            }
            st = skip_value(r, inner_field, inner_wire, depth + 1, what, err);
            if (st != VH_OK) return st;
        }
    case VH_PB_WIRE_EGROUP:
    default:
        return vh_error_set(err, VH_ERR_BAD_MODEL,
                            "%s: %s: unexpected end-group (field %u) at byte %zu", r->name, what,
                            field, vh_pb_offset(r));
    }
}

vh_status vh_pb_skip(vh_pb_reader *r, uint32_t field, uint32_t wire, const char *what,
                     vh_error *err)
{
    return skip_value(r, field, wire, 0, what, err);
}
