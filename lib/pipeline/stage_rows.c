#include "pipeline/stage_rows.h"

#include <stdio.h>

#include "util/clock.h"

vh_status vh_stage_run_range(const vh_stage *s, const vh_batch *batch, uint32_t first, uint32_t end, vh_error *err)
{
    if (first == end) return VH_OK; /* an empty range: a model without vision blocks (Orion from tokens) */
    const vh_backend_iface *be = s->plugin->iface;
    char why[512] = "";
    vh_status st = be->executor_run(s->executor, batch, first, end - first, why, sizeof why);
    if (st) return vh_error_set(err, st, "backend '%s', blocks %u..%u: %s", be->name, first, end - 1, why);
    return VH_OK;
}

static void span(const vh_rows_job *r, uint32_t stage, const char *prefix, int64_t t0, int64_t t1)
{
    if (!r->trace) return;
    char name[64];
    snprintf(name, sizeof name, "%s%s", prefix, r->name);
    vh_trace_span(r->trace, stage, name, r->frame_id, t0, t1);
}

vh_status vh_stage_run_rows(const vh_rows_job *r, uint32_t stage, const vh_batch *batch, float *hidden,
                            uint32_t first, uint32_t end, vh_rows_timing *t, vh_error *err)
{
    const vh_plan *plan = r->plan;
    const vh_stage *s = &plan->stages[stage];
    const vh_backend_iface *be = s->plugin->iface;
    const int last = stage + 1 == plan->n_stages;
    char why[512] = "";
    vh_status st;
    int64_t t0 = vh_now_ns();

    /* the rows cross by copy (write_hidden / read_hidden), or the executor works on them in place
     * in the caller's buffer (bind_hidden: a CPU stage takes a prefill's megabytes without a copy) */
    vh_status (*bind)(vh_executor *, float *, uint32_t, char *, size_t) =
        plan->n_stages > 1 && !r->copy_hidden ? VH_PLUGIN_OPTIONAL(s->plugin, bind_hidden) : NULL;
    if (bind) {
        if ((st = bind(s->executor, hidden, batch->n_rows, why, sizeof why)))
            return vh_error_set(err, st, "backend '%s': %s", be->name, why);
    } else if (stage > 0) {
        if ((st = be->write_hidden(s->executor, hidden, batch->n_rows, why, sizeof why)))
            return vh_error_set(err, st, "backend '%s': %s", be->name, why);
        int64_t t1 = vh_now_ns();
        t->handoff_ns += t1 - t0;
        span(r, stage, "in: ", t0, t1);
        t0 = t1;
    }
    /* with several stages the last runs the head as its own call, so the split scheduler sees its
     * cost apart (one stage: one call, which keeps a GPU's decode step one graph) */
    const int head_apart = last && plan->n_stages > 1;
    const uint32_t body_end = head_apart ? r->model->head_block : end;
    if (first < body_end && (st = vh_stage_run_range(s, batch, first, body_end, err))) return st;
    int64_t t1 = vh_now_ns();
    if (head_apart) {
        if (bind && (st = bind(s->executor, hidden, batch->n_rows, why, sizeof why))) /* one run each */
            return vh_error_set(err, st, "backend '%s': %s", be->name, why);
        if ((st = vh_stage_run_range(s, batch, r->model->head_block, end, err))) return st;
        int64_t t2 = vh_now_ns();
        t->head_ns += t2 - t1;
        t1 = t2;
    }
    t->busy_ns += t1 - t0;
    span(r, stage, "", t0, t1);
    if (!last && !bind) {
        if ((st = be->read_hidden(s->executor, hidden, batch->n_rows, why, sizeof why)))
            return vh_error_set(err, st, "backend '%s': %s", be->name, why);
        int64_t t2 = vh_now_ns();
        t->handoff_ns += t2 - t1;
        span(r, stage, "out: ", t1, t2);
    }
    return VH_OK;
}
