/* Strict reader of the safetensors format, memory-mapped.
 *
 * A safetensors file is
 *     8 bytes    N, the header length, unsigned little-endian
 *     N bytes    UTF-8 JSON object, starting with '{', possibly padded with spaces (0x20):
 *                {"__metadata__": {"k": "v", ...},                      (optional, string values)
 *                 "name": {"dtype": "BF16", "shape": [4096, 4096], "data_offsets": [b, e]}, ...}
 *     the rest   the byte buffer; data_offsets are relative to its start
 * (the format as huggingface/safetensors, safetensors/src/tensor.rs, defines and checks it).
 *
 * Every rule is checked at open, so a vh_st_file that opened is safe to use without further
 * checks: the header length is at most 100 MB and fits the file; every tensor entry has exactly the
 * fields dtype, shape and data_offsets; dtypes are known; shapes have at most VH_ST_MAX_DIMS
 * dimensions; offsets are exact non-negative integers; element counts and byte sizes are computed
 * with overflow checks; end - begin equals the tensor's byte size; the ranges, sorted, cover the
 * byte buffer exactly from 0 to its end without gaps or overlaps; names are unique.
 * A file that breaks a rule gives VH_ERR_BAD_MODEL with a message naming the file, the tensor and
 * the rule ("tensor 'x' bytes [a, b) overlap tensor 'y' [c, d)").
 *
 * Typical use:
 *     vh_st_file *f;
 *     if (vh_st_open("model.safetensors", &f, &err) != VH_OK) return err.status;
 *     const vh_st_tensor *t = vh_st_find(f, "lm_head.weight");
 *     const void *data;
 *     if (t && vh_st_data(f, t, &data, &err) == VH_OK) use(data, t->dtype, t->shape);
 *     vh_st_close(f);
 *
 * Threads: after open, every function may be called from any number of threads at once on the
 * same file, until vh_st_close (which must run alone).
 */
#ifndef VH_MODEL_SAFETENSORS_H
#define VH_MODEL_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define VH_ST_MAX_DIMS 8
#define VH_ST_MAX_HEADER_BYTES 100000000u /* the reference implementation's limit */
#define VH_ST_MAX_TENSORS 1000000u        /* far above any real checkpoint shard */

/* Element types, with the names the format uses. The numeric values are this library's own. */
typedef enum vh_st_dtype {
    VH_ST_BOOL = 0,
    VH_ST_U8,
    VH_ST_I8,
    VH_ST_F8_E5M2,
    VH_ST_F8_E4M3,
    VH_ST_F8_E8M0,      /* OCP microscaling exponent */
    VH_ST_F8_E4M3FNUZ,
    VH_ST_F8_E5M2FNUZ,
    VH_ST_F4,           /* OCP MXFP4, 4 bits an element */
    VH_ST_F6_E2M3,      /* OCP MXFP6, 6 bits an element */
    VH_ST_F6_E3M2,      /* OCP MXFP6, 6 bits an element */
    VH_ST_I16,
    VH_ST_U16,
    VH_ST_F16,
    VH_ST_BF16,
    VH_ST_I32,
    VH_ST_U32,
    VH_ST_F32,
    VH_ST_C64,          /* complex, two F32 parts */
    VH_ST_F64,
    VH_ST_I64,
    VH_ST_U64,
    VH_ST_DTYPE_COUNT
} vh_st_dtype;

/* One tensor entry. Shape entries past ndim are 0. ndim 0 is a scalar (one element). */
typedef struct vh_st_tensor {
    const char *name;             /* NUL-terminated, owned by the file */
    vh_st_dtype dtype;
    uint32_t ndim;
    uint64_t shape[VH_ST_MAX_DIMS];
    uint64_t nelements;           /* product of the shape (1 for a scalar, 0 if a dim is 0) */
    uint64_t nbytes;              /* data_offsets end - begin */
    uint64_t offset;              /* data_offsets begin: from the start of the byte buffer */
} vh_st_tensor;

typedef struct vh_st_file vh_st_file;

/* Open and validate a file: open + fstat + mmap(PROT_READ, MAP_PRIVATE) of the whole file; it is
 * never read into memory. The path is kept for messages.
 * Returns VH_OK and *out, or: VH_ERR_IO (with strerror) if it cannot be opened, stat'ed or
 * mapped, is a directory or not a regular file, or is empty; VH_ERR_BAD_MODEL if its contents
 * break a rule; VH_ERR_OUT_OF_MEMORY. On error *out is NULL.
 * As with any mapping, if another program truncates the file while it is open, reading the lost
 * pages raises SIGBUS: checkpoints must not be rewritten in place while in use. */
vh_status vh_st_open(const char *path, vh_st_file **out, vh_error *err);

/* Validate a file already in memory. The bytes are NOT copied: they must stay valid and unchanged
 * until vh_st_close. `name` (copied; NULL gives "<memory>") names the file in messages.
 * Same rules and statuses as vh_st_open. */
vh_status vh_st_parse_memory(const uint8_t *bytes, size_t size, const char *name,
                             vh_st_file **out, vh_error *err);

/* Unmap and free everything, including aligned copies handed out by vh_st_data: every pointer
 * obtained from this file dies with it. NULL is ignored. */
void vh_st_close(vh_st_file *f);

/* The path or name given at open. */
const char *vh_st_path(const vh_st_file *f);

/* The file's total size in bytes (what is mapped, for vh_st_open). */
uint64_t vh_st_file_size(const vh_st_file *f);

/* Number of tensors, and the i-th one (0 <= i < count; NULL beyond), in byte-buffer order
 * (increasing offset). The entries live as long as the file. */
uint32_t vh_st_count(const vh_st_file *f);
const vh_st_tensor *vh_st_at(const vh_st_file *f, uint32_t i);

/* The tensor named `name`, or NULL. O(log n): a binary search over names sorted by strcmp. */
const vh_st_tensor *vh_st_find(const vh_st_file *f, const char *name);

/* A pointer to the tensor's bytes (little-endian, row-major, t->nbytes long), aligned to the
 * element size (at most 8; sub-byte dtypes: 1).
 * When the bytes in the file are aligned (the usual case: writers pad the header to 8 bytes and
 * order tensors by alignment), this points into the mapping: no copy. When they are not (a header
 * length that is not a multiple of 8, or an odd tensor order), the first call makes an aligned copy
 * of that tensor, owned by the file and freed by vh_st_close; later calls return the same copy.
 * This is thread-safe (a mutex guards the copies). Zero-byte tensors get a valid, aligned,
 * non-NULL pointer that must not be read.
 * `t` must come from this file (vh_st_at/vh_st_find), else VH_ERR_INVALID_ARGUMENT.
 * Returns VH_OK, or VH_ERR_OUT_OF_MEMORY when a copy cannot be made. */
vh_status vh_st_data(vh_st_file *f, const vh_st_tensor *t, const void **data, vh_error *err);

/* Hint that the tensor's bytes will be read soon (madvise MADV_WILLNEED over its pages), so
 * the kernel reads them ahead. Only a hint: does nothing for files parsed from memory. */
void vh_st_prefetch(const vh_st_file *f, const vh_st_tensor *t);

/* The value of `key` in "__metadata__", or NULL if absent. Owned by the file. */
const char *vh_st_metadata(const vh_st_file *f, const char *key);

/* The format's name of a dtype ("BF16"); "?" for a value out of range. */
const char *vh_st_dtype_name(vh_st_dtype dtype);

/* Parse a format dtype name (exact, case-sensitive); false if unknown. */
bool vh_st_dtype_from_name(const char *name, vh_st_dtype *dtype);

/* Bits of one element (4 for F4, 6 for F6_*, 8 .. 64 otherwise); 0 for a value out of range. */
uint32_t vh_st_dtype_bits(vh_st_dtype dtype);

/* Bytes of one element; 0 for the sub-byte dtypes (F4, F6_*) and for a value out of range. */
size_t vh_st_dtype_size(vh_st_dtype dtype);

#endif
