#include "queue/frame_stats.h"

void vh_frame_stats_answered(vh_frame_stats *s, const vh_action *a)
{
    switch (a->status) {
    case VH_OK: break;
    case VH_ERR_DROPPED: s->dropped++; return;
    case VH_ERR_EXPIRED: s->expired++; return;
    case VH_ERR_CANCELLED: s->cancelled++; return;
    default: s->failed++; return;
    }
    s->completed++;
    vh_latency_window_add(&s->end_to_end, a->finished_ns - a->submitted_ns);
    vh_latency_window_add(&s->queue_wait, a->started_ns - a->submitted_ns);
    vh_latency_window_add(&s->compute, a->finished_ns - a->started_ns);
    vh_latency_window_add(&s->vision, a->vision_ns);
    vh_latency_window_add(&s->prefill, a->prefill_ns);
    vh_latency_window_add(&s->decode, a->decode_ns);
}

void vh_frame_stats_summary(const vh_frame_stats *s, vh_session_stats *out)
{
    out->submitted = s->submitted;
    out->rejected = s->rejected;
    out->completed = s->completed;
    out->dropped = s->dropped;
    out->expired = s->expired;
    out->cancelled = s->cancelled;
    out->failed = s->failed;
    vh_latency_window_summary(&s->end_to_end, &out->end_to_end);
    vh_latency_window_summary(&s->queue_wait, &out->queue_wait);
    vh_latency_window_summary(&s->compute, &out->compute);
    vh_latency_window_summary(&s->vision, &out->vision);
    vh_latency_window_summary(&s->prefill, &out->prefill);
    vh_latency_window_summary(&s->decode, &out->decode);
}
