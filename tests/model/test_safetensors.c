/* The safetensors reader: one test per defect class, built byte by byte here, plus valid files
 * whose values are checked against the bytes written (and against a fixture made by the spec
 * writer in make_safetensors_fixture.py, with numpy/torch doing the element encoding). */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "test_support.h"
#include "vlahybrid/backend.h"

#define FILE_NAME "test.safetensors"

/* A file image: u64 little-endian header length, the header, then `data`. malloc'd. */
static uint8_t *build_image(const char *header, size_t header_len, const void *data,
                            size_t data_len, size_t *size)
{
    *size = 8 + header_len + data_len;
    uint8_t *image = malloc(*size ? *size : 1);
    ck_assert_ptr_nonnull(image);
    for (int i = 0; i < 8; i++) image[i] = (uint8_t)((uint64_t)header_len >> (8 * i));
    memcpy(image + 8, header, header_len);
    if (data_len) memcpy(image + 8 + header_len, data, data_len);
    return image;
}

/* Parse `header` followed by data_len bytes; expect VH_ERR_BAD_MODEL with `needle` in a message
 * that names the file. */
static void expect_bad(const char *header, size_t data_len, const char *needle)
{
    uint8_t data[256] = {0};
    ck_assert_uint_le(data_len, sizeof data);
    size_t size;
    uint8_t *image = build_image(header, strlen(header), data, data_len, &size);
    vh_st_file *f = (vh_st_file *)1;
    vh_error err;
    vh_error_clear(&err);
    vh_status status = vh_st_parse_memory(image, size, FILE_NAME, &f, &err);
    ck_assert_msg(status == VH_ERR_BAD_MODEL, "status %d for header %s (message: %s)", status,
                  header, err.message);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(err.message, FILE_NAME ":") == err.message, "no file name: %s",
                  err.message);
    ck_assert_msg(strstr(err.message, needle), "'%s' not in message: %s", needle, err.message);
    free(image);
}

/* Parse raw bytes (not built); expect BAD_MODEL with needle. */
static void expect_bad_raw(const uint8_t *bytes, size_t size, const char *needle)
{
    vh_st_file *f = (vh_st_file *)1;
    vh_error err;
    vh_error_clear(&err);
    ck_assert_int_eq(vh_st_parse_memory(bytes, size, FILE_NAME, &f, &err), VH_ERR_BAD_MODEL);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(err.message, needle), "'%s' not in message: %s", needle, err.message);
}

static vh_st_file *parse_ok(const uint8_t *image, size_t size)
{
    vh_st_file *f = NULL;
    vh_error err;
    vh_error_clear(&err);
    vh_status status = vh_st_parse_memory(image, size, FILE_NAME, &f, &err);
    ck_assert_msg(status == VH_OK, "status %d: %s", status, err.message);
    ck_assert_ptr_nonnull(f);
    return f;
}

static const void *data_of(vh_st_file *f, const char *name)
{
    const vh_st_tensor *t = vh_st_find(f, name);
    ck_assert_msg(t != NULL, "tensor %s not found", name);
    const void *data = NULL;
    vh_error err;
    ck_assert_int_eq(vh_st_data(f, t, &data, &err), VH_OK);
    ck_assert_ptr_nonnull(data);
    ck_assert_uint_eq((uintptr_t)data % (vh_st_dtype_size(t->dtype) ? vh_st_dtype_size(t->dtype) : 1), 0);
    return data;
}

/* ------------------------------------------------------------------------------------------------
 * Defects of the framing: length, header text.
 */

START_TEST(truncated_before_length)
{
    const uint8_t five[5] = {2, 0, 0, 0, 0};
    expect_bad_raw(five, sizeof five, "too short");
    expect_bad_raw(five, 0, "too short");
}
END_TEST

START_TEST(length_past_end)
{
    size_t size;
    uint8_t *image = build_image("{}", 2, NULL, 0, &size);
    image[0] = 3; /* claims 3 header bytes, 2 present */
    expect_bad_raw(image, size, "runs past the end");
    free(image);
}
END_TEST

START_TEST(huge_header)
{
    uint8_t image[16] = {0};
    memcpy(image + 8, "{}      ", 8);
    uint64_t lengths[] = {100000001u, 0x7fffffffffffffffull, UINT64_MAX};
    for (size_t i = 0; i < 3; i++) {
        for (int b = 0; b < 8; b++) image[b] = (uint8_t)(lengths[i] >> (8 * b));
        expect_bad_raw(image, sizeof image, "exceeds the limit of 100000000 bytes");
    }
    /* A torch.save zip archive under a .safetensors name. */
    memcpy(image, "PK\x03\x04\0\0\x08\x08", 8);
    expect_bad_raw(image, sizeof image, "a zip archive (a PyTorch torch.save file?)");
    /* Exactly at the cap is allowed by the cap, and then fails as too long for the file. */
    uint64_t at_cap = 100000000u;
    for (int b = 0; b < 8; b++) image[b] = (uint8_t)(at_cap >> (8 * b));
    expect_bad_raw(image, sizeof image, "runs past the end");
}
END_TEST

START_TEST(header_not_json)
{
    expect_bad("{not json}", 0, "not valid JSON");
    expect_bad("{\"a\": }", 0, "not valid JSON");
    expect_bad("{}{}", 0, "not valid JSON");
}
END_TEST

START_TEST(header_not_object)
{
    expect_bad("[1, 2]", 0, "not a JSON object");
    expect_bad("\"text\"", 0, "not a JSON object");
    expect_bad(" {}", 0, "not a JSON object"); /* must begin with '{' */
    expect_bad("        ", 0, "not a JSON object");
    expect_bad("", 0, "not a JSON object");
}
END_TEST

START_TEST(header_bad_padding)
{
    expect_bad("{}\n", 0, "followed only by spaces");
    expect_bad("{}  \t", 0, "followed only by spaces");
    expect_bad("{} x", 0, "followed only by spaces");
}
END_TEST

START_TEST(header_not_utf8)
{
    const char *bad[] = {
        "{\"a\xff\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [0, 0]}}",
        "{\"a\xc0\xaf\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [0, 0]}}", /* overlong */
        "{\"a\xed\xa0\x80\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [0, 0]}}", /* surrogate */
        "{\"a\xf4\x90\x80\x80\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [0, 0]}}",
        "{\"__metadata__\": {\"k\": \"\xe2\x82\"}}", /* truncated sequence */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) expect_bad(bad[i], 0, "not valid UTF-8");
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Defects of a tensor entry.
 */

START_TEST(entry_not_object)
{
    expect_bad("{\"a\": 5}", 0, "tensor 'a' is an integer, not an object");
    expect_bad("{\"a\": [\"U8\", [1], [0, 1]]}", 1, "tensor 'a' is an array, not an object");
}
END_TEST

START_TEST(missing_field)
{
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [1]}}", 1,
               "tensor 'a' lacks the field 'data_offsets'");
    expect_bad("{\"a\": {\"shape\": [1], \"data_offsets\": [0, 1]}}", 1,
               "tensor 'a' lacks the field 'dtype'");
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"data_offsets\": [0, 1]}}", 1,
               "tensor 'a' lacks the field 'shape'");
}
END_TEST

START_TEST(extra_field)
{
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [1], \"data_offsets\": [0, 1], \"x\": 1}}", 1,
               "tensor 'a' has an unexpected field 'x'");
}
END_TEST

START_TEST(unknown_dtype)
{
    expect_bad("{\"a\": {\"dtype\": \"F128\", \"shape\": [1], \"data_offsets\": [0, 16]}}", 16,
               "tensor 'a' has an unknown dtype 'F128'");
    expect_bad("{\"a\": {\"dtype\": \"f32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "unknown dtype 'f32'");
    expect_bad("{\"a\": {\"dtype\": 32, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
               "dtype is an integer, not a string");
}
END_TEST

START_TEST(bad_shape_values)
{
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [-1], \"data_offsets\": [0, 0]}}", 0,
               "shape[0] is a negative integer");
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [1, 2.0], \"data_offsets\": [0, 2]}}", 2,
               "shape[1] is a real number");
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [1e3], \"data_offsets\": [0, 0]}}", 0,
               "shape[0] is a real number");
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [\"2\"], \"data_offsets\": [0, 2]}}", 2,
               "shape[0] is a string");
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": 2, \"data_offsets\": [0, 2]}}", 2,
               "shape is an integer, not an array");
    /* Past INT64_MAX: refused by the JSON parser itself. */
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [18446744073709551616], \"data_offsets\": "
               "[0, 0]}}", 0, "not valid JSON");
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, "
               "1]}}", 1, "tensor 'a' has 9 dimensions; at most 8");
}
END_TEST

START_TEST(bad_offset_values)
{
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [-4, -4]}}", 0,
               "data_offsets[0] is a negative integer");
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4.0]}}", 4,
               "data_offsets[1] is a real number");
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4, 8]}}", 4,
               "not an array [begin, end]");
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": {\"b\": 0}}}", 4,
               "not an array [begin, end]");
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [0, "
               "9223372036854775808]}}", 0, "not valid JSON");
}
END_TEST

START_TEST(shape_product_overflow)
{
    /* 2^32 * 2^32 elements. */
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [4294967296, 4294967296], \"data_offsets\": "
               "[0, 0]}}", 0, "element count of its shape overflows");
    /* 2^62 elements fit, their 2^62 * 32 bits do not. */
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [4611686018427387904], \"data_offsets\": "
               "[0, 0]}}", 0, "byte size of F32 [4611686018427387904] overflows");
    /* A zero after an overflowing prefix is still refused, as the reference does. */
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [4294967296, 4294967296, 0], "
               "\"data_offsets\": [0, 0]}}", 0, "overflows");
}
END_TEST

START_TEST(offset_past_buffer)
{
    /* Sizes that agree with each other but not with the file. */
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [1152921504606846976], \"data_offsets\": "
               "[0, 1152921504606846976]}}", 4,
               "tensor 'a' bytes [0, 1152921504606846976) run past the end of the byte buffer "
               "(4 bytes");
    /* The largest end JSON can carry, with a shape whose bits overflow: refused as overflow. */
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [9223372036854775807], \"data_offsets\": "
               "[0, 9223372036854775807]}}", 4, "overflows 64 bits");
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
               "\"b\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4, 8]}}", 6,
               "tensor 'b' bytes [4, 8) run past the end");
}
END_TEST

START_TEST(begin_after_end)
{
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [8, 4]}}", 8,
               "tensor 'a': data_offsets [8, 4) begin after they end");
}
END_TEST

START_TEST(nbytes_mismatch)
{
    expect_bad("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4]}}", 4,
               "tensor 'a': F32 [2] needs 8 bytes, but data_offsets [0, 4) hold 4");
    expect_bad("{\"a\": {\"dtype\": \"BF16\", \"shape\": [], \"data_offsets\": [0, 4]}}", 4,
               "BF16 [] needs 2 bytes");
    expect_bad("{\"a\": {\"dtype\": \"F4\", \"shape\": [3], \"data_offsets\": [0, 2]}}", 2,
               "F4 [3] is 12 bits, not a whole number of bytes");
    expect_bad("{\"a\": {\"dtype\": \"F6_E2M3\", \"shape\": [2], \"data_offsets\": [0, 2]}}", 2,
               "not a whole number of bytes");
}
END_TEST

START_TEST(overlapping_ranges)
{
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [0, 8]}, "
               "\"b\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [4, 12]}}", 12,
               "tensor 'b' bytes [4, 12) overlap tensor 'a' [0, 8)");
    /* A zero-size tensor inside another one. */
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [8], \"data_offsets\": [0, 8]}, "
               "\"z\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [4, 4]}}", 8,
               "tensor 'z' bytes [4, 4) overlap tensor 'a' [0, 8)");
    /* The same range twice. */
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
               "\"b\": {\"dtype\": \"I8\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 4,
               "tensor 'b' bytes [0, 4) overlap tensor 'a' [0, 4)");
}
END_TEST

START_TEST(gap_between_tensors)
{
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
               "\"b\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [8, 12]}}", 12,
               "bytes [4, 8) between tensor 'a' and tensor 'b' belong to no tensor");
}
END_TEST

START_TEST(not_starting_at_zero)
{
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4, 8]}}", 8,
               "the first tensor 'a' starts at byte 4");
}
END_TEST

START_TEST(trailing_bytes)
{
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}}", 6,
               "2 trailing bytes after the last tensor");
    expect_bad("{}", 3, "3 trailing bytes");
}
END_TEST

START_TEST(duplicate_names)
{
    expect_bad("{\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [0, 4]}, "
               "\"a\": {\"dtype\": \"U8\", \"shape\": [4], \"data_offsets\": [4, 8]}}", 8,
               "duplicate object key");
    expect_bad("{\"__metadata__\": {\"k\": \"1\", \"k\": \"2\"}}", 0, "duplicate object key");
}
END_TEST

START_TEST(metadata_not_strings)
{
    expect_bad("{\"__metadata__\": {\"format\": \"pt\", \"n\": 1}}", 0,
               "__metadata__ value of 'n' is an integer; values must be strings");
    expect_bad("{\"__metadata__\": {\"o\": {}}}", 0, "value of 'o' is an object");
    expect_bad("{\"__metadata__\": \"pt\"}", 0, "__metadata__ is a string, not an object");
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Valid files.
 */

START_TEST(zero_tensors)
{
    const char *headers[] = {"{}", "{}      ", "{\"__metadata__\": {\"format\": \"pt\"}}"};
    for (size_t i = 0; i < 3; i++) {
        size_t size;
        uint8_t *image = build_image(headers[i], strlen(headers[i]), NULL, 0, &size);
        vh_st_file *f = parse_ok(image, size);
        ck_assert_uint_eq(vh_st_count(f), 0);
        ck_assert_ptr_null(vh_st_at(f, 0));
        ck_assert_ptr_null(vh_st_find(f, "a"));
        ck_assert_ptr_null(vh_st_find(f, "__metadata__"));
        ck_assert_ptr_null(vh_st_metadata(f, "missing"));
        if (i == 2) ck_assert_str_eq(vh_st_metadata(f, "format"), "pt");
        vh_st_close(f);
        free(image);
    }
}
END_TEST

START_TEST(zero_size_tensors)
{
    const char *header =
        "{\"s\": {\"dtype\": \"F16\", \"shape\": [2], \"data_offsets\": [0, 4]},"
        " \"e\": {\"dtype\": \"F32\", \"shape\": [0, 3], \"data_offsets\": [4, 4]},"
        " \"f\": {\"dtype\": \"F64\", \"shape\": [3, 0, 1], \"data_offsets\": [0, 0]},"
        " \"z\": {\"dtype\": \"I64\", \"shape\": [0], \"data_offsets\": [4, 4]}}";
    const uint8_t data[4] = {1, 2, 3, 4};
    size_t size;
    uint8_t *image = build_image(header, strlen(header), data, sizeof data, &size);
    vh_st_file *f = parse_ok(image, size);
    ck_assert_uint_eq(vh_st_count(f), 4);
    const vh_st_tensor *e = vh_st_find(f, "e");
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(e->ndim, 2);
    ck_assert_uint_eq(e->shape[0], 0);
    ck_assert_uint_eq(e->shape[1], 3);
    ck_assert_uint_eq(e->nelements, 0);
    ck_assert_uint_eq(e->nbytes, 0);
    data_of(f, "e"); /* non-NULL and aligned */
    data_of(f, "f");
    data_of(f, "z");
    ck_assert_int_eq(memcmp(data_of(f, "s"), data, 4), 0);
    /* Buffer order: f [0,0), s [0,4), e [4,4), z [4,4). */
    ck_assert_str_eq(vh_st_at(f, 0)->name, "f");
    ck_assert_str_eq(vh_st_at(f, 1)->name, "s");
    vh_st_close(f);
    free(image);
}
END_TEST

/* A multi-dtype image with known values; tensors laid out in the file order given. */
typedef struct known_file {
    uint8_t *image;
    size_t size;
    size_t header_len;
} known_file;

static const float known_f32[6] = {1.5f, -2.25f, 0.0f, 3.0e38f, -1.0e-38f, 7.0f};
static const double known_f64[2] = {3.141592653589793, -2.5e-300};
static const uint16_t known_bf16[3] = {0x3f80, 0xc020, 0x7f80}; /* 1, -2.5, +inf */
static const uint16_t known_f16[2] = {0x3c00, 0x0001};          /* 1, smallest subnormal */
static const int64_t known_i64[2] = {-9223372036854775807LL - 1, 1234567890123LL};
static const int32_t known_i32 = -42;
static const uint8_t known_u8[3] = {0, 128, 255};
static const int16_t known_i16[2] = {-2, 300};

/* Header padded to `header_len` bytes (at least its text); data packed with no alignment
 * padding, in this order: f64, i64, f32, i32 (scalar), bf16, f16, i16, u8. */
static known_file make_known_file(size_t header_len)
{
    uint8_t data[128];
    size_t at = 0;
#define PUT(array) (memcpy(data + at, (array), sizeof(array)), at += sizeof(array))
    PUT(known_f64);
    PUT(known_i64);
    PUT(known_f32);
    memcpy(data + at, &known_i32, 4), at += 4;
    PUT(known_bf16);
    PUT(known_f16);
    PUT(known_i16);
    PUT(known_u8);
#undef PUT
    char header[1024];
    int n = snprintf(header, sizeof header,
        "{\"__metadata__\": {\"format\": \"pt\", \"note\": \"h\\u00e9\"},"
        " \"w.f32\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [32, 56]},"
        " \"w.f64\": {\"dtype\": \"F64\", \"shape\": [2], \"data_offsets\": [0, 16]},"
        " \"w.i64\": {\"dtype\": \"I64\", \"shape\": [2, 1], \"data_offsets\": [16, 32]},"
        " \"w.i32\": {\"dtype\": \"I32\", \"shape\": [], \"data_offsets\": [56, 60]},"
        " \"w.bf16\": {\"dtype\": \"BF16\", \"shape\": [3], \"data_offsets\": [60, 66]},"
        " \"w.f16\": {\"dtype\": \"F16\", \"shape\": [1, 2], \"data_offsets\": [66, 70]},"
        " \"w.i16\": {\"dtype\": \"I16\", \"shape\": [2], \"data_offsets\": [70, 74]},"
        " \"w.u8\": {\"dtype\": \"U8\", \"shape\": [3], \"data_offsets\": [74, 77]}}");
    ck_assert_int_eq(at, 77);
    ck_assert_int_lt(n, (int)header_len + 1);
    memset(header + n, ' ', header_len - (size_t)n);
    known_file k;
    k.header_len = header_len;
    k.image = build_image(header, header_len, data, at, &k.size);
    return k;
}

/* Check every value of a file made by make_known_file; returns the data pointer of w.f32. */
static const void *check_known_values(vh_st_file *f)
{
    ck_assert_uint_eq(vh_st_count(f), 8);
    ck_assert_str_eq(vh_st_metadata(f, "format"), "pt");
    ck_assert_str_eq(vh_st_metadata(f, "note"), "h\xc3\xa9");

    const vh_st_tensor *t = vh_st_find(f, "w.f32");
    ck_assert_int_eq(t->dtype, VH_ST_F32);
    ck_assert_uint_eq(t->ndim, 2);
    ck_assert_uint_eq(t->shape[0], 2);
    ck_assert_uint_eq(t->shape[1], 3);
    ck_assert_uint_eq(t->shape[2], 0);
    ck_assert_uint_eq(t->nelements, 6);
    ck_assert_uint_eq(t->nbytes, 24);
    ck_assert_uint_eq(t->offset, 32);
    const float *f32 = data_of(f, "w.f32");
    for (int i = 0; i < 6; i++) ck_assert(f32[i] == known_f32[i]);
    const double *f64 = data_of(f, "w.f64");
    ck_assert(f64[0] == known_f64[0] && f64[1] == known_f64[1]);
    const int64_t *i64 = data_of(f, "w.i64");
    ck_assert(i64[0] == known_i64[0] && i64[1] == known_i64[1]);
    ck_assert_int_eq(*(const int32_t *)data_of(f, "w.i32"), -42);
    ck_assert_uint_eq(vh_st_find(f, "w.i32")->ndim, 0);
    ck_assert_uint_eq(vh_st_find(f, "w.i32")->nelements, 1);
    const uint16_t *bf16 = data_of(f, "w.bf16");
    ck_assert(vh_bf16_to_f32(bf16[0]) == 1.0f);
    ck_assert(vh_bf16_to_f32(bf16[1]) == -2.5f);
    ck_assert(vh_bf16_to_f32(bf16[2]) > 3.4e38f);
    const uint16_t *f16 = data_of(f, "w.f16");
    ck_assert(vh_f16_to_f32(f16[0]) == 1.0f);
    ck_assert(vh_f16_to_f32(f16[1]) == 5.9604644775390625e-8f);
    const int16_t *i16 = data_of(f, "w.i16");
    ck_assert(i16[0] == -2 && i16[1] == 300);
    ck_assert_int_eq(memcmp(data_of(f, "w.u8"), known_u8, 3), 0);

    /* Buffer order and name lookup. */
    const char *order[] = {"w.f64", "w.i64", "w.f32", "w.i32", "w.bf16", "w.f16", "w.i16", "w.u8"};
    for (uint32_t i = 0; i < 8; i++) {
        ck_assert_str_eq(vh_st_at(f, i)->name, order[i]);
        ck_assert_ptr_eq(vh_st_find(f, order[i]), vh_st_at(f, i));
    }
    ck_assert_ptr_null(vh_st_at(f, 8));
    ck_assert_ptr_null(vh_st_find(f, "w"));
    ck_assert_ptr_null(vh_st_find(f, "w.f32 "));
    ck_assert_ptr_null(vh_st_find(f, "__metadata__"));
    return f32;
}

START_TEST(valid_multi_dtype)
{
    known_file k = make_known_file(640);
    vh_st_file *f = parse_ok(k.image, k.size);
    const void *f32 = check_known_values(f);
    /* Aligned in the buffer (image from malloc, 8 + 640 header bytes): no copy is made. */
    ck_assert_ptr_eq(f32, k.image + 8 + 640 + 32);
    ck_assert_str_eq(vh_st_path(f), FILE_NAME);
    ck_assert_uint_eq(vh_st_file_size(f), k.size);
    vh_st_close(f);
    free(k.image);
}
END_TEST

START_TEST(misaligned_header_length)
{
    for (size_t header_len = 633; header_len < 640; header_len++) {
        known_file k = make_known_file(header_len);
        vh_st_file *f = parse_ok(k.image, k.size);
        const void *f32 = check_known_values(f);
        const uint8_t *in_buffer = k.image + 8 + header_len + 32;
        if ((uintptr_t)in_buffer % 4 != 0) ck_assert_ptr_ne(f32, in_buffer); /* a copy */
        const void *again = data_of(f, "w.f32");
        ck_assert_ptr_eq(again, f32); /* the same copy on later calls */
        vh_st_close(f);
        free(k.image);
    }
}
END_TEST

/* The same image at every offset of a buffer, so every start alignment is seen. */
START_TEST(misaligned_buffer_start)
{
    known_file k = make_known_file(640);
    uint8_t *shifted = malloc(k.size + 8);
    for (size_t shift = 1; shift < 8; shift++) {
        memcpy(shifted + shift, k.image, k.size);
        vh_st_file *f = parse_ok(shifted + shift, k.size);
        check_known_values(f);
        vh_st_close(f);
    }
    free(shifted);
    free(k.image);
}
END_TEST

typedef struct copy_race {
    vh_st_file *f;
    const vh_st_tensor *t;
    const void *got;
} copy_race;

static void *race_data(void *arg)
{
    copy_race *r = arg;
    vh_error err;
    if (vh_st_data(r->f, r->t, &r->got, &err) != VH_OK) r->got = NULL;
    return NULL;
}

START_TEST(aligned_copy_thread_safe)
{
    known_file k = make_known_file(637); /* data start 645: every multi-byte tensor misaligned */
    vh_st_file *f = parse_ok(k.image, k.size);
    copy_race races[8];
    pthread_t threads[8];
    for (int i = 0; i < 8; i++) {
        races[i] = (copy_race){f, vh_st_find(f, "w.f64"), NULL};
        ck_assert_int_eq(pthread_create(&threads[i], NULL, race_data, &races[i]), 0);
    }
    for (int i = 0; i < 8; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < 8; i++) ck_assert_ptr_eq(races[i].got, races[0].got);
    ck_assert_uint_eq((uintptr_t)races[0].got % 8, 0);
    ck_assert(((const double *)races[0].got)[0] == known_f64[0]);
    vh_st_close(f);
    free(k.image);
}
END_TEST

START_TEST(data_of_foreign_tensor)
{
    known_file k = make_known_file(640);
    vh_st_file *a = parse_ok(k.image, k.size), *b = parse_ok(k.image, k.size);
    const void *data = (const void *)1;
    vh_error err;
    ck_assert_int_eq(vh_st_data(a, vh_st_find(b, "w.u8"), &data, &err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(data);
    vh_st_close(a);
    vh_st_close(b);
    free(k.image);
}
END_TEST

/* The dtype table against the format's element widths (safetensors README / tensor.rs). */
START_TEST(dtype_table)
{
    static const struct { const char *name; uint32_t bits; } spec[] = {
        {"BOOL", 8}, {"U8", 8}, {"I8", 8}, {"F8_E5M2", 8}, {"F8_E4M3", 8}, {"F8_E8M0", 8},
        {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8}, {"F4", 4}, {"F6_E2M3", 6}, {"F6_E3M2", 6},
        {"I16", 16}, {"U16", 16}, {"F16", 16}, {"BF16", 16}, {"I32", 32}, {"U32", 32},
        {"F32", 32}, {"C64", 64}, {"F64", 64}, {"I64", 64}, {"U64", 64},
    };
    ck_assert_int_eq(sizeof spec / sizeof *spec, VH_ST_DTYPE_COUNT);
    for (size_t i = 0; i < sizeof spec / sizeof *spec; i++) {
        vh_st_dtype d;
        ck_assert_msg(vh_st_dtype_from_name(spec[i].name, &d), "%s unknown", spec[i].name);
        ck_assert_str_eq(vh_st_dtype_name(d), spec[i].name);
        ck_assert_uint_eq(vh_st_dtype_bits(d), spec[i].bits);
        ck_assert_uint_eq(vh_st_dtype_size(d), spec[i].bits % 8 ? 0 : spec[i].bits / 8);
    }
    vh_st_dtype d;
    ck_assert(!vh_st_dtype_from_name("F8", &d));
    ck_assert(!vh_st_dtype_from_name("", &d));
    ck_assert_str_eq(vh_st_dtype_name(VH_ST_DTYPE_COUNT), "?");
    /* Sub-byte dtypes whose bits make whole bytes are accepted. */
    const char *header = "{\"q\": {\"dtype\": \"F4\", \"shape\": [2, 2], \"data_offsets\": [0, 2]},"
                         " \"r\": {\"dtype\": \"F6_E3M2\", \"shape\": [4], \"data_offsets\": [2, 5]}}";
    uint8_t bytes[5] = {0x12, 0x34, 1, 2, 3};
    size_t size;
    uint8_t *image = build_image(header, strlen(header), bytes, 5, &size);
    vh_st_file *f = parse_ok(image, size);
    ck_assert_uint_eq(vh_st_find(f, "r")->nbytes, 3);
    ck_assert_int_eq(memcmp(data_of(f, "q"), bytes, 2), 0);
    vh_st_close(f);
    free(image);
}
END_TEST

/* ------------------------------------------------------------------------------------------------
 * Files on disk.
 */

START_TEST(mmap_real_file)
{
    known_file k = make_known_file(637); /* misaligned on disk: copies out of a mapping */
    char *path = vh_test_write_temp(k.image, k.size, ".safetensors");
    vh_st_file *f = NULL;
    vh_error err;
    vh_status status = vh_st_open(path, &f, &err);
    ck_assert_msg(status == VH_OK, "%s", err.message);
    check_known_values(f);
    ck_assert_str_eq(vh_st_path(f), path);
    ck_assert_uint_eq(vh_st_file_size(f), k.size);
    vh_st_prefetch(f, vh_st_find(f, "w.f32"));
    vh_st_close(f);
    unlink(path);
    free(path);
    free(k.image);

    k = make_known_file(640); /* aligned: pointers into the mapping */
    path = vh_test_write_temp(k.image, k.size, ".safetensors");
    ck_assert_int_eq(vh_st_open(path, &f, &err), VH_OK);
    check_known_values(f);
    vh_st_close(f);
    unlink(path);
    free(path);
    free(k.image);
}
END_TEST

START_TEST(open_errors)
{
    vh_st_file *f = (vh_st_file *)1;
    vh_error err;
    ck_assert_int_eq(vh_st_open("/nonexistent/x.safetensors", &f, &err), VH_ERR_IO);
    ck_assert_ptr_null(f);
    ck_assert_msg(strstr(err.message, "/nonexistent/x.safetensors") &&
                  strstr(err.message, strerror(ENOENT)), "%s", err.message);

    char *dir = vh_test_make_temp_dir();
    ck_assert_int_eq(vh_st_open(dir, &f, &err), VH_ERR_IO);
    ck_assert_msg(strstr(err.message, "is a directory"), "%s", err.message);
    vh_test_remove_tree(dir);
    free(dir);

    char *empty = vh_test_write_temp("", 0, ".safetensors");
    ck_assert_int_eq(vh_st_open(empty, &f, &err), VH_ERR_IO);
    ck_assert_msg(strstr(err.message, "is empty"), "%s", err.message);
    unlink(empty);
    free(empty);

    /* A broken file on disk: BAD_MODEL naming the path. */
    char *broken = vh_test_write_temp("\x02\0\0\0\0\0\0\0{", 9, ".safetensors");
    ck_assert_int_eq(vh_st_open(broken, &f, &err), VH_ERR_BAD_MODEL);
    ck_assert_msg(strstr(err.message, broken) == err.message, "%s", err.message);
    ck_assert_ptr_null(f);
    unlink(broken);
    free(broken);

    ck_assert_int_eq(vh_st_open("/dev/null", &f, &err), VH_ERR_IO);
}
END_TEST

/* The fixture written by make_safetensors_fixture.py, against the values it recorded. */
START_TEST(spec_fixture)
{
    char *path = vh_test_fixture_path("safetensors/spec_small.safetensors");
    char *expected_path = vh_test_fixture_path("safetensors/spec_small.expected.json");
    json_error_t jerr;
    json_t *expected = json_load_file(expected_path, 0, &jerr);
    ck_assert_msg(expected != NULL, "%s: %s", expected_path, jerr.text);
    vh_st_file *f = NULL;
    vh_error err;
    ck_assert_msg(vh_st_open(path, &f, &err) == VH_OK, "%s", err.message);

    json_t *meta = json_object_get(expected, "metadata");
    const char *key;
    json_t *value;
    json_object_foreach(meta, key, value)
        ck_assert_str_eq(vh_st_metadata(f, key), json_string_value(value));

    json_t *tensors = json_object_get(expected, "tensors");
    ck_assert_uint_eq(vh_st_count(f), json_object_size(tensors));
    json_object_foreach(tensors, key, value) {
        const vh_st_tensor *t = vh_st_find(f, key);
        ck_assert_msg(t != NULL, "%s missing", key);
        ck_assert_str_eq(vh_st_dtype_name(t->dtype),
                         json_string_value(json_object_get(value, "dtype")));
        json_t *shape = json_object_get(value, "shape");
        ck_assert_uint_eq(t->ndim, json_array_size(shape));
        for (size_t d = 0; d < t->ndim; d++)
            ck_assert_uint_eq(t->shape[d], json_integer_value(json_array_get(shape, d)));
        json_t *values = json_object_get(value, "values");
        ck_assert_uint_eq(t->nelements, json_array_size(values));
        const void *data = data_of(f, key);
        for (size_t i = 0; i < t->nelements; i++) {
            json_t *v = json_array_get(values, i);
            double want = json_number_value(v);
            double got;
            switch (t->dtype) {
            case VH_ST_F32: got = ((const float *)data)[i]; break;
            case VH_ST_F64: got = ((const double *)data)[i]; break;
            case VH_ST_BF16: got = vh_bf16_to_f32(((const uint16_t *)data)[i]); break;
            case VH_ST_F16: got = vh_f16_to_f32(((const uint16_t *)data)[i]); break;
            case VH_ST_I64:
                ck_assert_int_eq(((const int64_t *)data)[i], json_integer_value(v));
                continue;
            case VH_ST_U64:
                ck_assert_uint_eq(((const uint64_t *)data)[i], (uint64_t)json_integer_value(v));
                continue;
            case VH_ST_I32: got = ((const int32_t *)data)[i]; break;
            case VH_ST_I16: got = ((const int16_t *)data)[i]; break;
            case VH_ST_I8: got = ((const int8_t *)data)[i]; break;
            case VH_ST_U8:
            case VH_ST_BOOL: got = ((const uint8_t *)data)[i]; break;
            default: ck_abort_msg("dtype %s not handled", vh_st_dtype_name(t->dtype));
            }
            ck_assert_msg(got == want, "%s[%zu]: %.17g != %.17g", key, i, got, want);
        }
    }
    vh_st_close(f);
    json_decref(expected);
    free(path);
    free(expected_path);
}
END_TEST

static Suite *safetensors_suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *bad = tcase_create("defects");
    tcase_add_test(bad, truncated_before_length);
    tcase_add_test(bad, length_past_end);
    tcase_add_test(bad, huge_header);
    tcase_add_test(bad, header_not_json);
    tcase_add_test(bad, header_not_object);
    tcase_add_test(bad, header_bad_padding);
    tcase_add_test(bad, header_not_utf8);
    tcase_add_test(bad, entry_not_object);
    tcase_add_test(bad, missing_field);
    tcase_add_test(bad, extra_field);
    tcase_add_test(bad, unknown_dtype);
    tcase_add_test(bad, bad_shape_values);
    tcase_add_test(bad, bad_offset_values);
    tcase_add_test(bad, shape_product_overflow);
    tcase_add_test(bad, offset_past_buffer);
    tcase_add_test(bad, begin_after_end);
    tcase_add_test(bad, nbytes_mismatch);
    tcase_add_test(bad, overlapping_ranges);
    tcase_add_test(bad, gap_between_tensors);
    tcase_add_test(bad, not_starting_at_zero);
    tcase_add_test(bad, trailing_bytes);
    tcase_add_test(bad, duplicate_names);
    tcase_add_test(bad, metadata_not_strings);
    suite_add_tcase(s, bad);

    TCase *good = tcase_create("valid");
    tcase_set_timeout(good, 30);
    tcase_add_test(good, zero_tensors);
    tcase_add_test(good, zero_size_tensors);
    tcase_add_test(good, valid_multi_dtype);
    tcase_add_test(good, misaligned_header_length);
    tcase_add_test(good, misaligned_buffer_start);
    tcase_add_test(good, aligned_copy_thread_safe);
    tcase_add_test(good, data_of_foreign_tensor);
    tcase_add_test(good, dtype_table);
    tcase_add_test(good, mmap_real_file);
    tcase_add_test(good, open_errors);
    tcase_add_test(good, spec_fixture);
    suite_add_tcase(s, good);
    return s;
}

int main(void)
{
    return vh_test_run_suite(safetensors_suite());
}
