#include "pipeline/frame_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/bicubic_resize.h"
#include "image/normalize.h"
#include "text/openvla_prompt.h"
#include "util/clock.h"

vh_status vh_frame_job_init(vh_frame_job *job, const vh_job_context *ctx, uint32_t sequence, vh_error *err)
{
    memset(job, 0, sizeof *job);
    job->ctx = ctx;
    job->sequence = sequence;
    const vh_model *m = ctx->model;
    for (uint32_t t = 0; t < m->desc.n_towers; t++) {
        size_t s = m->desc.towers[t].image_size;
        job->resized[t] = malloc(s * s * 3);
        job->pixels[t] = malloc(sizeof(float) * 3 * s * s);
        if (!job->resized[t] || !job->pixels[t]) goto oom;
    }
    job->tokens = malloc(sizeof *job->tokens * ctx->max_context);
    job->hidden = vh_plan_host_alloc(ctx->plan, sizeof(float) * ctx->max_context * m->desc.llm.hidden);
    if (!job->tokens || !job->hidden) goto oom;
    vh_frame_job_set_split(job, ctx->plan->llm_split);
    return VH_OK;
oom:
    vh_frame_job_free(job);
    return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (frame buffers)");
}

void vh_frame_job_free(vh_frame_job *job)
{
    for (uint32_t t = 0; t < VH_MAX_TOWERS; t++) {
        free(job->resized[t]);
        free(job->pixels[t]);
    }
    free(job->tokens);
    free(job->prompt);
    if (job->hidden) vh_plan_host_free(job->ctx->plan, job->hidden);
    memset(job, 0, sizeof *job);
}

void vh_frame_job_set_split(vh_frame_job *job, uint32_t llm_split)
{
    const vh_plan *plan = job->ctx->plan;
    job->llm_split = llm_split;
    for (uint32_t i = 0; i < plan->n_stages; i++) job->stage_end[i] = plan->stages[i].first_block + plan->stages[i].n_blocks;
    if (plan->n_stages == 2) job->stage_end[0] = plan->llm_first_block + llm_split;
}

/* Resize the frame for each tower (Pillow's bicubic, as the processor's TVF.resize does) and
 * normalise it with that tower's mean and std. Towers of one size share the resize. */
static vh_status preprocess(vh_frame_job *job, const uint8_t *rgb, uint32_t width, uint32_t height, size_t stride,
                            vh_error *err)
{
    const vh_model *m = job->ctx->model;
    for (uint32_t t = 0; t < m->desc.n_towers; t++) {
        const uint32_t S = m->desc.towers[t].image_size;
        const vh_vision_tower_config *tc = &m->config.towers[t];
        if (t > 0 && S == m->desc.towers[0].image_size) {
            memcpy(job->resized[t], job->resized[0], (size_t)S * S * 3);
        } else {
            vh_status st = vh_resize_bicubic_rgb8(rgb, width, height, stride, job->resized[t], S, S, err);
            if (st) return st;
        }
        vh_image_norm norm;
        memcpy(norm.mean, tc->mean, sizeof norm.mean);
        memcpy(norm.std, tc->std, sizeof norm.std);
        vh_status st = vh_image_normalize_rgb8(job->resized[t], S, S, 0, &norm, job->pixels[t], err);
        if (st) return st;
    }
    return VH_OK;
}

vh_status vh_frame_job_prepare(vh_frame_job *job, uint64_t frame_id, const uint8_t *rgb, uint32_t width,
                               uint32_t height, size_t stride, const char *instruction, vh_error *err)
{
    const vh_job_context *ctx = job->ctx;
    const vh_model *m = ctx->model;
    const uint32_t dim = ctx->decoder->stats->dim, n_image = m->desc.n_image_tokens;
    job->frame_id = frame_id;
    job->start_ns = vh_now_ns();
    job->vision_end_ns = job->prefill_end_ns = job->end_ns = 0;
    memset(job->stage_busy_ns, 0, sizeof job->stage_busy_ns);
    memset(job->head_ns, 0, sizeof job->head_ns);
    memset(job->handoff_ns, 0, sizeof job->handoff_ns);
    job->vision_ns = 0;
    job->n_generated = 0;
    free(job->prompt);
    job->prompt = NULL;

    vh_status st = preprocess(job, rgb, width, height, stride, err);
    if (st) return st;
    /* prompt rows: [BOS | image patches | the rest of the prompt] */
    if ((st = vh_openvla_prompt_ids(ctx->tokenizer, ctx->bos_id, instruction, &job->prompt, &job->n_prompt, err)))
        return st;
    const uint64_t n_rows = (uint64_t)job->n_prompt + n_image;
    if (n_rows + dim > ctx->max_context)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "the instruction is too long: %zu prompt tokens + %u image "
                            "tokens + %u action tokens exceed the context of %u", job->n_prompt, n_image, dim,
                            ctx->max_context);
    job->n_rows = (uint32_t)n_rows;
    job->tokens[0] = job->prompt[0];
    for (uint32_t i = 0; i < n_image; i++) job->tokens[1 + i] = VH_TOKEN_IMAGE;
    memcpy(job->tokens + 1 + n_image, job->prompt + 1, sizeof(int32_t) * (job->n_prompt - 1));

    job->pass = VH_PASS_PREFILL;
    job->next_token = -1;
    job->segment = (vh_segment){.sequence = job->sequence, .n_rows = job->n_rows, .position = 0, .image = 0};
    job->batch = (vh_batch){.n_segments = 1, .segments = &job->segment, .n_rows = job->n_rows, .tokens = job->tokens,
                            .out_tokens = &job->next_token, .out_logits = job->step_logits};
    vh_frame_job_set_split(job, job->ctx->plan->llm_split);
    return VH_OK;
}

static vh_status run_range(const vh_stage *s, const vh_batch *batch, uint32_t first, uint32_t end,
                           vh_error *err)
{
    const vh_backend_iface *be = s->plugin->iface;
    char why[512] = "";
    vh_status st = be->executor_run(s->executor, batch, first, end - first, why, sizeof why);
    if (st) return vh_error_set(err, st, "backend '%s', blocks %u..%u: %s", be->name, first, end - 1, why);
    return VH_OK;
}

/* A span of the timeline: "vision f12", "prefill f12", "step 3 f12", or a hand-over of one
 * ("in: step 3 f12", "out: prefill f12"). */
static void trace_span(const vh_frame_job *job, uint32_t stage, const char *prefix, int vision, int64_t t0, int64_t t1)
{
    if (!job->ctx->trace) return;
    char name[48];
    const unsigned long long id = (unsigned long long)job->frame_id;
    if (vision) snprintf(name, sizeof name, "vision f%llu", id);
    else if (job->pass == VH_PASS_PREFILL) snprintf(name, sizeof name, "%sprefill f%llu", prefix, id);
    else snprintf(name, sizeof name, "%sstep %u f%llu", prefix, job->n_generated, id);
    vh_trace_span(job->ctx->trace, stage, name, job->frame_id, t0, t1);
}

vh_status vh_frame_job_run_stage(vh_frame_job *job, uint32_t stage, vh_error *err)
{
    const vh_job_context *ctx = job->ctx;
    const vh_model *m = ctx->model;
    const vh_stage *s = &ctx->plan->stages[stage];
    const vh_backend_iface *be = s->plugin->iface;
    const int last = stage + 1 == ctx->plan->n_stages;
    const uint32_t first = stage == 0 ? m->llm_embed_block : job->stage_end[stage - 1];
    const uint32_t end = job->stage_end[stage];
    char why[512] = "";
    vh_status st;
    int64_t t0 = vh_now_ns();

    if (stage == 0 && job->pass == VH_PASS_PREFILL) { /* the vision towers and the projector */
        const float *planes[VH_MAX_TOWERS];
        for (uint32_t t = 0; t < m->desc.n_towers; t++) planes[t] = job->pixels[t];
        vh_batch vision = {.n_images = 1, .pixels = planes};
        if ((st = run_range(s, &vision, 0, m->llm_embed_block, err))) return st;
        int64_t t1 = vh_now_ns();
        job->vision_ns = t1 - t0;
        job->vision_end_ns = t1;
        trace_span(job, stage, "", 1, t0, t1);
        t0 = t1;
    }
    /* the rows cross by copy (write_hidden / read_hidden), or the executor works on them in place
     * in the job's buffer (bind_hidden: a CPU stage takes a prefill's megabytes without a copy) */
    vh_status (*bind)(vh_executor *, float *, uint32_t, char *, size_t) =
        ctx->plan->n_stages > 1 && !ctx->copy_hidden ? VH_PLUGIN_OPTIONAL(s->plugin, bind_hidden) : NULL;
    if (bind) {
        if ((st = bind(s->executor, job->hidden, job->batch.n_rows, why, sizeof why)))
            return vh_error_set(err, st, "backend '%s': %s", be->name, why);
    } else if (stage > 0) {
        if ((st = be->write_hidden(s->executor, job->hidden, job->batch.n_rows, why, sizeof why)))
            return vh_error_set(err, st, "backend '%s': %s", be->name, why);
        int64_t t1 = vh_now_ns();
        job->handoff_ns[stage] += t1 - t0;
        trace_span(job, stage, "in: ", 0, t0, t1);
        t0 = t1;
    }
    /* with several stages the last runs the head as its own call, so the split scheduler sees its
     * cost apart (one stage: one call, which keeps a GPU's decode step one graph) */
    const int head_apart = last && ctx->plan->n_stages > 1;
    const uint32_t body_end = head_apart ? m->head_block : end;
    if (first < body_end && (st = run_range(s, &job->batch, first, body_end, err))) return st;
    int64_t t1 = vh_now_ns();
    if (head_apart) {
        if (bind && (st = bind(s->executor, job->hidden, job->batch.n_rows, why, sizeof why))) /* one run each */
            return vh_error_set(err, st, "backend '%s': %s", be->name, why);
        if ((st = run_range(s, &job->batch, m->head_block, end, err))) return st;
        int64_t t2 = vh_now_ns();
        job->head_ns[job->pass] += t2 - t1;
        t1 = t2;
    }
    job->stage_busy_ns[stage][job->pass] += t1 - t0 + (job->pass == VH_PASS_PREFILL && stage == 0 ? job->vision_ns : 0);
    trace_span(job, stage, "", 0, t0, t1);
    if (!last && !bind) {
        if ((st = be->read_hidden(s->executor, job->hidden, job->batch.n_rows, why, sizeof why)))
            return vh_error_set(err, st, "backend '%s': %s", be->name, why);
        int64_t t2 = vh_now_ns();
        job->handoff_ns[stage] += t2 - t1;
        trace_span(job, stage, "out: ", 0, t1, t2);
    }
    return VH_OK;
}

int vh_frame_job_advance(vh_frame_job *job)
{
    const vh_job_context *ctx = job->ctx;
    const uint32_t dim = ctx->decoder->stats->dim;
    const int64_t now = vh_now_ns();
    if (job->pass == VH_PASS_PREFILL) job->prefill_end_ns = now;
    /* greedy decoding, one token a pass, as transformers' generate: it stops early at EOS and the
     * action is then read from the last `dim` ids of prompt + generated tokens */
    job->generated[job->n_generated++] = job->next_token;
    if (job->n_generated >= dim || job->next_token == ctx->eos_id) {
        job->end_ns = now;
        return 0;
    }
    const uint32_t n_image = ctx->model->desc.n_image_tokens;
    const int32_t rope_delta = ctx->decode_positions == VH_DECODE_POSITIONS_OPENVLA_HF440 ? -(int32_t)n_image : 0;
    job->pass = VH_PASS_DECODE;
    job->step_token = job->next_token;
    job->segment = (vh_segment){.sequence = job->sequence, .n_rows = 1,
                                .position = job->n_rows + job->n_generated - 1, .image = -1, .rope_delta = rope_delta};
    job->batch = (vh_batch){.n_segments = 1, .segments = &job->segment, .n_rows = 1, .tokens = &job->step_token,
                            .out_tokens = &job->next_token,
                            .out_logits = job->step_logits ? job->step_logits + (size_t)job->n_generated *
                                                                 ctx->model->desc.llm.vocab : NULL};
    return 1;
}

void vh_frame_job_result(const vh_frame_job *job, vh_frame_result *out)
{
    const uint32_t dim = job->ctx->decoder->stats->dim;
    memset(out, 0, sizeof *out);
    out->action_dim = dim;
    /* the last `dim` ids of prompt + generated */
    for (uint32_t i = 0; i < dim; i++) {
        int64_t k = (int64_t)job->n_generated - (int64_t)dim + i; /* index into generated, < 0: prompt tail */
        int64_t from_prompt = (int64_t)job->n_prompt + k; /* the fixed prompt text is longer than any action */
        out->token_ids[i] = k >= 0 ? job->generated[k] : job->prompt[from_prompt > 0 ? from_prompt : 0];
    }
    vh_action_decode(job->ctx->decoder, out->token_ids, out->values);
    out->vision_ns = job->vision_end_ns - job->start_ns;
    out->prefill_ns = job->prefill_end_ns - job->vision_end_ns;
    out->decode_ns = job->end_ns - job->prefill_end_ns;
}
