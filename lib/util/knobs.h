/*
 * The VH_* environment variables the core reads: all of them here, nowhere else in lib/ (the test
 * knob_registry checks it; doc/knobs.md lists them with the plugins' and the tools'). Each accessor
 * reads its variable with secure_getenv (ignored in set-uid programs) when it is called, not once a
 * process: a session takes its settings when it is created, and a test may change them between two.
 */
#ifndef VH_UTIL_KNOBS_H
#define VH_UTIL_KNOBS_H

#include "util/error.h"

/* VH_BACKEND_PATH: colon-separated folders searched for plugins after the session's plugin_path
 * and before the library's own folders. NULL when unset. */
const char *vh_knob_backend_path(void);

/* VH_CACHE_DIR: the folder of the split-cost cache, "off" for none. NULL when unset (the cache
 * then lives under XDG_CACHE_HOME or HOME). */
const char *vh_knob_cache_dir(void);

/* VH_TRACE: the trace file of a session whose trace_path is NULL. NULL when unset. */
const char *vh_knob_trace_path(void);

/* VH_MINDDRIVE_ROUNDS: *sequential = 1 for "sequential" (MindDrive's decision and action rounds as
 * two passes), 0 when unset, empty or "packed" (two segments of one pass, the default). Any other
 * value: VH_ERR_INVALID_ARGUMENT naming the two, *sequential left 0. */
vh_status vh_knob_minddrive_sequential(int *sequential, vh_error *err);

#endif
