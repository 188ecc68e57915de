/* JSON as the tools print it: numbers in the shortest form that reads back as the same double
 * (41.430175, not jansson's %.17g 41.430174999999998), one object a line. vh-run, vh-bench and
 * the sweep's lines print through here, so every tool's JSON reads the same. */
#ifndef VH_TOOLS_JSON_LINE_H
#define VH_TOOLS_JSON_LINE_H

#include <jansson.h>
#include <stdio.h>

/* Enough for any double in its shortest round-trip form ("-2.2250738585072014e-308" and ".0"). */
#define VH_JSON_NUMBER_SIZE 32

/* The shortest "%.{1..17}g" of d that strtod reads back as d (below 1e16 with its whole digits
 * written out: 100.0, not 1e+02), with ".0" appended when it would read as an integer; "null" for
 * a NaN or an infinity (JSON has neither). Returns out. */
char *vh_json_format_double(double d, char out[VH_JSON_NUMBER_SIZE]);

/* `value` compactly, as json_dumps(JSON_COMPACT) would but with vh_json_format_double's numbers,
 * then a newline; objects in their insertion order. 0, or -1 when writing failed. */
int vh_json_print_line(FILE *out, const json_t *value);

/* The same into a malloc'd string (without the newline), or NULL. */
char *vh_json_dumps(const json_t *value);

/* JSON Lines read back: each line of f that is not blank parsed (json_loads with flags) and handed
 * to fn with its number (from 1); 0 when fn returned 0 for every line; fn's value where it first
 * returns non-zero; -1 where a line is not JSON (fn not called): its number in *bad_line and
 * jansson's error in *bad. */
typedef int (*vh_json_line_fn)(json_t *obj, long line, void *user);
int vh_json_lines_each(FILE *f, size_t flags, vh_json_line_fn fn, void *user, long *bad_line, json_error_t *bad);

#endif
