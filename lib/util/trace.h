/*
 * A timeline of the session's work in Chrome's trace-event JSON (chrome://tracing, Perfetto): one
 * track per stage thread, one span per piece of work (vision, prefill, decode step of a frame),
 * instant marks for the scheduler's decisions. Spans are kept in memory (up to a cap) and written
 * when the trace is closed, so recording costs a lock and a copy per span.
 *
 * Thread-safe.
 */
#ifndef VH_UTIL_TRACE_H
#define VH_UTIL_TRACE_H

#include <stdint.h>

#include "util/error.h"

typedef struct vh_trace vh_trace;

/* Start a trace for `path`: refuses a path that exists and is not a regular file, and creates a
 * temporary file beside it now (so a folder that cannot be written fails at session create);
 * `path` itself is replaced only by a successful close with `keep`. */
vh_status vh_trace_open(const char *path, vh_trace **trace, vh_error *err);
/* Name track `track` ("stage 0: cuda"). */
void vh_trace_name_track(vh_trace *t, uint32_t track, const char *name);
/* A span of work on a track: [start_ns, end_ns) on the library's monotonic clock. */
void vh_trace_span(vh_trace *t, uint32_t track, const char *name, uint64_t frame_id, int64_t start_ns, int64_t end_ns);
/* A moment ("split 12 -> 14"). */
void vh_trace_instant(vh_trace *t, uint32_t track, const char *name, int64_t at_ns);
/* Drop every event recorded so far (the session's warm-up; track names stay). NULL is allowed. */
void vh_trace_forget(vh_trace *t);
/* keep: write the JSON to the temporary file and rename it to the path; else remove the
 * temporary file, leaving the path as it was (a session whose create failed). Frees the trace.
 * Returns non-zero when writing failed (the message goes to *err; the path is left as it was). */
vh_status vh_trace_close(vh_trace *t, int keep, vh_error *err);

#endif
