#include "json_line.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

char *vh_json_format_double(double d, char out[VH_JSON_NUMBER_SIZE])
{
    if (!isfinite(d)) {
        strcpy(out, "null");
        return out;
    }
    int digits = 1;
    for (; digits < 17; digits++) { /* 17 significant digits always round-trip */
        snprintf(out, VH_JSON_NUMBER_SIZE, "%.*g", digits, d);
        if (strtod(out, NULL) == d) break;
    }
    /* Below 1e16, whole digits as digits (100.0, not 1e+02), as Python's repr prints them; the
     * same value, only its zeros written out. */
    const int exponent = d == 0 ? 0 : (int)floor(log10(fabs(d)));
    if (exponent >= digits && exponent < 16) digits = exponent + 1;
    snprintf(out, VH_JSON_NUMBER_SIZE, "%.*g", digits, d);
    if (!strpbrk(out, ".eE")) strcat(out, ".0"); /* a real stays a real for the reader */
    return out;
}

static int write_value(FILE *out, const json_t *v)
{
    char number[VH_JSON_NUMBER_SIZE];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *member;
        int first = 1;
        if (fputc('{', out) == EOF) return -1;
        json_object_foreach((json_t *)v, key, member) {
            json_t *k = json_string(key);
            char *quoted = k ? json_dumps(k, JSON_ENCODE_ANY) : NULL;
            json_decref(k);
            const int bad = !quoted || fprintf(out, "%s%s:", first ? "" : ",", quoted) < 0 || write_value(out, member);
            free(quoted);
            if (bad) return -1;
            first = 0;
        }
        return fputc('}', out) == EOF ? -1 : 0;
    }
    case JSON_ARRAY:
        if (fputc('[', out) == EOF) return -1;
        for (size_t i = 0; i < json_array_size(v); i++)
            if ((i && fputc(',', out) == EOF) || write_value(out, json_array_get(v, i))) return -1;
        return fputc(']', out) == EOF ? -1 : 0;
    case JSON_STRING: {
        char *quoted = json_dumps(v, JSON_ENCODE_ANY);
        const int bad = !quoted || fputs(quoted, out) == EOF;
        free(quoted);
        return bad ? -1 : 0;
    }
    case JSON_INTEGER:
        return fprintf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(v)) < 0 ? -1 : 0;
    case JSON_REAL:
        return fputs(vh_json_format_double(json_real_value(v), number), out) == EOF ? -1 : 0;
    case JSON_TRUE:
        return fputs("true", out) == EOF ? -1 : 0;
    case JSON_FALSE:
        return fputs("false", out) == EOF ? -1 : 0;
    case JSON_NULL:
    default:
        return fputs("null", out) == EOF ? -1 : 0;
    }
}

char *vh_json_dumps(const json_t *value)
{
    char *text = NULL;
    size_t size = 0;
    FILE *mem = open_memstream(&text, &size);
    if (!mem) return NULL;
    const int bad = write_value(mem, value);
    if (fclose(mem) || bad) {
        free(text);
        return NULL;
    }
    return text;
}

int vh_json_print_line(FILE *out, const json_t *value)
{
    char *text = vh_json_dumps(value);
    if (!text) return -1;
    const int bad = fprintf(out, "%s\n", text) < 0;
    free(text);
    return bad ? -1 : 0;
}

int vh_json_lines_each(FILE *f, size_t flags, vh_json_line_fn fn, void *user, long *bad_line, json_error_t *bad)
{
    char *text = NULL;
    size_t cap = 0;
    long line = 0;
    int rc = 0;
    ssize_t len;
    while (rc == 0 && (len = getline(&text, &cap, f)) > 0) {
        line++;
        if (strspn(text, " \t\r\n") == (size_t)len) continue;
        json_t *obj = json_loadb(text, (size_t)len, flags, bad); /* the whole line: a NUL in it is an error */
        if (!obj) {
            *bad_line = line;
            rc = -1;
        } else {
            rc = fn(obj, line, user);
            json_decref(obj);
        }
    }
    free(text);
    return rc;
}
