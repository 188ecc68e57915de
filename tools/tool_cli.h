/* What the vlahybrid command-line tools do alike: --version, and telling an unknown option from a
 * known one that lacks its value (so "--jsn" is "unknown option --jsn", not "needs a value").
 * Header-only, for vh-run, vh-bench, vh-serve and vh-synth-checkpoint. */
#ifndef VH_TOOLS_TOOL_CLI_H
#define VH_TOOLS_TOOL_CLI_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vlahybrid/vlahybrid.h"

/* "vh-run (vlahybrid 0.3.0)": the version of the library loaded, which is what runs. */
static inline void vh_tool_print_version(FILE *out, const char *tool)
{
    fprintf(out, "%s (vlahybrid %s)\n", tool, vh_version());
}

/* 1 when `flag` is one of the NULL-terminated `flags`. */
static inline int vh_tool_flag_in(const char *flag, const char *const *flags)
{
    for (; *flags; flags++)
        if (!strcmp(flag, *flags)) return 1;
    return 0;
}

/* Option argv[i] takes a value: 0 when it is one of `flags` and a value follows it; -1 after saying
 * why: "unknown option X" when it is not in `flags`, "X needs a value" when nothing follows. */
static inline int vh_tool_check_option(const char *tool, int argc, char **argv, int i, const char *const *flags)
{
    if (!vh_tool_flag_in(argv[i], flags)) {
        fprintf(stderr, "%s: unknown option %s (--help lists them)\n", tool, argv[i]);
        return -1;
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value\n", tool, argv[i]);
        return -1;
    }
    return 0;
}

/* A whole number in [lo, hi] from `value`, the argument of `flag`: 0, or -1 after saying what it
 * needs. */
static inline int vh_tool_parse_long(const char *tool, const char *flag, const char *value, long lo, long hi,
                                     long *out)
{
    char *end;
    long n = strtol(value, &end, 10);
    if (*end || end == value || n < lo || n > hi) {
        fprintf(stderr, "%s: %s needs a number in [%ld, %ld], not \"%s\"\n", tool, flag, lo, hi, value);
        return -1;
    }
    *out = n;
    return 0;
}

#endif
