#include "family/minddrive/minddrive_family.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family/driving/camera_frames.h"
#include "family/driving/driving_noise.h"
#include "family/driving/driving_warmup.h"
#include "family/driving/planner_result.h"
#include "family/minddrive/minddrive_model.h"
#include "family/minddrive/minddrive_prompt.h"
#include "util/knobs.h"

/* what every pass asks of the backends (its request: set_pass): the rounds' vision rows given,
 * hidden rows out, each segment's LoRA set, the planners on the action round only */
#define PASS_USES (VH_PASS_USES_HIDDEN_ROWS | VH_PASS_USES_VISION_ROWS | VH_PASS_USES_PLANS | \
                   VH_PASS_USES_ADAPTER_SETS | VH_PASS_USES_PLAN_SEGMENTS)
#define HIDDEN_ROWS 4    /* per frame: the decision row twice (a planner needs as many rows per
                            segment as the action round has), the two planner features */

enum { DECISION = 0, ACTION = 1 }; /* the rounds, in segment order */

typedef struct round_prompt {
    int32_t *ids;                      /* the text's ids; the vision rows go before ids[image_index] */
    size_t n_ids, image_index;
    uint32_t rows;                     /* ids + vision rows: the segment's length */
} round_prompt;

struct vh_program {
    const vh_model *model;
    const vh_minddrive_model *mm;
    const vh_minddrive_config *config;
    vh_hf_tokenizer *tokenizer;
    round_prompt round[2];
    uint32_t speed_row, path_row;      /* the action round's rows of <waypoint_ego>, <path_waypoint_ego> */
    int32_t speed_ids[VH_MINDDRIVE_MAX_SPEEDS];
    float *speed_embed;                /* [n_speeds][hidden] fp32: the tied head's speed rows */
    uint32_t noise_floats;             /* per segment: speed latent, then path latent */
    uint32_t speed_out, plan_out;      /* per segment: the speed planner's outputs, then the path's */
    uint64_t seed;
    int sequential;                    /* VH_MINDDRIVE_ROUNDS=sequential: the rounds as two passes, as the
                                          released code runs them (for measuring what one pass saves) */
    float *warmup_tokens;
    vh_camera_front front;             /* the camera front end (config NULL without it) */
    vh_camera_stream *stream;          /* its state across frames (NULL without it) */
};

typedef struct minddrive_job {
    float *hidden;                     /* [HIDDEN_ROWS][hidden] */
    float *noise;                      /* [2][noise_floats]: the decision segment's stays zero */
    float *plan;                       /* [2][plan_out] */
    uint32_t hidden_rows[HIDDEN_ROWS];
    int32_t command;
    const float *vision_tokens;        /* the frame's (its record's copy, alive for the job's passes), or
                                          tokens: both rounds read the same rows */
    vh_camera_frame *cameras;          /* with the front end: the frame's prepared cameras */
    float *tokens;                     /* [n_vision_tokens][hidden] the front end's tokens */
    int use_cameras;                   /* this frame came as cameras (else as vision tokens) */
} minddrive_job;

/* A token the checkpoint's tokenizer must hold as an added token (MindDrive's 15, given their ids
 * by the released code's load and written into tokenizer.json by the converter). */
static vh_status require_token(const vh_program *p, const char *token, int32_t *id, vh_error *err)
{
    *id = vh_minddrive_token_id(p->tokenizer, token);
    if (*id < 0 || *id >= (int32_t)p->config->llm.vocab)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s/tokenizer.json has no added token '%s' below the model's %u "
                            "embedding rows (convert the checkpoint with tools/minddrive/convert_minddrive.py)",
                            vh_checkpoint_dir(p->model->checkpoint), token, p->config->llm.vocab);
    return VH_OK;
}

/* The row of `id` in a round's segment (the vision rows counted), or -1 when it is not there once. */
static int64_t row_of(const round_prompt *r, uint32_t n_vision, int32_t id)
{
    int64_t row = -1;
    for (size_t i = 0; i < r->n_ids; i++)
        if (r->ids[i] == id) {
            if (row >= 0) return -1;
            row = (int64_t)(i < r->image_index ? i : i + n_vision);
        }
    return row;
}

static vh_status make_prompts(vh_program *p, vh_error *err)
{
    const vh_minddrive_config *c = p->config;
    const char *dir = vh_checkpoint_dir(p->model->checkpoint);
    vh_status st;
    for (uint32_t i = 0; i < c->n_speeds; i++)
        if ((st = require_token(p, c->speed_tokens[i], &p->speed_ids[i], err))) return st;
    int32_t speed_feature, path_feature;
    if ((st = require_token(p, c->speed_feature, &speed_feature, err)) ||
        (st = require_token(p, c->path_feature, &path_feature, err)))
        return st;
    const vh_minddrive_round *rounds[2] = {&c->decision, &c->action};
    for (int r = 0; r < 2; r++) {
        round_prompt *rp = &p->round[r];
        if ((st = vh_minddrive_round_ids(p->tokenizer, rounds[r]->text, c->image_marker, &rp->ids, &rp->n_ids,
                                         &rp->image_index, err)))
            return st;
    }
    /* The decision round ends with a random speed token, causally irrelevant to the logits read
     * one row before it: that row is the segment's last, and the token is never run. */
    round_prompt *d = &p->round[DECISION];
    int ends_with_speed = 0;
    for (uint32_t i = 0; d->n_ids > d->image_index && i < c->n_speeds; i++)
        ends_with_speed |= d->ids[d->n_ids - 1] == p->speed_ids[i];
    if (!ends_with_speed)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s/config.json: prompt.decision.text must end with one of the "
                            "speed tokens (the released prompt's final <SPT>), after the image", dir);
    d->n_ids--;
    const int64_t speed_row = row_of(&p->round[ACTION], c->n_vision_tokens, speed_feature);
    const int64_t path_row = row_of(&p->round[ACTION], c->n_vision_tokens, path_feature);
    if (speed_row < 0 || path_row < 0)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s/config.json: prompt.action.text must hold '%s' and '%s' once "
                            "each", dir, c->speed_feature, c->path_feature);
    p->speed_row = (uint32_t)speed_row;
    p->path_row = (uint32_t)path_row;
    for (int r = 0; r < 2; r++) {
        p->round[r].rows = (uint32_t)p->round[r].n_ids + c->n_vision_tokens;
        if (p->round[r].rows > c->llm.max_positions)
            return vh_error_set(err, VH_ERR_BAD_MODEL, "the %s round's %u rows exceed max_position_embeddings %u",
                                r == DECISION ? "decision" : "action", p->round[r].rows, c->llm.max_positions);
    }
    return VH_OK;
}

/* The speed tokens' rows of the tied embedding, in fp32 (the decision's logits are their dot
 * products with the decision row). */
static vh_status copy_speed_rows(vh_program *p, vh_error *err)
{
    const vh_tensor_view *e = &p->mm->embed;
    const uint32_t H = p->config->llm.hidden;
    if (!(p->speed_embed = malloc(sizeof(float) * p->config->n_speeds * H)))
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    for (uint32_t i = 0; i < p->config->n_speeds; i++)
        for (uint32_t j = 0; j < H; j++) {
            const size_t at = (size_t)p->speed_ids[i] * H + j;
            float v;
            if (e->dtype == VH_DTYPE_F32) v = ((const float *)e->data)[at];
            else if (e->dtype == VH_DTYPE_BF16) v = vh_bf16_to_f32(((const uint16_t *)e->data)[at]);
            else v = vh_f16_to_f32(((const uint16_t *)e->data)[at]);
            p->speed_embed[(size_t)i * H + j] = v;
        }
    return VH_OK;
}

static void program_free(vh_program *p)
{
    if (!p) return;
    vh_hf_tokenizer_free(p->tokenizer);
    for (int r = 0; r < 2; r++) free(p->round[r].ids);
    free(p->speed_embed);
    free(p->warmup_tokens);
    vh_camera_stream_free(p->stream);
    free(p);
}

static vh_status program_create(const vh_model *m, const vh_session_params *params, vh_program **out,
                                vh_program_shape *shape, vh_error *err)
{
    *out = NULL;
    vh_program *p = calloc(1, sizeof *p);
    if (!p) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    p->model = m;
    p->mm = vh_minddrive_model_of(m);
    p->config = &p->mm->config;
    p->seed = params->seed;
    vh_status rounds_st = vh_knob_minddrive_sequential(&p->sequential, err);
    if (rounds_st) {
        free(p);
        return rounds_st;
    }
    if (p->sequential && params->execution_mode == VH_EXECUTION_PACKED) {
        free(p);
        return vh_error_set(err, VH_ERR_UNSUPPORTED, "VH_MINDDRIVE_ROUNDS=sequential runs in the serial and pipeline "
                            "modes only");
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", vh_checkpoint_dir(m->checkpoint));
    vh_status st = vh_hf_tokenizer_load(path, &p->tokenizer, err);
    if (!st && p->tokenizer->vocab_size > p->config->llm.vocab)
        st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s has ids up to %u, more than the model's %u embedding rows", path,
                          p->tokenizer->vocab_size - 1, p->config->llm.vocab);
    if (!st) st = make_prompts(p, err);
    if (!st) st = copy_speed_rows(p, err);
    if (!st && p->config->front_end.present) {
        p->front = (vh_camera_front){.frame_name = "a MindDrive frame", .config = &p->config->front_end,
                                     .graph = &p->mm->front, .n_slots = m->desc.n_slots};
        st = vh_camera_stream_create(&p->front, &p->stream, err);
    }
    if (st) {
        program_free(p);
        return st;
    }
    const vh_minddrive_config *c = p->config;
    p->noise_floats = c->speed.latent_dim + c->path.latent_dim;
    p->speed_out = 2 * c->speed.n_modes * c->speed.n_steps + 2 * c->speed.latent_dim;
    p->plan_out = p->speed_out + 2 * c->path.n_modes * c->path.n_steps + 2 * c->path.latent_dim;
    memset(shape, 0, sizeof *shape);
    shape->action_dim = 1; /* the speed decision */
    shape->passes_per_frame = p->sequential ? 2 : 1;
    shape->segments_per_frame = 2;
    shape->max_context = p->round[0].rows > p->round[1].rows ? p->round[0].rows : p->round[1].rows;
    shape->pass_uses = PASS_USES;
    shape->images_per_frame = c->front_end.present ? c->front_end.n_cameras : 1;
    *out = p;
    return VH_OK;
}

const int32_t *vh_minddrive_program_prompt(const vh_program *p, int round, size_t *n_ids, size_t *image_index)
{
    const round_prompt *r = &p->round[round == DECISION ? DECISION : ACTION];
    *n_ids = r->n_ids;
    *image_index = r->image_index;
    return r->ids;
}

static vh_status check_frame(const vh_program *p, const vh_frame *f, vh_error *err)
{
    const vh_minddrive_config *c = p->config;
    if (f->unnorm_key)
        return vh_error_set(err, VH_ERR_UNNORM_KEY, "frame->unnorm_key '%.64s': a MindDrive model has no dataset "
                            "statistics to choose from (leave it NULL)", f->unnorm_key);
    vh_status st;
    if (!f->vision_tokens && c->front_end.present && (st = vh_camera_frame_check(&p->front, f, err))) return st;
    if (!f->vision_tokens && !c->front_end.present)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "a MindDrive frame needs its %u vision tokens "
                            "(frame->vision_tokens): this checkpoint has no camera front end", c->n_vision_tokens);
    if (f->vision_tokens && (f->n_vision_tokens != c->n_vision_tokens || f->vision_token_width != c->llm.hidden))
        return vh_error_set(err, VH_ERR_BAD_FRAME, "frame->vision_tokens is %u x %u; the model takes %u x %u",
                            f->n_vision_tokens, f->vision_token_width, c->n_vision_tokens, c->llm.hidden);
    if (f->command < 0 || f->command >= VH_MINDDRIVE_COMMANDS)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "a MindDrive frame needs a command 0..%d (frame->command is %d): "
                            "it picks the path planner's mode", VH_MINDDRIVE_COMMANDS - 1, f->command);
    if (f->noise && f->n_noise != p->noise_floats)
        return vh_error_set(err, VH_ERR_BAD_FRAME, "frame->noise has %u floats; the two planners take %u (speed %u, "
                            "then path %u)", f->n_noise, p->noise_floats, c->speed.latent_dim, c->path.latent_dim);
    return VH_OK;
}

static void job_free(vh_family_frame *frame)
{
    minddrive_job *mj = frame->state;
    free(mj->hidden);
    free(mj->noise);
    free(mj->plan);
    vh_camera_frame_free(mj->cameras);
    free(mj->tokens);
    free(mj);
    frame->state = NULL;
}

static vh_status job_init(const vh_program *p, vh_family_frame *frame, vh_error *err)
{
    minddrive_job *mj = calloc(1, sizeof *mj);
    if (!mj) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (frame buffers)");
    frame->state = mj;
    mj->hidden = malloc(sizeof(float) * HIDDEN_ROWS * p->config->llm.hidden);
    mj->noise = calloc(2 * (size_t)p->noise_floats, sizeof(float));
    mj->plan = calloc(2 * (size_t)p->plan_out, sizeof(float));
    if (!mj->hidden || !mj->noise || !mj->plan)
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (frame buffers)");
    if (p->config->front_end.present) {
        vh_status st = vh_camera_frame_create(&p->front, &mj->cameras, err);
        if (st) return st;
        if (!(mj->tokens = malloc(sizeof(float) * p->config->n_vision_tokens * p->config->llm.hidden)))
            return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (frame buffers)");
    }
    return VH_OK;
}

/* A round's rows at `tokens`: [text before the image | the vision tokens | the rest]. */
static uint32_t put_round(int32_t *tokens, const round_prompt *r, uint32_t n_vision)
{
    memcpy(tokens, r->ids, sizeof(int32_t) * r->image_index);
    for (uint32_t i = 0; i < n_vision; i++) tokens[r->image_index + i] = VH_TOKEN_IMAGE;
    memcpy(tokens + r->image_index + n_vision, r->ids + r->image_index, sizeof(int32_t) * (r->n_ids - r->image_index));
    return r->rows;
}

/* The pass of rounds [first, first + n), each a segment on its own KV slot with its own LoRA set,
 * its rows[] at frame->tokens: both rounds side by side, or with sequential rounds the one of this
 * pass (`first` is then also its first hidden row, plan and noise). */
static void set_pass(vh_family_frame *frame, uint32_t first, uint32_t n, const uint32_t *rows)
{
    const vh_program *p = frame->program;
    const vh_minddrive_config *c = p->config;
    minddrive_job *mj = frame->state;
    const vh_minddrive_round *round[2] = {[DECISION] = &c->decision, [ACTION] = &c->action};
    frame->pass = (vh_pass_request){
        .kind = VH_PASS_PREFILL, .n_segments = n, .tokens = frame->tokens,
        .n_hidden_rows = HIDDEN_ROWS / 2 * n, .hidden_rows = mj->hidden_rows + 2 * first,
        .out_hidden = mj->hidden + (size_t)2 * first * c->llm.hidden,
        .plan_noise = mj->noise + (size_t)first * p->noise_floats, .plan_noise_stride = p->noise_floats,
        .out_plan = mj->plan + (size_t)first * p->plan_out, .plan_out_stride = p->plan_out};
    for (uint32_t k = 0; k < n; k++) {
        const uint32_t r = first + k;
        frame->pass.segments[k] = (vh_pass_segment){.slot = r, .n_rows = rows[k], .vision_rows = mj->vision_tokens,
                                                    .adapter_set = round[r]->lora_set, .plans = r == ACTION};
    }
}

static vh_status prepare(vh_family_frame *frame, const vh_frame_input *in, vh_error *err)
{
    const vh_program *p = frame->program;
    const vh_minddrive_config *c = p->config;
    minddrive_job *mj = frame->state;
    mj->use_cameras = !in->vision_tokens;
    if (mj->use_cameras) {
        vh_status st = vh_camera_frame_prepare(&p->front, mj->cameras, in, err);
        if (st) return st;
    }
    uint32_t rows[2];
    rows[DECISION] = put_round(frame->tokens, &p->round[DECISION], c->n_vision_tokens);
    rows[ACTION] = p->sequential ? 0 : put_round(frame->tokens + rows[DECISION], &p->round[ACTION], c->n_vision_tokens);
    mj->command = in->command;
    mj->vision_tokens = mj->use_cameras ? mj->tokens : in->vision_tokens;
    float *noise = mj->noise + p->noise_floats; /* the action segment's */
    if (in->noise) memcpy(noise, in->noise, sizeof(float) * p->noise_floats);
    else vh_driving_seeded_noise(p->seed, in->sequence, noise, p->noise_floats);
    /* request rows: the action round follows the decision round in one pass, or has its own */
    const uint32_t action_row0 = p->sequential ? 0 : rows[DECISION];
    mj->hidden_rows[0] = mj->hidden_rows[1] = rows[DECISION] - 1;
    mj->hidden_rows[2] = action_row0 + p->speed_row;
    mj->hidden_rows[3] = action_row0 + p->path_row;
    set_pass(frame, DECISION, p->sequential ? 1 : 2, rows);
    return VH_OK;
}

/* The camera front end's runs (a frame of vision tokens has none): its tokens feed both rounds. */
static vh_status run_vision(vh_family_frame *frame, const vh_vision_runner *runner, vh_error *err)
{
    const vh_program *p = frame->program;
    minddrive_job *mj = frame->state;
    if (!mj->use_cameras) return VH_OK;
    return vh_camera_frame_run(&p->front, p->stream, mj->cameras, runner, mj->tokens, err);
}

static const float *vision_tokens(const vh_family_frame *frame, uint32_t *rows, uint32_t *width)
{
    const minddrive_job *mj = frame->state;
    if (!mj->use_cameras) return NULL;
    *rows = frame->program->config->n_vision_tokens;
    *width = frame->program->config->llm.hidden;
    return mj->tokens;
}

static int advance(vh_family_frame *frame)
{
    const vh_program *p = frame->program;
    /* the planners ran after the head, unless the action round is still to come */
    if (!p->sequential || frame->pass.segments[0].slot == ACTION) return 0;
    /* sequential rounds: the action round as a second pass, on its own KV slot as in one pass */
    const uint32_t rows = put_round(frame->tokens, &p->round[ACTION], p->config->n_vision_tokens);
    set_pass(frame, ACTION, 1, &rows);
    return 1;
}

/* The speed decision: log_softmax over the speed tokens' logits at the decision row, argmax
 * (the first of equals, as torch.argmax). */
static uint32_t decide_speed(const vh_program *p, const float *row, double *log_probs)
{
    const uint32_t H = p->config->llm.hidden, n = p->config->n_speeds;
    double top = -INFINITY;
    uint32_t best = 0;
    for (uint32_t i = 0; i < n; i++) {
        double s = 0;
        for (uint32_t j = 0; j < H; j++) s += (double)row[j] * p->speed_embed[(size_t)i * H + j];
        log_probs[i] = s;
        if (s > top) top = s, best = i;
    }
    double sum = 0;
    for (uint32_t i = 0; i < n; i++) sum += exp(log_probs[i] - top);
    for (uint32_t i = 0; i < n; i++) log_probs[i] -= top + log(sum);
    return best;
}

static void result(const vh_family_frame *frame, vh_frame_result *out)
{
    const vh_program *p = frame->program;
    const vh_minddrive_config *c = p->config;
    const minddrive_job *mj = frame->state;
    const float *plan = mj->plan + p->plan_out; /* the action segment's */
    double log_probs[VH_MINDDRIVE_MAX_SPEEDS];
    const uint32_t speed = decide_speed(p, mj->hidden, log_probs);
    out->kind = VH_ACTION_TRAJECTORY;
    out->action_dim = 1;
    out->values[0] = speed;
    out->token_ids[0] = p->speed_ids[speed];
    out->n_points = c->path.n_steps;
    float *lp = vh_frame_result_add_extra(out, "speed_log_probs", c->n_speeds);
    for (uint32_t i = 0; lp && i < c->n_speeds; i++) lp[i] = (float)log_probs[i];
    float *speed_traj = vh_frame_result_add_extra(out, "speed_trajectory", 2 * c->speed.n_steps);
    vh_driving_planner_result(out, plan, c->speed.n_modes, c->speed.n_steps, c->speed.latent_dim, speed, "speed_modes",
                              "speed_mu", "speed_log_sigma", speed_traj);
    vh_driving_planner_result(out, plan + p->speed_out, c->path.n_modes, c->path.n_steps, c->path.latent_dim,
                              c->path_mode_of_command[mj->command], "path_modes", "path_mu", "path_log_sigma",
                              out->trajectory);
}

const float *vh_minddrive_frame_hidden(const vh_family_frame *frame)
{
    return ((const minddrive_job *)frame->state)->hidden;
}

static int warmup_input(vh_program *p, vh_frame *frame)
{
    return vh_driving_warmup_frame(&p->warmup_tokens, p->config->n_vision_tokens, p->config->llm.hidden, frame);
}

/* The two rounds prepare lays out, decision then action (the decision's final speed token is not
 * among its ids: the model never runs it). The instruction: ignored, as in frames; the command picks
 * the path planner's mode, not the prompts, but must be one a frame could have. */
static vh_status prompt_rounds(const vh_program *p, const char *instruction, int32_t command,
                               vh_family_prompt_round rounds[VH_FAMILY_MAX_PROMPT_ROUNDS], uint32_t *n_rounds,
                               vh_error *err)
{
    (void)instruction;
    static const char *const names[2] = {[DECISION] = "decision", [ACTION] = "action"};
    *n_rounds = 0;
    if (command != VH_COMMAND_NONE && (command < 0 || command >= VH_MINDDRIVE_COMMANDS))
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "request->command is %d: a MindDrive model's commands are "
                            "0..%d (or VH_COMMAND_NONE: its prompts are the same for each)", command,
                            VH_MINDDRIVE_COMMANDS - 1);
    for (int r = 0; r < 2; r++) {
        const round_prompt *rp = &p->round[r];
        vh_status st = vh_family_prompt_round_set(&rounds[r], names[r], rp->ids, rp->n_ids, (int64_t)rp->image_index,
                                                  p->config->n_vision_tokens, err);
        if (st) {
            vh_family_prompt_rounds_free(rounds, (uint32_t)r);
            return st;
        }
    }
    *n_rounds = 2;
    return VH_OK;
}

const vh_family vh_family_minddrive = {
    .name = "minddrive",
    .model_type = "minddrive",
    .load = vh_minddrive_load,
    .unload = vh_minddrive_unload,
    .program_create = program_create,
    .program_free = program_free,
    .check_frame = check_frame,
    .job_init = job_init,
    .job_free = job_free,
    .prepare = prepare,
    .run_vision = run_vision,
    .vision_tokens = vision_tokens,
    .advance = advance,
    .result = result,
    .warmup_input = warmup_input,
    .prompt_rounds = prompt_rounds,
};
