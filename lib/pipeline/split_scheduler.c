#include "pipeline/split_scheduler.h"

#include <stdio.h>
#include <string.h>

#include "util/clock.h"

#define SMOOTHING 0.25      /* weight of the newest frame in the moving averages */
#define MIN_GAIN 0.03       /* move the cut only for a predicted gain above this */

void vh_split_scheduler_init(vh_split_scheduler *s, const vh_plan *plan, uint32_t action_tokens, vh_trace *trace)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    s->n_layers = plan->n_llm_layers;
    s->lo = plan->split_min;
    s->hi = plan->split_max;
    s->split = plan->llm_split;
    s->trace = trace;
    s->decode_passes = action_tokens > 1 ? action_tokens - 1 : 0;
    /* the planner's measurements (per frame, prefill + decode together) seed the averages: the
     * decode share is unknown until frames run, so all of it is booked as prefill */
    for (int i = 0; i < 2; i++) {
        s->fixed_ns[i] = plan->costs.fixed_ns[i];
        s->prefill_block_ns[i] = plan->costs.block_ns[i];
    }
}

void vh_split_scheduler_destroy(vh_split_scheduler *s)
{
    pthread_mutex_destroy(&s->lock);
}

static double ewma(double old, double sample)
{
    return old > 0 ? old + SMOOTHING * (sample - old) : sample;
}

/* The slower stage's predicted time per frame with cut `split`. */
static double predicted_ns(const vh_split_scheduler *s, uint32_t split, double *t0, double *t1)
{
    const double k = s->decode_passes;
    *t0 = s->fixed_ns[0] + split * (s->prefill_block_ns[0] + k * s->decode_block_ns[0]);
    *t1 = s->fixed_ns[1] + (s->n_layers - split) * (s->prefill_block_ns[1] + k * s->decode_block_ns[1]);
    return *t0 > *t1 ? *t0 : *t1;
}

uint32_t vh_split_scheduler_choose(vh_split_scheduler *s, const uint32_t backlog[2])
{
    pthread_mutex_lock(&s->lock);
    uint32_t split = s->split;
    /* a stage whose block cost is unknown (no frame ran a block there yet) gives no basis */
    if (s->lo < s->hi && s->prefill_block_ns[0] > 0 && s->prefill_block_ns[1] > 0) {
        double t0, t1, now = predicted_ns(s, s->split, &t0, &t1), best = now;
        uint32_t best_split = s->split;
        for (uint32_t c = s->lo; c <= s->hi; c++) {
            double a, b, p = predicted_ns(s, c, &a, &b);
            if (p < best) {
                best = p;
                best_split = c;
            }
        }
        if (best < now * (1.0 - MIN_GAIN)) {
            split = best_split;
        } else if (backlog[1] > backlog[0] + 1 && s->split < s->hi) { /* stage 1 falling behind */
            split = s->split + 1;
        } else if (backlog[0] > backlog[1] + 1 && s->split > s->lo) {
            split = s->split - 1;
        }
    }
    if (split != s->split) {
        if (s->trace) {
            char what[48];
            snprintf(what, sizeof what, "split %u -> %u", s->split, split);
            vh_trace_instant(s->trace, 0, what, vh_now_ns());
        }
        s->split = split;
        s->changes++;
    }
    pthread_mutex_unlock(&s->lock);
    return split;
}

void vh_split_scheduler_observe(vh_split_scheduler *s, const vh_frame_job *job)
{
    const uint32_t blocks[2] = {job->llm_split, s->n_layers - job->llm_split};
    const uint32_t decode_passes = job->n_passes > 0 ? job->n_passes - 1 : 0;
    pthread_mutex_lock(&s->lock);
    s->decode_passes = ewma(s->decode_passes, decode_passes);
    s->fixed_ns[0] = ewma(s->fixed_ns[0], (double)job->vision_ns);
    s->fixed_ns[1] = ewma(s->fixed_ns[1], (double)(job->head_ns[0] + job->head_ns[1]));
    for (int i = 0; i < 2; i++) {
        if (blocks[i] == 0) continue;
        /* busy time of the stage's LLM blocks: less the vision (stage 0) or the head (stage 1) */
        double prefill = (double)job->stage_busy_ns[i][VH_PASS_PREFILL] - (i == 0 ? job->vision_ns : job->head_ns[0]);
        s->prefill_block_ns[i] = s->observed[i] ? ewma(s->prefill_block_ns[i], prefill / blocks[i]) : prefill / blocks[i];
        if (decode_passes) {
            double decode = (double)job->stage_busy_ns[i][VH_PASS_DECODE] - (i == 0 ? 0 : job->head_ns[1]);
            decode /= (double)blocks[i] * decode_passes;
            s->decode_block_ns[i] = s->observed[i] ? ewma(s->decode_block_ns[i], decode) : decode;
        }
        s->observed[i] = 1;
    }
    pthread_mutex_unlock(&s->lock);
}

void vh_split_scheduler_read(vh_split_scheduler *s, uint32_t *split, uint32_t *changes, int64_t prefill_block_ns[2],
                             int64_t decode_block_ns[2])
{
    pthread_mutex_lock(&s->lock);
    *split = s->split;
    *changes = s->changes;
    for (int i = 0; i < 2; i++) {
        prefill_block_ns[i] = (int64_t)s->prefill_block_ns[i];
        decode_block_ns[i] = (int64_t)s->decode_block_ns[i];
    }
    pthread_mutex_unlock(&s->lock);
}
