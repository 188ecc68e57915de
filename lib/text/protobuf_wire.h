/* A strict reader of the protocol buffers wire format: varints, tags, fixed-width values,
 * length-delimited fields, and skipping of fields the caller does not know (groups included).
 *
 * It reads from a byte range it does not own and never reads past its end. Every failure
 * (a truncated varint, a length past the end, an invalid wire type, field number 0, groups nested
 * too deeply or not closed) returns VH_ERR_BAD_MODEL with a message naming the file (the
 * reader's `name`), what was being read, and the byte offset in the file. */
#ifndef VH_TEXT_PROTOBUF_WIRE_H
#define VH_TEXT_PROTOBUF_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

enum {
    VH_PB_WIRE_VARINT = 0,
    VH_PB_WIRE_I64 = 1,
    VH_PB_WIRE_LEN = 2,
    VH_PB_WIRE_SGROUP = 3, /* deprecated groups: only ever skipped */
    VH_PB_WIRE_EGROUP = 4,
    VH_PB_WIRE_I32 = 5
};

typedef struct vh_pb_reader {
    const uint8_t *pos;  /* next byte to read */
    const uint8_t *end;  /* one past the last byte of this message */
    const uint8_t *base; /* start of the whole file, for offsets in messages */
    const char *name;    /* file name for messages */
} vh_pb_reader;

/* A reader over data[0 .. size), the whole file. */
void vh_pb_reader_init(vh_pb_reader *r, const uint8_t *data, size_t size, const char *name);

/* 1 while bytes are left in the current message. */
static inline int vh_pb_more(const vh_pb_reader *r) { return r->pos < r->end; }

/* Byte offset of the next byte in the file (for messages). */
static inline size_t vh_pb_offset(const vh_pb_reader *r) { return (size_t)(r->pos - r->base); }

/* Read a field key: its number (1 .. 2^29-1) and wire type (0-5). `what` names the message. */
vh_status vh_pb_read_tag(vh_pb_reader *r, uint32_t *field, uint32_t *wire, const char *what,
                         vh_error *err);

/* Read a varint of at most 10 bytes that fits in 64 bits. */
vh_status vh_pb_read_varint(vh_pb_reader *r, uint64_t *value, const char *what, vh_error *err);

/* Read a little-endian 32-bit value (wire type I32), e.g. a float's bits. */
vh_status vh_pb_read_fixed32(vh_pb_reader *r, uint32_t *value, const char *what, vh_error *err);

/* Read a length-delimited field's payload: *data points into the file, *size bytes. */
vh_status vh_pb_read_len(vh_pb_reader *r, const uint8_t **data, size_t *size, const char *what,
                         vh_error *err);

/* A reader over a length-delimited field's payload, for reading an embedded message. */
vh_status vh_pb_read_submessage(vh_pb_reader *r, vh_pb_reader *sub, const char *what,
                                vh_error *err);

/* Check that a known field arrived with the wire type its schema gives it. */
vh_status vh_pb_expect_wire(const vh_pb_reader *r, uint32_t field, uint32_t wire,
                            uint32_t expected, const char *what, vh_error *err);

/* Skip the value of a field whose key (field, wire) was just read. */
vh_status vh_pb_skip(vh_pb_reader *r, uint32_t field, uint32_t wire, const char *what,
                     vh_error *err);

#endif
