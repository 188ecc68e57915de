#include "family/orion/orion_family.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family/driving/driving_noise.h"
#include "family/driving/driving_warmup.h"
#include "family/driving/planner_result.h"
#include "family/driving/camera_frames.h"
#include "family/orion/orion_model.h"
#include "family/orion/orion_prompt.h"
#include "text/bpe_tokenizer.h"
#include "util/file_read.h"

#define MAX_ADDED_TOKENS 64
/* what every pass asks (its request below): the vision tokens given, the hidden row out, the planner */
#define PASS_USES (VH_PASS_USES_HIDDEN_ROWS | VH_PASS_USES_VISION_ROWS | VH_PASS_USES_PLANS)

struct vh_program {
    const vh_model *model;
    const vh_orion_config *config;
    vh_tokenizer *tokenizer;
    vh_added_token added[MAX_ADDED_TOKENS];
    uint32_t n_added;
    int32_t *prompt;                   /* the text's ids; the vision rows go before prompt[image_index] */
    size_t n_prompt, image_index;
    uint32_t n_rows;                   /* prompt + vision rows: 599 for the released model */
    uint32_t readout_row;              /* the row of <waypoint_ego> */
    uint32_t plan_out;                 /* floats a plan holds: preds [M][T][2], mu [L], log_sigma [L] */
    uint64_t seed;
    float *warmup_tokens;              /* made on first use */
    vh_camera_front front;             /* the camera front end (config NULL without it) */
    vh_camera_stream *stream;          /* its state across frames (NULL without it) */
};

typedef struct orion_job {
    float *feature;                    /* [hidden] the head's hidden row */
    float *plan;                       /* [plan_out] */
    float *noise;                      /* [latent] the frame's, or seeded */
    uint32_t readout;                  /* the batch row of <waypoint_ego> */
    int32_t command;
    vh_camera_frame *cameras;          /* with the front end: the frame's prepared cameras */
    float *tokens;                     /* [n_vision_tokens][hidden] the front end's tokens */
    int use_cameras;                   /* this frame came as cameras (else as vision tokens) */
} orion_job;

/* added_tokens.json: {"<waypoint_ego>": 32000, ...}, the ids the checkpoint's tokenizer gives the
 * tokens the model added (Orion's add_special_token); never assumed. */
static vh_status read_added_tokens(vh_program *p, const char *dir, vh_error *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/added_tokens.json", dir);
    char *text = NULL;
    size_t len = 0;
    vh_status st = vh_read_text_file(path, 1u << 20, &text, &len, err);
    if (st) return st;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!json_is_object(root)) {
        json_decref(root);
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: not a JSON object of token ids", path);
    }
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if (p->n_added == MAX_ADDED_TOKENS || strlen(key) >= sizeof p->added[0].text || !json_is_integer(value) ||
            json_integer_value(value) < 0 || json_integer_value(value) >= (json_int_t)p->config->vocab) {
            json_decref(root);
            return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: token '%s' must have an id below the vocabulary of %u "
                                "(at most %d tokens)", path, key, p->config->vocab, MAX_ADDED_TOKENS);
        }
        snprintf(p->added[p->n_added].text, sizeof p->added[0].text, "%s", key);
        p->added[p->n_added++].id = (int32_t)json_integer_value(value);
    }
    json_decref(root);
    return VH_OK;
}

static vh_status make_prompt(vh_program *p, vh_error *err)
{
    const vh_orion_config *c = p->config;
    int32_t readout_id = -1;
    for (uint32_t i = 0; i < p->n_added; i++)
        if (!strcmp(p->added[i].text, c->readout_token)) readout_id = p->added[i].id;
    if (readout_id < 0)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s/added_tokens.json has no id for the read-out token '%s'",
                            vh_checkpoint_dir(p->model->checkpoint), c->readout_token);
    const int32_t bos = vh_tokenizer_bos_id(p->tokenizer) >= 0 ? vh_tokenizer_bos_id(p->tokenizer) : c->bos_id;
    vh_status st = vh_orion_prompt_ids(p->tokenizer, c->prompt, c->image_marker, p->added, p->n_added, bos, c->add_bos,
                                       &p->prompt, &p->n_prompt, &p->image_index, err);
    if (st) return st;
    p->n_rows = (uint32_t)p->n_prompt + c->n_vision_tokens;
    uint32_t found = 0;
    for (size_t i = 0; i < p->n_prompt; i++)
        if (p->prompt[i] == readout_id) {
            p->readout_row = (uint32_t)(i < p->image_index ? i : i + c->n_vision_tokens);
            found++;
        }
    if (found != 1)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "the prompt holds the read-out token '%s' %u times (once needed)",
                            c->readout_token, found);
    if (p->n_rows > c->max_positions)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "the prompt's %u rows exceed max_position_embeddings %u", p->n_rows,
                            c->max_positions);
    return VH_OK;
}

static void program_free(vh_program *p)
{
    if (!p) return;
    vh_tokenizer_free(p->tokenizer);
    vh_camera_stream_free(p->stream);
    free(p->prompt);
    free(p->warmup_tokens);
    free(p);
}

static vh_status program_create(const vh_model *m, const vh_session_params *params, vh_program **out,
                                vh_program_shape *shape, vh_error *err)
{
    *out = NULL;
    vh_program *p = calloc(1, sizeof *p);
    if (!p) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    p->model = m;
    p->config = vh_orion_config_of(m);
    p->seed = params->seed;
    const char *dir = vh_checkpoint_dir(m->checkpoint);
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.model", dir);
    vh_status st = vh_tokenizer_load(path, &p->tokenizer, err);
    if (!st && vh_tokenizer_vocab_size(p->tokenizer) > p->config->vocab)
        st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s has %u pieces, more than the model's %u embedding rows", path,
                          vh_tokenizer_vocab_size(p->tokenizer), p->config->vocab);
    if (!st) st = read_added_tokens(p, dir, err);
    if (!st) st = make_prompt(p, err);
    if (!st && p->config->front_end.present) {
        const vh_orion_model *om = m->family_model;
        p->front = (vh_camera_front){.frame_name = "an Orion frame", .config = &p->config->front_end,
                                     .graph = &om->front, .n_slots = m->desc.n_slots};
        st = vh_camera_stream_create(&p->front, &p->stream, err);
    }
    if (st) {
        program_free(p);
        return st;
    }
    p->plan_out = 2 * p->config->n_modes * p->config->n_steps + 2 * p->config->latent_dim;
    memset(shape, 0, sizeof *shape);
    shape->action_dim = 0;
    shape->passes_per_frame = 1; /* one prefill, no decoding */
    shape->max_context = p->n_rows;
    shape->pass_uses = PASS_USES;
    shape->images_per_frame = p->config->front_end.present ? p->config->front_end.n_cameras : 1;
    *out = p;
    return VH_OK;
}

const int32_t *vh_orion_program_prompt(const vh_program *p, size_t *n_ids, size_t *image_index)
{
    *n_ids = p->n_prompt;
    *image_index = p->image_index;
    return p->prompt;
}

/* The frame must bring the vision tokens of the model's count and width and a command; noise, when
 * given, is the planner's latent size. */
static vh_status check_frame(const vh_program *p, const vh_frame *f, vh_error *err)
{
    const vh_orion_config *c = p->config;
    if (f->unnorm_key)
        return vh_error_set(err, VH_ERR_UNNORM_KEY, "frame->unnorm_key '%.64s': an Orion model has no dataset "
                            "statistics to choose from (leave it NULL)", f->unnorm_key);
    vh_status st;
    if (!f->vision_tokens && c->front_end.present && (st = vh_camera_frame_check(&p->front, f, err))) return st;
    if (!f->vision_tokens && !c->front_end.present)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "an Orion frame needs its %u vision tokens (frame->vision_tokens): "
                            "this checkpoint has no camera front end (convert_orion.py --front-end)", c->n_vision_tokens);
    if (f->vision_tokens && (f->n_vision_tokens != c->n_vision_tokens || f->vision_token_width != c->hidden))
        return vh_error_set(err, VH_ERR_BAD_FRAME, "frame->vision_tokens is %u x %u; the model takes %u x %u",
                            f->n_vision_tokens, f->vision_token_width, c->n_vision_tokens, c->hidden);
    if (f->command < 0 || f->command >= (int32_t)c->n_modes)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "an Orion frame needs a command 0..%u (frame->command is %d)",
                            c->n_modes - 1, f->command);
    if (f->noise && f->n_noise != c->latent_dim)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "frame->noise has %u floats; the planner's latent has %u",
                            f->n_noise, c->latent_dim);
    return VH_OK;
}

static vh_status job_init(const vh_program *p, vh_family_frame *frame, vh_error *err)
{
    orion_job *oj = calloc(1, sizeof *oj);
    if (!oj) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (frame buffers)");
    frame->state = oj;
    oj->feature = malloc(sizeof(float) * p->config->hidden);
    oj->plan = malloc(sizeof(float) * p->plan_out);
    oj->noise = malloc(sizeof(float) * p->config->latent_dim);
    if (!oj->feature || !oj->plan || !oj->noise)
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (frame buffers)");
    if (p->config->front_end.present) {
        vh_status st = vh_camera_frame_create(&p->front, &oj->cameras, err);
        if (st) return st;
        if (!(oj->tokens = malloc(sizeof(float) * p->config->n_vision_tokens * p->config->hidden)))
            return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (frame buffers)");
    }
    return VH_OK;
}

static void job_free(vh_family_frame *frame)
{
    orion_job *oj = frame->state;
    free(oj->feature);
    free(oj->plan);
    free(oj->noise);
    vh_camera_frame_free(oj->cameras);
    free(oj->tokens);
    free(oj);
    frame->state = NULL;
}

static vh_status prepare(vh_family_frame *frame, const vh_frame_input *in, vh_error *err)
{
    const vh_program *p = frame->program;
    const vh_orion_config *c = p->config;
    orion_job *oj = frame->state;
    oj->use_cameras = !in->vision_tokens;
    if (oj->use_cameras) {
        vh_status st = vh_camera_frame_prepare(&p->front, oj->cameras, in, err);
        if (st) return st;
    }
    /* rows: [text before the image | the vision tokens | the rest of the text] */
    memcpy(frame->tokens, p->prompt, sizeof(int32_t) * p->image_index);
    for (uint32_t i = 0; i < c->n_vision_tokens; i++) frame->tokens[p->image_index + i] = VH_TOKEN_IMAGE;
    memcpy(frame->tokens + p->image_index + c->n_vision_tokens, p->prompt + p->image_index,
           sizeof(int32_t) * (p->n_prompt - p->image_index));
    oj->command = in->command;
    oj->readout = p->readout_row;
    if (in->noise) memcpy(oj->noise, in->noise, sizeof(float) * c->latent_dim);
    else vh_driving_seeded_noise(p->seed, in->sequence, oj->noise, c->latent_dim);
    /* one prefill, the vision tokens given (the record's copy: it outlives the frame's passes); out:
     * the hidden row at <waypoint_ego> and the planner's plan */
    frame->pass = (vh_pass_request){
        .kind = VH_PASS_PREFILL, .n_segments = 1,
        .segments = {{.n_rows = p->n_rows, .vision_rows = oj->use_cameras ? oj->tokens : in->vision_tokens,
                      .plans = 1}},
        .tokens = frame->tokens,
        .n_hidden_rows = 1, .hidden_rows = &oj->readout, .out_hidden = oj->feature,
        .plan_noise = oj->noise, .plan_noise_stride = c->latent_dim, .out_plan = oj->plan,
        .plan_out_stride = p->plan_out};
    return VH_OK;
}

/* The camera front end's runs (a frame of vision tokens has none). */
static vh_status run_vision(vh_family_frame *frame, const vh_vision_runner *runner, vh_error *err)
{
    const vh_program *p = frame->program;
    orion_job *oj = frame->state;
    if (!oj->use_cameras) return VH_OK;
    return vh_camera_frame_run(&p->front, p->stream, oj->cameras, runner, oj->tokens, err);
}

static const float *vision_tokens(const vh_family_frame *frame, uint32_t *rows, uint32_t *width)
{
    const orion_job *oj = frame->state;
    if (!oj->use_cameras) return NULL;
    *rows = frame->program->config->n_vision_tokens;
    *width = frame->program->config->hidden;
    return oj->tokens;
}

static int advance(vh_family_frame *frame)
{
    (void)frame;
    return 0; /* one prefill: the planner ran after the head */
}

static void result(const vh_family_frame *frame, vh_frame_result *out)
{
    const vh_orion_config *c = frame->program->config;
    const orion_job *oj = frame->state;
    out->kind = VH_ACTION_TRAJECTORY;
    out->n_points = c->n_steps;
    vh_driving_planner_result(out, oj->plan, c->n_modes, c->n_steps, c->latent_dim, (uint32_t)oj->command,
                              "mode_trajectories", "mu", "log_sigma", out->trajectory);
}

const float *vh_orion_frame_feature(const vh_family_frame *frame)
{
    return ((const orion_job *)frame->state)->feature;
}

static int warmup_input(vh_program *p, vh_frame *frame)
{
    return vh_driving_warmup_frame(&p->warmup_tokens, p->config->n_vision_tokens, p->config->hidden, frame);
}

/* One round, the fixed prompt prepare lays out (the instruction: ignored, as in frames; the command
 * picks a planner mode, not the prompt, but must be one a frame could have). */
static vh_status prompt_rounds(const vh_program *p, const char *instruction, int32_t command,
                               vh_family_prompt_round rounds[VH_FAMILY_MAX_PROMPT_ROUNDS], uint32_t *n_rounds,
                               vh_error *err)
{
    (void)instruction;
    const vh_orion_config *c = p->config;
    *n_rounds = 0;
    if (command != VH_COMMAND_NONE && (command < 0 || command >= (int32_t)c->n_modes))
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "request->command is %d: an Orion model's commands are "
                            "0..%u (or VH_COMMAND_NONE: its prompt is the same for each)", command, c->n_modes - 1);
    vh_status st = vh_family_prompt_round_set(&rounds[0], "prompt", p->prompt, p->n_prompt, (int64_t)p->image_index,
                                              c->n_vision_tokens, err);
    if (!st) *n_rounds = 1;
    return st;
}

const vh_family vh_family_orion = {
    .name = "orion",
    .model_type = "orion",
    .load = vh_orion_load,
    .unload = vh_orion_unload,
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
    .run_vision = run_vision,
    .vision_tokens = vision_tokens,
};
