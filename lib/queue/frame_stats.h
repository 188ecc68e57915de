/*
 * What the session's statistics count about frames (vh_session_stats): how many were accepted,
 * refused and answered with each outcome, and the latencies of those answered with an action.
 * The frame queue records into it under its lock as each frame is answered.
 */
#ifndef VH_QUEUE_FRAME_STATS_H
#define VH_QUEUE_FRAME_STATS_H

#include "util/latency_window.h"

typedef struct vh_frame_stats {
    uint64_t submitted, rejected;
    uint64_t completed, dropped, expired, cancelled, failed;
    vh_latency_window end_to_end, queue_wait, compute, vision, prefill, decode;
} vh_frame_stats;

/* Count the answer in `a` (status and, for an action, its timings). */
void vh_frame_stats_answered(vh_frame_stats *s, const vh_action *a);

/* The counts and latency summaries into *out (the frame fields of vh_session_stats). */
void vh_frame_stats_summary(const vh_frame_stats *s, vh_session_stats *out);

#endif
