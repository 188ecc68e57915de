#include "util/knobs.h"

#include <stdlib.h>
#include <string.h>

/* One row per knob: its variable, what it does, and the section that explains it ("FILE: HEADING").
 * doc/knobs.md lists every knob of the library, the plugins and the tools; the test knob_registry
 * checks that both agree with this table and that each section names its knob. */
typedef enum { KNOB_BACKEND_PATH, KNOB_CACHE_DIR, KNOB_TRACE, KNOB_MINDDRIVE_ROUNDS, KNOB_COUNT } knob_id;

static const struct knob {
    const char *name, *effect, *doc;
} knobs[KNOB_COUNT] = {
    [KNOB_BACKEND_PATH] = {"VH_BACKEND_PATH", "folders searched for plugins before the library's own",
                           "doc/backend-abi.md: 1. Overview"},
    [KNOB_CACHE_DIR] = {"VH_CACHE_DIR", "folder of the split-cost cache; off: no cache",
                        "doc/architecture.md: Stages and the pipeline (lib/plan/, lib/pipeline/)"},
    [KNOB_TRACE] = {"VH_TRACE", "trace file when the session's trace_path is NULL",
                    "doc/architecture.md: Stages and the pipeline (lib/plan/, lib/pipeline/)"},
    [KNOB_MINDDRIVE_ROUNDS] = {"VH_MINDDRIVE_ROUNDS", "sequential: MindDrive's two rounds as two passes (the "
                               "measured peer)", "doc/performance.md: MindDrive's decision half on the H200 "
                               "(issue 19), 2026-12-02"},
};

static const char *knob_value(knob_id id)
{
    return secure_getenv(knobs[id].name);
}

const char *vh_knob_backend_path(void)
{
    return knob_value(KNOB_BACKEND_PATH);
}

const char *vh_knob_cache_dir(void)
{
    return knob_value(KNOB_CACHE_DIR);
}

const char *vh_knob_trace_path(void)
{
    return knob_value(KNOB_TRACE);
}

vh_status vh_knob_minddrive_sequential(int *sequential, vh_error *err)
{
    const char *rounds = knob_value(KNOB_MINDDRIVE_ROUNDS);
    *sequential = rounds && !strcmp(rounds, "sequential");
    if (rounds && *rounds && !*sequential && strcmp(rounds, "packed"))
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "VH_MINDDRIVE_ROUNDS='%.32s': 'packed' (the default: both "
                            "rounds as two segments of one pass) or 'sequential' (two passes)", rounds);
    return VH_OK;
}
