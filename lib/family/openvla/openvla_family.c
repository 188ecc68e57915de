#include "family/openvla/openvla_family.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family/openvla/openvla_action_decoder.h"
#include "family/openvla/openvla_model.h"
#include "family/openvla/openvla_prompt.h"
#include "image/bicubic_resize.h"
#include "image/normalize.h"
#include "text/text_tokenizer.h"

/* KV positions reserved for the prompt's text beyond the image tokens and the action. */
#define PROMPT_TEXT_BUDGET 512u
/* What the warm-up frames show the model: a camera-sized image and an instruction of a typical
 * length (the prompt's length decides the prefill's row count). */
#define WARMUP_WIDTH 640u
#define WARMUP_HEIGHT 480u
#define WARMUP_INSTRUCTION "pick up the red block and put it in the bowl"
/* The image patches go after the prompt's first id (BOS), as predict_action splices them. */
#define IMAGE_POSITION 1u

struct vh_program {
    const vh_model *model;
    const vh_openvla_config *config;
    vh_text_tokenizer *tokenizer;     /* tokenizer.model, else tokenizer.json */
    const vh_action_stats *stats;      /* the session's unnorm_key's dataset (keyless: the first) */
    vh_action_decoder *decoders;       /* [config->n_datasets]: one per dataset, for frames that name
                                          their own unnorm_key */
    uint32_t session_dataset;          /* index of stats in config->datasets */
    int keyless;                       /* no unnorm_key for a model of several datasets: every frame
                                          names its own (the warm-up frames decode with the first) */
    int32_t bos_id, eos_id;
    uint32_t max_context;
    vh_decode_positions decode_positions;
    uint8_t *warmup_rgb;               /* made on first use */
};

/* One frame's OpenVLA state (frame->state). */
typedef struct openvla_job {
    uint8_t *resized[VH_MAX_TOWERS];   /* [S, S, 3] per tower */
    int32_t *prompt;                   /* the prompt's ids (malloc'd per frame) */
    size_t n_prompt;
    uint32_t prefill_rows;             /* the prompt's and the image's */
    int32_t next_token;                /* the head's chosen id of the pass just run */
    int32_t step_token;                /* the decode pass's row */
    uint32_t n_generated;
    int32_t generated[VH_MAX_ACTION_DIM];
    const vh_action_decoder *decoder;  /* the frame's dataset's (its unnorm_key, else the session's) */
} openvla_job;

/* A session without unnorm_key on a model of several datasets takes each frame's key (checked
 * at submit), as HF's predict_action takes it per call; the session's shape is one action length,
 * so the datasets must agree on it. */
static vh_status keyless_stats(const vh_openvla_config *c, const vh_action_stats **stats, vh_error *err)
{
    for (uint32_t i = 1; i < c->n_datasets; i++)
        if (c->datasets[i].dim != c->datasets[0].dim) {
            vh_error e;
            vh_openvla_config_dataset(c, NULL, stats, &e);
            return vh_error_set(err, VH_ERR_UNNORM_KEY, "%s (without it every frame names its own, but "
                                "'%s' has %u action values and '%s' %u)", e.message, c->datasets[0].dataset,
                                c->datasets[0].dim, c->datasets[i].dataset, c->datasets[i].dim);
        }
    *stats = &c->datasets[0];
    return VH_OK;
}

static vh_status program_create(const vh_model *m, const vh_session_params *params, vh_program **out,
                                vh_program_shape *shape, vh_error *err)
{
    *out = NULL;
    vh_program *p = calloc(1, sizeof *p);
    if (!p) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    p->model = m;
    p->config = vh_openvla_config_of(m);
    p->decode_positions = params->decode_positions;
    const vh_openvla_config *c = p->config;
    vh_status st = vh_text_tokenizer_open_dir(vh_checkpoint_dir(m->checkpoint), &p->tokenizer, err);
    if (!st && vh_text_tokenizer_vocab_size(p->tokenizer) > c->vocab)
        st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s has %u pieces, more than the model's vocab_size %u",
                          vh_text_tokenizer_path(p->tokenizer), vh_text_tokenizer_vocab_size(p->tokenizer), c->vocab);
    p->keyless = (!params->unnorm_key || !*params->unnorm_key) && c->n_datasets > 1;
    if (!st) st = p->keyless ? keyless_stats(c, &p->stats, err)
                             : vh_openvla_config_dataset(c, params->unnorm_key, &p->stats, err);
    if (!st && !(p->decoders = calloc(c->n_datasets, sizeof *p->decoders)))
        st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    for (uint32_t i = 0; !st && i < c->n_datasets; i++) {
        st = vh_action_decoder_init(&p->decoders[i], c->vocab_unpadded, c->n_action_bins, &c->datasets[i], err);
        if (&c->datasets[i] == p->stats) p->session_dataset = i;
    }
    if (st) {
        vh_family_openvla.program_free(p);
        return st;
    }
    p->bos_id = vh_text_tokenizer_bos_id(p->tokenizer) >= 0 ? vh_text_tokenizer_bos_id(p->tokenizer) : c->bos_id;
    p->eos_id = c->eos_id;
    uint64_t context = (uint64_t)m->desc.n_image_tokens + PROMPT_TEXT_BUDGET + p->stats->dim;
    p->max_context = context < c->max_positions ? (uint32_t)context : c->max_positions;

    memset(shape, 0, sizeof *shape);
    shape->action_dim = p->stats->dim;
    shape->passes_per_frame = p->stats->dim; /* one token a pass */
    shape->max_context = p->max_context;
    snprintf(shape->label, sizeof shape->label, "%s", p->keyless ? "" : p->stats->dataset);
    *out = p;
    return VH_OK;
}

static void program_free(vh_program *p)
{
    if (!p) return;
    for (uint32_t i = 0; p->decoders && i < p->config->n_datasets; i++) vh_action_decoder_free(&p->decoders[i]);
    free(p->decoders);
    vh_text_tokenizer_free(p->tokenizer);
    free(p->warmup_rgb);
    free(p);
}

void vh_openvla_program_set_decode_positions(vh_program *p, vh_decode_positions positions)
{
    p->decode_positions = positions;
}

int32_t vh_openvla_program_bos_id(const vh_program *p) { return p->bos_id; }

/* OpenVLA needs one image and an instruction (their sizes are checked with every frame's). */
/* The dataset a frame's unnorm_key names (NULL: the session's), as an index into config->datasets;
 * -1 when the model has no such dataset. */
static int32_t frame_dataset(const vh_program *p, const char *unnorm_key)
{
    if (!unnorm_key) return (int32_t)p->session_dataset;
    for (uint32_t i = 0; i < p->config->n_datasets; i++)
        if (!strcmp(p->config->datasets[i].dataset, unnorm_key)) return (int32_t)i;
    return -1;
}

static vh_status check_frame(const vh_program *p, const vh_frame *f, vh_error *err)
{
    if (!f->rgb) return vh_error_set(err, VH_ERR_BAD_FRAME, "%s is NULL", "frame->rgb");
    if (!f->instruction) return vh_error_set(err, VH_ERR_BAD_FRAME, "%s is NULL", "frame->instruction");
    if (!f->unnorm_key && p->keyless) {
        vh_error e;
        vh_openvla_config_dataset(p->config, NULL, &(const vh_action_stats *){NULL}, &e);
        return vh_error_set(err, VH_ERR_UNNORM_KEY, "frame->unnorm_key is NULL and the session has none: %s",
                            e.message);
    }
    if (f->unnorm_key) {
        /* checked here, at submit, so a bad key is the caller's error at once, never a failed frame */
        if (strnlen(f->unnorm_key, 256) == 256)
            return vh_error_set(err, VH_ERR_UNNORM_KEY, "frame->unnorm_key is longer than 255 bytes");
        int32_t i = frame_dataset(p, f->unnorm_key);
        if (i < 0) {
            vh_error e;
            vh_openvla_config_dataset(p->config, f->unnorm_key, &(const vh_action_stats *){NULL}, &e);
            return vh_error_set(err, VH_ERR_UNNORM_KEY, "frame->unnorm_key: %s", e.message);
        }
        if (p->config->datasets[i].dim != p->stats->dim)
            return vh_error_set(err, VH_ERR_UNNORM_KEY, "frame->unnorm_key '%s' has %u action values; this "
                                "session decodes %u a frame (its unnorm_key '%s')", f->unnorm_key,
                                p->config->datasets[i].dim, p->stats->dim, p->stats->dataset);
    }
    return VH_OK;
}

static vh_status job_init(const vh_program *p, vh_family_frame *frame, vh_error *err)
{
    openvla_job *oj = calloc(1, sizeof *oj);
    if (!oj) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (frame buffers)");
    frame->state = oj;
    for (uint32_t t = 0; t < p->model->desc.n_towers; t++) {
        size_t s = p->model->desc.towers[t].image_size;
        if (!(oj->resized[t] = malloc(s * s * 3)))
            return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (frame buffers)");
    }
    return VH_OK;
}

static void job_free(vh_family_frame *frame)
{
    openvla_job *oj = frame->state;
    for (uint32_t t = 0; t < VH_MAX_TOWERS; t++) free(oj->resized[t]);
    free(oj->prompt);
    free(oj);
    frame->state = NULL;
}

/* Whether a prompt of n_prompt tokens, the image tokens and the action fit the context. */
static int prompt_fits(const vh_program *p, size_t n_prompt)
{
    return (uint64_t)n_prompt + p->model->desc.n_image_tokens + p->stats->dim <= p->max_context;
}

/* Resize the frame for each tower (Pillow's bicubic, as the processor's TVF.resize does) and
 * normalise it with that tower's mean and std. Towers of one size share the resize. */
static vh_status preprocess(const vh_program *p, vh_family_frame *frame, const vh_frame_input *in, vh_error *err)
{
    const vh_model *m = p->model;
    openvla_job *oj = frame->state;
    for (uint32_t t = 0; t < m->desc.n_towers; t++) {
        const uint32_t S = m->desc.towers[t].image_size;
        const vh_vision_tower_config *tc = &p->config->towers[t];
        if (t > 0 && S == m->desc.towers[0].image_size) {
            memcpy(oj->resized[t], oj->resized[0], (size_t)S * S * 3);
        } else {
            vh_status st = vh_resize_bicubic_rgb8(in->rgb, in->width, in->height, in->stride, oj->resized[t], S, S, err);
            if (st) return st;
        }
        vh_image_norm norm;
        memcpy(norm.mean, tc->mean, sizeof norm.mean);
        memcpy(norm.std, tc->std, sizeof norm.std);
        vh_status st = vh_image_normalize_rgb8(oj->resized[t], S, S, 0, &norm, frame->pixels[t], err);
        if (st) return st;
    }
    return VH_OK;
}

static vh_status prepare(vh_family_frame *frame, const vh_frame_input *in, vh_error *err)
{
    const vh_program *p = frame->program;
    openvla_job *oj = frame->state;
    const uint32_t dim = p->stats->dim, n_image = p->model->desc.n_image_tokens;
    oj->n_generated = 0;
    free(oj->prompt);
    oj->prompt = NULL;

    int32_t dataset = frame_dataset(p, in->unnorm_key);
    if (dataset < 0) /* check_frame refused it at submit; a frame that gets here has a known key */
        return vh_error_set(err, VH_ERR_INTERNAL, "frame unnorm_key '%s' unknown after submit", in->unnorm_key);
    oj->decoder = &p->decoders[dataset];
    vh_status st = preprocess(p, frame, in, err);
    if (st) return st;
    /* prompt rows: [BOS | image patches | the rest of the prompt] */
    if ((st = vh_openvla_prompt_ids(p->tokenizer, p->bos_id, in->instruction, &oj->prompt, &oj->n_prompt, err)))
        return st;
    if (!prompt_fits(p, oj->n_prompt))
        return vh_error_set(err, VH_ERR_BAD_FRAME, "the instruction is too long: %zu prompt tokens + %u image "
                            "tokens + %u action tokens exceed the context of %u", oj->n_prompt, n_image, dim,
                            p->max_context);
    oj->prefill_rows = (uint32_t)(oj->n_prompt + n_image);
    memcpy(frame->tokens, oj->prompt, sizeof(int32_t) * IMAGE_POSITION);
    for (uint32_t i = 0; i < n_image; i++) frame->tokens[IMAGE_POSITION + i] = VH_TOKEN_IMAGE;
    memcpy(frame->tokens + IMAGE_POSITION + n_image, oj->prompt + IMAGE_POSITION,
           sizeof(int32_t) * (oj->n_prompt - IMAGE_POSITION));
    /* one prompt, the image's patch embeddings at its image rows; the head's chosen id out */
    frame->pass = (vh_pass_request){.kind = VH_PASS_PREFILL, .n_segments = 1,
                                    .segments = {{.n_rows = oj->prefill_rows}}, .tokens = frame->tokens,
                                    .out_tokens = &oj->next_token};
    return VH_OK;
}

static int advance(vh_family_frame *frame)
{
    const vh_program *p = frame->program;
    openvla_job *oj = frame->state;
    /* greedy decoding, one token a pass, as transformers' generate: it stops early at EOS and the
     * action is then read from the last `dim` ids of prompt + generated tokens */
    oj->generated[oj->n_generated++] = oj->next_token;
    if (oj->n_generated >= p->stats->dim || oj->next_token == p->eos_id) return 0;
    const uint32_t n_image = p->model->desc.n_image_tokens;
    const int32_t rope_delta = p->decode_positions == VH_DECODE_POSITIONS_OPENVLA_HF440 ? -(int32_t)n_image : 0;
    /* the token just chosen, one row after the rows before it (RoPE position + rope_delta) */
    oj->step_token = oj->next_token;
    frame->pass = (vh_pass_request){
        .kind = VH_PASS_DECODE, .n_segments = 1,
        .segments = {{.n_rows = 1, .position = oj->prefill_rows + oj->n_generated - 1, .rope_delta = rope_delta}},
        .tokens = &oj->step_token, .out_tokens = &oj->next_token};
    return 1;
}

static void result(const vh_family_frame *frame, vh_frame_result *out)
{
    const vh_program *p = frame->program;
    const openvla_job *oj = frame->state;
    const uint32_t dim = p->stats->dim;
    out->action_dim = dim;
    /* the last `dim` ids of prompt + generated */
    for (uint32_t i = 0; i < dim; i++) {
        int64_t k = (int64_t)oj->n_generated - (int64_t)dim + i; /* index into generated, < 0: prompt tail */
        int64_t from_prompt = (int64_t)oj->n_prompt + k; /* the fixed prompt text is longer than any action */
        out->token_ids[i] = k >= 0 ? oj->generated[k] : oj->prompt[from_prompt > 0 ? from_prompt : 0];
    }
    vh_action_decode(oj->decoder ? oj->decoder : &p->decoders[p->session_dataset], out->token_ids, out->values);
}

/* One round: the prompt prepare makes of the instruction, the image patches after BOS (the command:
 * ignored, as in frames). */
static vh_status prompt_rounds(const vh_program *p, const char *instruction, int32_t command,
                               vh_family_prompt_round rounds[VH_FAMILY_MAX_PROMPT_ROUNDS], uint32_t *n_rounds,
                               vh_error *err)
{
    (void)command;
    *n_rounds = 0;
    if (!instruction)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "request->instruction is NULL: an OpenVLA prompt is made "
                            "from the frame's instruction");
    vh_family_prompt_round *r = &rounds[0];
    memset(r, 0, sizeof *r);
    vh_status st = vh_openvla_prompt_ids(p->tokenizer, p->bos_id, instruction, &r->ids, &r->n_ids, err);
    if (st) return st;
    r->name = "prompt";
    r->image_position = IMAGE_POSITION;
    r->n_image_rows = p->model->desc.n_image_tokens;
    *n_rounds = 1;
    return VH_OK;
}

/* A camera-sized synthetic image and a typical instruction; none when the model's context cannot
 * hold even this prompt (its frames then fail one by one, not at create). */
static int warmup_input(vh_program *p, vh_frame *frame)
{
    int32_t *ids = NULL;
    size_t n_ids = 0;
    vh_error ignored;
    int fits = vh_openvla_prompt_ids(p->tokenizer, p->bos_id, WARMUP_INSTRUCTION, &ids, &n_ids, &ignored) == VH_OK &&
               prompt_fits(p, n_ids);
    free(ids);
    if (!fits) return 0;
    const size_t row_bytes = (size_t)WARMUP_WIDTH * 3;
    if (!p->warmup_rgb) {
        if (!(p->warmup_rgb = malloc(row_bytes * WARMUP_HEIGHT))) return -1;
        for (size_t i = 0; i < row_bytes * WARMUP_HEIGHT; i++) p->warmup_rgb[i] = (uint8_t)(i * 7 + i / row_bytes);
    }
    vh_frame_init(frame);
    frame->rgb = p->warmup_rgb;
    frame->width = WARMUP_WIDTH;
    frame->height = WARMUP_HEIGHT;
    frame->instruction = WARMUP_INSTRUCTION;
    return 1;
}

const vh_family vh_family_openvla = {
    .name = "openvla",
    .model_type = "openvla",
    .load = vh_openvla_load,
    .unload = vh_openvla_unload,
    .program_create = program_create,
    .program_free = program_free,
    .check_frame = check_frame,
    .job_init = job_init,
    .job_free = job_free,
    .prepare = prepare,
    .advance = advance,
    .result = result,
    .warmup_input = warmup_input,
    .prompt_rounds = prompt_rounds,
};
