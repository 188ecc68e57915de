#include "pipeline/frame_runner.h"

#include <stdlib.h>
#include <string.h>

#include "image/bicubic_resize.h"
#include "image/normalize.h"
#include "text/openvla_prompt.h"
#include "util/clock.h"

vh_status vh_frame_runner_init(vh_frame_runner *r, const vh_model *model, const vh_plan *plan,
                               const vh_tokenizer *tokenizer, const vh_action_decoder *decoder,
                               uint32_t max_context, vh_error *err)
{
    memset(r, 0, sizeof *r);
    r->model = model;
    r->plan = plan;
    r->tokenizer = tokenizer;
    r->decoder = decoder;
    r->max_context = max_context;
    r->bos_id = vh_tokenizer_bos_id(tokenizer) >= 0 ? vh_tokenizer_bos_id(tokenizer) : model->config.bos_id;
    r->eos_id = model->config.eos_id;
    for (uint32_t t = 0; t < model->desc.n_towers; t++) {
        size_t s = model->desc.towers[t].image_size;
        r->resized[t] = malloc(s * s * 3);
        r->pixels[t] = malloc(sizeof(float) * 3 * s * s);
        if (!r->resized[t] || !r->pixels[t]) goto oom;
    }
    r->tokens = malloc(sizeof *r->tokens * max_context);
    r->hidden = malloc(sizeof(float) * max_context * model->desc.llm.hidden);
    if (!r->tokens || !r->hidden) goto oom;
    return VH_OK;
oom:
    vh_frame_runner_free(r);
    return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (frame buffers)");
}

void vh_frame_runner_free(vh_frame_runner *r)
{
    for (uint32_t t = 0; t < VH_MAX_TOWERS; t++) {
        free(r->resized[t]);
        free(r->pixels[t]);
    }
    free(r->tokens);
    free(r->hidden);
    memset(r, 0, sizeof *r);
}

/* Resize the frame for each tower (Pillow's bicubic, as the processor's TVF.resize does) and
 * normalise it with that tower's mean and std. Towers of one size share the resize. */
static vh_status preprocess(vh_frame_runner *r, const uint8_t *rgb, uint32_t width, uint32_t height,
                            size_t stride, vh_error *err)
{
    const vh_model *m = r->model;
    for (uint32_t t = 0; t < m->desc.n_towers; t++) {
        const uint32_t S = m->desc.towers[t].image_size;
        const vh_vision_tower_config *tc = &m->config.towers[t];
        if (t > 0 && S == m->desc.towers[0].image_size) {
            memcpy(r->resized[t], r->resized[0], (size_t)S * S * 3);
        } else {
            vh_status st = vh_resize_bicubic_rgb8(rgb, width, height, stride, r->resized[t], S, S, err);
            if (st) return st;
        }
        vh_image_norm norm;
        memcpy(norm.mean, tc->mean, sizeof norm.mean);
        memcpy(norm.std, tc->std, sizeof norm.std);
        vh_status st = vh_image_normalize_rgb8(r->resized[t], S, S, 0, &norm, r->pixels[t], err);
        if (st) return st;
    }
    return VH_OK;
}

/* Run blocks [first, first + count) across the stages that hold them, moving the LLM rows from
 * stage to stage. */
static vh_status run_blocks(vh_frame_runner *r, const vh_batch *batch, uint32_t first, uint32_t count,
                            vh_error *err)
{
    const uint32_t end = first + count;
    int handed_over = 0;
    for (uint32_t i = 0; i < r->plan->n_stages; i++) {
        const vh_stage *s = &r->plan->stages[i];
        uint32_t lo = first > s->first_block ? first : s->first_block;
        uint32_t hi = end < s->first_block + s->n_blocks ? end : s->first_block + s->n_blocks;
        if (lo >= hi) continue;
        const vh_backend_iface *be = s->plugin->iface;
        char why[512] = "";
        vh_status st;
        if (handed_over && (st = be->write_hidden(s->executor, r->hidden, batch->n_rows, why, sizeof why)))
            return vh_error_set(err, st, "backend '%s': %s", be->name, why);
        if ((st = be->executor_run(s->executor, batch, lo, hi - lo, why, sizeof why)))
            return vh_error_set(err, st, "backend '%s', blocks %u..%u: %s", be->name, lo, hi - 1, why);
        if (hi < end) {
            if ((st = be->read_hidden(s->executor, r->hidden, batch->n_rows, why, sizeof why)))
                return vh_error_set(err, st, "backend '%s': %s", be->name, why);
            handed_over = 1;
        }
    }
    return VH_OK;
}

vh_status vh_frame_runner_run(vh_frame_runner *r, const uint8_t *rgb, uint32_t width, uint32_t height,
                              size_t stride, const char *instruction, vh_frame_result *out, vh_error *err)
{
    const vh_model *m = r->model;
    const uint32_t dim = r->decoder->stats->dim, n_image = m->desc.n_image_tokens;
    memset(out, 0, sizeof *out);
    out->action_dim = dim;

    /* vision: towers and projector */
    int64_t t0 = vh_now_ns();
    vh_status st = preprocess(r, rgb, width, height, stride, err);
    if (st) return st;
    const float *planes[VH_MAX_TOWERS];
    for (uint32_t t = 0; t < m->desc.n_towers; t++) planes[t] = r->pixels[t];
    vh_batch vision = {.n_images = 1, .pixels = planes};
    if ((st = run_blocks(r, &vision, 0, m->llm_embed_block, err))) return st;
    int64_t t1 = vh_now_ns();
    out->vision_ns = t1 - t0;

    /* prompt rows: [BOS | image patches | the rest of the prompt] */
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    if ((st = vh_openvla_prompt_ids(r->tokenizer, r->bos_id, instruction, &prompt, &n_prompt, err))) return st;
    const uint64_t n_rows = (uint64_t)n_prompt + n_image;
    if (n_rows + dim > r->max_context) {
        free(prompt);
        return vh_error_set(err, VH_ERR_BAD_FRAME, "the instruction is too long: %zu prompt tokens + %u image "
                            "tokens + %u action tokens exceed the context of %u", n_prompt, n_image, dim,
                            r->max_context);
    }
    r->tokens[0] = prompt[0];
    for (uint32_t i = 0; i < n_image; i++) r->tokens[1 + i] = VH_TOKEN_IMAGE;
    memcpy(r->tokens + 1 + n_image, prompt + 1, sizeof(int32_t) * (n_prompt - 1));

    const uint32_t llm_first = m->llm_embed_block, llm_count = m->desc.n_blocks - m->llm_embed_block;
    vh_segment seg = {.sequence = 0, .n_rows = (uint32_t)n_rows, .position = 0, .image = 0};
    int32_t next = -1;
    const size_t vocab = m->desc.llm.vocab;
    vh_batch batch = {.n_segments = 1, .segments = &seg, .n_rows = (uint32_t)n_rows, .tokens = r->tokens,
                      .out_tokens = &next, .out_logits = r->step_logits};
    if ((st = run_blocks(r, &batch, llm_first, llm_count, err))) goto done;
    int64_t t2 = vh_now_ns();
    out->prefill_ns = t2 - t1;

    /* greedy decoding, one token a step, as transformers' generate: it stops early at EOS and
     * the action is then read from the last `dim` ids of prompt + generated tokens */
    const int32_t rope_delta =
        r->decode_positions == VH_DECODE_POSITIONS_OPENVLA_HF440 ? -(int32_t)n_image : 0;
    int32_t generated[VH_MAX_ACTION_DIM];
    uint32_t n_generated = 0;
    generated[n_generated++] = next;
    while (n_generated < dim && next != r->eos_id) {
        int32_t token = next;
        seg = (vh_segment){.sequence = 0, .n_rows = 1, .position = (uint32_t)n_rows + n_generated - 1,
                           .image = -1, .rope_delta = rope_delta};
        batch = (vh_batch){.n_segments = 1, .segments = &seg, .n_rows = 1, .tokens = &token, .out_tokens = &next,
                           .out_logits = r->step_logits ? r->step_logits + n_generated * vocab : NULL};
        if ((st = run_blocks(r, &batch, llm_first, llm_count, err))) goto done;
        generated[n_generated++] = next;
    }
    out->decode_ns = vh_now_ns() - t2;

    /* the last `dim` ids of prompt + generated */
    for (uint32_t i = 0; i < dim; i++) {
        int64_t k = (int64_t)n_generated - (int64_t)dim + i; /* index into generated, < 0: prompt tail */
        int64_t from_prompt = (int64_t)n_prompt + k; /* the fixed prompt text is longer than any action */
        out->token_ids[i] = k >= 0 ? generated[k] : prompt[from_prompt > 0 ? from_prompt : 0];
    }
    vh_action_decode(r->decoder, out->token_ids, out->values);
done:
    free(prompt);
    return st;
}
