#include "npy_file.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "orion_inputs.h"

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

int vh_npy_has_magic(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char head[6];
    const int yes = fread(head, 1, sizeof head, f) == sizeof head && !memcmp(head, npy_magic, sizeof head);
    fclose(f);
    return yes;
}

/* float16 bits to float32, exactly (every float16 is a float32). */
static float half_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | mant << 13; /* inf, NaN (its payload kept) */
    else if (exp) bits = sign | (exp + 112) << 23 | mant << 13;
    else if (!mant) bits = sign;
    else { /* subnormal: mant x 2^-24, exact in float32 */
        const float v = ldexpf((float)mant, -24);
        return sign ? -v : v;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The header's dict literal, as numpy writes it: {'descr': '<f4', 'fortran_order': False,
 * 'shape': (2, 3), } and spaces. A small parser over it: p walks the text. */
typedef struct header_parser {
    const char *p, *end;
} header_parser;

static void skip_spaces(header_parser *h)
{
    while (h->p < h->end && isspace((unsigned char)*h->p)) h->p++;
}

static int take(header_parser *h, char c)
{
    skip_spaces(h);
    if (h->p < h->end && *h->p == c) {
        h->p++;
        return 1;
    }
    return 0;
}

/* A quoted string (' or ") into out. */
static int take_string(header_parser *h, char *out, size_t size)
{
    skip_spaces(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return 0;
    const char quote = *h->p++;
    size_t n = 0;
    while (h->p < h->end && *h->p != quote) {
        if (n + 1 >= size) return 0;
        out[n++] = *h->p++;
    }
    if (h->p >= h->end) return 0;
    h->p++;
    out[n] = '\0';
    return 1;
}

static int take_word(header_parser *h, const char *word)
{
    skip_spaces(h);
    const size_t n = strlen(word);
    if ((size_t)(h->end - h->p) < n || strncmp(h->p, word, n)) return 0;
    h->p += n;
    return 1;
}

/* (d0, d1, ...) with an optional trailing comma; () is a scalar. */
static int take_shape(header_parser *h, vh_npy_array *a)
{
    if (!take(h, '(')) return 0;
    a->ndim = 0;
    for (;;) {
        if (take(h, ')')) return 1;
        skip_spaces(h);
        if (h->p >= h->end || !isdigit((unsigned char)*h->p) || a->ndim == VH_NPY_MAX_DIMS) return 0;
        errno = 0;
        char *stop;
        const unsigned long long d = strtoull(h->p, &stop, 10);
        if (errno || stop > h->end) return 0;
        h->p = stop;
        a->shape[a->ndim++] = d;
        if (!take(h, ',')) return take(h, ')');
    }
}

static int parse_header(const char *text, size_t len, vh_npy_array *a, char *descr, size_t descr_size,
                        int *fortran, char *why, size_t why_size)
{
    header_parser h = {text, text + len};
    int have_descr = 0, have_order = 0, have_shape = 0;
    if (!take(&h, '{')) return snprintf(why, why_size, "its header is not a dict literal"), -1;
    while (!take(&h, '}')) {
        char key[32];
        if (!take_string(&h, key, sizeof key) || !take(&h, ':'))
            return snprintf(why, why_size, "its header is not a dict literal of 'descr', 'fortran_order', 'shape'"), -1;
        if (!strcmp(key, "descr")) {
            if (!take_string(&h, descr, descr_size)) return snprintf(why, why_size, "its 'descr' is not a dtype string"), -1;
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if (take_word(&h, "True")) *fortran = 1;
            else if (take_word(&h, "False")) *fortran = 0;
            else return snprintf(why, why_size, "its 'fortran_order' is neither True nor False"), -1;
            have_order = 1;
        } else if (!strcmp(key, "shape")) {
            if (!take_shape(&h, a))
                return snprintf(why, why_size, "its 'shape' is not a tuple of at most %d sizes", VH_NPY_MAX_DIMS), -1;
            have_shape = 1;
        } else {
            return snprintf(why, why_size, "its header has an unknown key '%s'", key), -1;
        }
        if (!take(&h, ',')) {
            if (!take(&h, '}')) return snprintf(why, why_size, "its header dict is not closed"), -1;
            break;
        }
    }
    skip_spaces(&h);
    if (h.p != h.end) return snprintf(why, why_size, "its header has text after the dict"), -1;
    if (!have_descr || !have_order || !have_shape)
        return snprintf(why, why_size, "its header lacks 'descr', 'fortran_order' or 'shape'"), -1;
    return 0;
}

/* The data's element count, or -1 when it overflows. */
static int element_count(const vh_npy_array *a, size_t itemsize, size_t *count)
{
    uint64_t n = 1;
    for (uint32_t i = 0; i < a->ndim; i++) {
        if (a->shape[i] && n > UINT64_MAX / a->shape[i]) return -1;
        n *= a->shape[i];
    }
    if (n > SIZE_MAX / itemsize / 2) return -1;
    *count = (size_t)n;
    return 0;
}

static void format_shape(const vh_npy_array *a, char *out, size_t size)
{
    size_t n = (size_t)snprintf(out, size, "(");
    for (uint32_t i = 0; i < a->ndim && n < size; i++)
        n += (size_t)snprintf(out + n, size - n, "%s%llu", i ? ", " : "", (unsigned long long)a->shape[i]);
    if (n < size) snprintf(out + n, size - n, a->ndim == 1 ? ",)" : ")");
}

static int read_npy(FILE *f, const char *path, vh_npy_array *a, char *why, size_t why_size)
{
    char what[256];
    unsigned char pre[10];
    if (fread(pre, 1, 8, f) != 8 || memcmp(pre, npy_magic, sizeof npy_magic))
        return snprintf(why, why_size, "%s is not a .npy file (no \\x93NUMPY magic)", path), -1;
    const unsigned major = pre[6], minor = pre[7];
    size_t header_len;
    if (major == 1 && minor == 0) {
        if (fread(pre + 8, 1, 2, f) != 2) return snprintf(why, why_size, "%s: truncated in its header", path), -1;
        header_len = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if ((major == 2 || major == 3) && minor == 0) {
        unsigned char len[4];
        if (fread(len, 1, 4, f) != 4) return snprintf(why, why_size, "%s: truncated in its header", path), -1;
        header_len = (size_t)len[0] | (size_t)len[1] << 8 | (size_t)len[2] << 16 | (size_t)len[3] << 24;
        if (header_len > (1u << 24)) return snprintf(why, why_size, "%s: a header of %zu bytes", path, header_len), -1;
    } else {
        return snprintf(why, why_size, "%s: .npy format version %u.%u; 1.0, 2.0 and 3.0 are read", path, major, minor),
               -1;
    }
    char *header = malloc(header_len + 1);
    if (!header) return snprintf(why, why_size, "%s: out of memory", path), -1;
    if (fread(header, 1, header_len, f) != header_len) {
        free(header);
        return snprintf(why, why_size, "%s: truncated in its header", path), -1;
    }
    header[header_len] = '\0';
    char descr[32];
    int fortran = 0;
    const int parsed = parse_header(header, header_len, a, descr, sizeof descr, &fortran, what, sizeof what);
    free(header);
    if (parsed) return snprintf(why, why_size, "%s: %s", path, what), -1;
    if (descr[0] == '>' && (!strcmp(descr + 1, "f4") || !strcmp(descr + 1, "f2")))
        return snprintf(why, why_size, "%s holds big-endian %s ('%s'); save it little-endian, e.g. "
                        "numpy.save(path, a.astype('<f4'))", path, descr[2] == '4' ? "float32" : "float16", descr), -1;
    if (strcmp(descr, "<f4") && strcmp(descr, "<f2"))
        return snprintf(why, why_size, "%s holds dtype '%s'; float32 ('<f4') or float16 ('<f2') are read: convert it, "
                        "e.g. numpy.save(path, a.astype(numpy.float32))", path, descr), -1;
    if (fortran)
        return snprintf(why, why_size, "%s is in Fortran order (fortran_order True); save it in C order, e.g. "
                        "numpy.save(path, numpy.ascontiguousarray(a))", path), -1;
    a->float16 = descr[2] == '2';
    const size_t itemsize = a->float16 ? 2 : 4;
    if (element_count(a, itemsize, &a->count)) return snprintf(why, why_size, "%s: its shape is too large", path), -1;
    char shape[160];
    format_shape(a, shape, sizeof shape);
    if (a->count == 0) return snprintf(why, why_size, "%s: an empty array, shape %s", path, shape), -1;
    const long data_start = ftell(f);
    long size = -1;
    if (data_start < 0 || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, data_start, SEEK_SET) != 0)
        return snprintf(why, why_size, "%s: cannot tell its size", path), -1;
    const uint64_t have = (uint64_t)(size - data_start), want = (uint64_t)a->count * itemsize;
    if (have != want)
        return snprintf(why, why_size, "%s: %s: shape %s of '%s' needs %llu bytes of data, the file has %llu", path,
                        have < want ? "truncated" : "bytes after the array", shape, descr, (unsigned long long)want,
                        (unsigned long long)have), -1;
    a->data = malloc(a->count * sizeof *a->data);
    void *raw = a->float16 ? malloc(a->count * 2) : a->data;
    if (!a->data || !raw || fread(raw, itemsize, a->count, f) != a->count) {
        if (raw != a->data) free(raw);
        free(a->data);
        a->data = NULL;
        return snprintf(why, why_size, "%s: %s", path, raw ? "read failed" : "out of memory"), -1;
    }
    if (a->float16) { /* little-endian pairs of bytes */
        const unsigned char *b = raw;
        for (size_t i = 0; i < a->count; i++) a->data[i] = half_to_float((uint16_t)(b[2 * i] | b[2 * i + 1] << 8));
        free(raw);
    }
    return 0;
}

int vh_npy_read(const char *path, vh_npy_array *out, char *why, size_t why_size)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(why, why_size, "%s: %s", path, strerror(errno)), -1;
    const int rc = read_npy(f, path, out, why, why_size);
    fclose(f);
    if (rc) memset(out, 0, sizeof *out);
    return rc;
}

static int ends_with(const char *s, const char *tail)
{
    const size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcmp(s + n - m, tail);
}

float *vh_read_float_array(const char *path, const char *what, const uint32_t *dims, uint32_t ndim, char *why,
                           size_t why_size)
{
    size_t want = 1;
    char wanted[128];
    size_t w = 0;
    for (uint32_t i = 0; i < ndim; i++) {
        want *= dims[i];
        w += (size_t)snprintf(wanted + w, sizeof wanted - w, "%s%u", i ? " x " : "", dims[i]);
        if (w >= sizeof wanted) w = sizeof wanted - 1;
    }
    if (!ends_with(path, ".npy") && !vh_npy_has_magic(path)) {
        size_t count = 0;
        char inner[768];
        float *data = vh_read_f32_file(path, want, &count, inner, sizeof inner);
        if (!data) snprintf(why, why_size, "%s (the %s: raw float32 %s, or a .npy file)", inner, what, wanted);
        return data;
    }
    vh_npy_array a;
    char inner[768];
    if (vh_npy_read(path, &a, inner, sizeof inner)) {
        snprintf(why, why_size, "%s (the %s)", inner, what);
        return NULL;
    }
    uint32_t lead = 0; /* leading 1s beyond the dims wanted: a batch of one */
    while (a.ndim - lead > ndim && a.shape[lead] == 1) lead++;
    int same = a.ndim - lead == ndim;
    for (uint32_t i = 0; same && i < ndim; i++) same = a.shape[lead + i] == dims[i];
    if (!same) {
        char shape[160];
        format_shape(&a, shape, sizeof shape);
        snprintf(why, why_size, "%s has shape %s; the %s are %s%s", path, shape, what, wanted,
                 ndim > 1 ? " (C order), optionally with leading 1s" : ", optionally with leading 1s");
        free(a.data);
        return NULL;
    }
    return a.data;
}

int vh_npy_write_f32(const char *path, const float *data, uint64_t rows, uint64_t cols, char *why, size_t why_size)
{
    char header[128];
    int n = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%llu, %llu), }",
                     (unsigned long long)rows, (unsigned long long)cols);
    /* pad with spaces to a multiple of 64 bytes with the 10-byte preamble, ending in a newline */
    while ((10 + n + 1) % 64) header[n++] = ' ';
    header[n++] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f) return snprintf(why, why_size, "%s: %s", path, strerror(errno)), -1;
    const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff), (unsigned char)(n >> 8)};
    int bad = fwrite(pre, 1, sizeof pre, f) != sizeof pre || fwrite(header, 1, (size_t)n, f) != (size_t)n ||
              fwrite(data, sizeof(float), rows * cols, f) != rows * cols; /* little-endian hosts only, as the reader */
    bad |= fclose(f) != 0;
    if (bad) return snprintf(why, why_size, "%s: write failed", path), -1;
    return 0;
}
