/* The options vh-run and vh-bench share for placing a model on stages:
 *   --split N  --mode serial|pipeline|packed  --gpu-mem-budget BYTES  --zone N  --trace PATH
 * parsed into the session parameters. */
#ifndef VH_TOOLS_STAGE_OPTIONS_H
#define VH_TOOLS_STAGE_OPTIONS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vlahybrid/vlahybrid.h"

#define VH_STAGE_OPTIONS_USAGE                                                                          \
    "  --split N             with two backends: LLM blocks on the first (default: chosen at start)\n"    \
    "  --mode M              serial | pipeline (default): frames overlap across the two stages |\n"     \
    "                        packed: one pass carries a new frame's prefill and a decode row of each\n" \
    "                        frame in flight\n"                                                          \
    "  --gpu-mem-budget B    bytes the GPU stage may hold (suffixes K, M, G: powers of 1000); with two\n" \
    "                        backends and no --split, the split is the most LLM blocks that fit\n"      \
    "  --zone N              LLM blocks on each side of the split held by both stages (default 0 with\n" \
    "                        --split, else 2); the split follows measured stage times inside it\n"      \
    "  --trace PATH          write a Chrome/Perfetto trace of the stages' work (also: VH_TRACE=PATH)\n"    \
    "  --frames-in-flight K  pipeline, packed: frames in flight at once, each with its own KV slot\n"   \
    "                        (1..32; default: pipeline the number of stages, packed the action\n"   \
    "                        length; packed with more takes several new frames a pass)\n"

/* The flags vh_parse_stage_option takes (each with a value), for vh_tool_option_value. */
#define VH_STAGE_OPTION_FLAGS "--split", "--zone", "--frames-in-flight", "--mode", "--gpu-mem-budget", "--trace"

/* "8G", "8000000000", "1.5G" -> bytes; -1 when malformed. */
static inline int vh_parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    double v = strtod(s, &end);
    double scale = 1;
    if (*end == 'K' || *end == 'k') scale = 1e3, end++;
    else if (*end == 'M' || *end == 'm') scale = 1e6, end++;
    else if (*end == 'G' || *end == 'g') scale = 1e9, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (end == s || *end || !(v >= 0) || v * scale > 1.8e19) return -1;
    *out = (uint64_t)(v * scale);
    return 0;
}

/* 1: `flag` was one of the stage options and `value` was taken; 0: not ours; -1: a bad value. */
static inline int vh_parse_stage_option(const char *tool, const char *flag, const char *value, vh_session_params *p)
{
    char *end;
    if (!strcmp(flag, "--split") || !strcmp(flag, "--zone")) {
        long n = strtol(value, &end, 10);
        if (*end || end == value || n < 0 || n > 4096) {
            fprintf(stderr, "%s: %s needs a number in [0, 4096]\n", tool, flag);
            return -1;
        }
        if (flag[2] == 's') p->llm_split = (int32_t)n;
        else p->split_zone = (int32_t)n;
        return 1;
    }
    if (!strcmp(flag, "--frames-in-flight")) {
        long n = strtol(value, &end, 10);
        if (*end || end == value || n < 1 || n > 32) {
            fprintf(stderr, "%s: %s needs a number in [1, 32]\n", tool, flag);
            return -1;
        }
        p->frames_in_flight = (uint32_t)n;
        return 1;
    }
    if (!strcmp(flag, "--mode")) {
        if (!strcmp(value, "serial")) p->execution_mode = VH_EXECUTION_SERIAL;
        else if (!strcmp(value, "pipeline")) p->execution_mode = VH_EXECUTION_PIPELINE;
        else if (!strcmp(value, "packed")) p->execution_mode = VH_EXECUTION_PACKED;
        else {
            fprintf(stderr, "%s: --mode is 'serial', 'pipeline' or 'packed'\n", tool);
            return -1;
        }
        return 1;
    }
    if (!strcmp(flag, "--gpu-mem-budget")) {
        if (vh_parse_bytes(value, &p->gpu_memory_budget)) {
            fprintf(stderr, "%s: --gpu-mem-budget needs a byte count such as 8000000000 or 8G\n", tool);
            return -1;
        }
        return 1;
    }
    if (!strcmp(flag, "--trace")) {
        p->trace_path = value;
        return 1;
    }
    return 0;
}

#endif
