/*
 * A model family (OpenVLA, and the driving VLAs to come): everything the core does not know about
 * a model. The core (session, queue, pipeline, plan, checkpoint readers, image and text
 * libraries) names no family; it finds one by config.json's model_type in the family table
 * (family_table.c) and calls it through this table of functions.
 *
 * A family owns:
 *   - its config: detection (model_type) and parsing, tensor names, the block list with its
 *     phases (lib/model/model.h says which phases two stages may split);
 *   - its tokenizer and prompt;
 *   - the per-frame program: prepare a frame (family_frame.h) from a frame's inputs (the vision
 *     planes, the prefill rows and the first pass's request), decide after each pass whether
 *     another follows (and set its request up), and turn a finished frame into a result;
 *   - episode state: what a frame carries to later frames of its episode. Each frame's inputs
 *     name its episode (vh_session_reset starts a new one); a family that keeps state starts
 *     afresh at a frame of a new episode.
 * The core owns the passes themselves: it turns each pass request (pass_request.h) into batches
 * and runs the vision blocks and the rows on the plan's stages, serially, pipelined or packed with
 * other frames' rows (lib/pipeline/). A family includes nothing of lib/pipeline or lib/plan.
 *
 * Adding a family is a folder lib/family/<name>/ with one file defining a `vh_family`, and one
 * entry in family_table.c (doc/architecture.md, "Model families").
 *
 * Threading: load / unload and program_create / program_free run in the session's creating
 * thread. The frame functions run in whichever pipeline thread holds the frame (one at a time per
 * frame, frames of one session possibly at once): they may read the program but not change it.
 * (warmup_input runs in the creating thread before any frame.)
 */
#ifndef VH_FAMILY_FAMILY_H
#define VH_FAMILY_FAMILY_H

#include "family/family_frame.h"
#include "model/model.h"
#include "queue/frame_io.h"
#include "util/error.h"

/* A family's per-session state (statistics chosen by the session's parameters, episode state):
 * defined by each family. */
typedef struct vh_program vh_program;

/* What the core needs to know of a session's frames to size and drive them. */
typedef struct vh_program_shape {
    uint32_t action_dim;               /* values in an action */
    uint32_t passes_per_frame;         /* passes a frame makes at most (prefill + decode steps): the
                                          packed mode's frames in flight follow it */
    uint32_t max_context;              /* KV positions a frame needs at most (per segment) */
    uint32_t segments_per_frame;       /* independent prompts a frame's passes carry side by side, each
                                          on its own KV slot (0 or 1: one; MindDrive: 2) */
    uint32_t pass_uses;                /* VH_PASS_USES_* (family/pass_request.h): what its passes ask */
    uint32_t images_per_frame;         /* images a frame's vision side runs at once (run_vision: a
                                          driving rig's cameras); 0: 1 */
    char label[64];                    /* reported as vh_session_info.unnorm_key */
} vh_program_shape;

/* One round of a frame's prompt (vh_prompt_round without the caller's buffer). */
#define VH_FAMILY_MAX_PROMPT_ROUNDS 4
typedef struct vh_family_prompt_round {
    const char *name;                  /* static: "prompt", "decision", "action" */
    int32_t *ids;                      /* malloc'd */
    size_t n_ids;
    int64_t image_position;            /* the vision rows go before ids[image_position]; -1: none */
    uint32_t n_image_rows;
} vh_family_prompt_round;

/* rounds[i].ids = a malloc'd copy of ids[0 .. n_ids), and the round's other fields. */
vh_status vh_family_prompt_round_set(vh_family_prompt_round *round, const char *name, const int32_t *ids,
                                     size_t n_ids, int64_t image_position, uint32_t n_image_rows, vh_error *err);
/* Frees the ids of rounds[0 .. n_rounds) (NULL-safe) and zeroes the rounds. */
void vh_family_prompt_rounds_free(vh_family_prompt_round *rounds, uint32_t n_rounds);

/* The first stage's executor, for a vision side of several runs (vh_family.run_vision). */
typedef struct vh_vision_runner {
    void *user;
    /* executor_run of blocks [first, first + n) of the vision side on `batch` */
    vh_status (*run)(void *user, const vh_batch *batch, uint32_t first, uint32_t n, vh_error *err);
    /* read_slot: image or frame `index` of slot `slot` after the last run that wrote it */
    vh_status (*read_slot)(void *user, uint32_t slot, uint32_t index, float *dst, size_t n_floats, vh_error *err);
} vh_vision_runner;

typedef struct vh_family {
    const char *name;                  /* "openvla" */
    const char *model_type;            /* the config.json model_type it claims */

    /* Load the checkpoint folder `dir`: parse config.json (`config_text`, named `config_path` in
     * messages), open the weights (m->checkpoint), fill m's block list, phases and max_positions,
     * and keep what else it parsed in m->family_model. On failure unload is still called. */
    vh_status (*load)(vh_model *m, const char *dir, const char *config_text, size_t config_len,
                      const char *config_path, vh_error *err);
    void (*unload)(vh_model *m);       /* frees m->family_model (NULL-safe) */

    /* A session's program: reads the parameters the family has (unnorm_key, decode_positions, ...).
     * *shape describes its frames. */
    vh_status (*program_create)(const vh_model *m, const vh_session_params *params, vh_program **program,
                                vh_program_shape *shape, vh_error *err);
    void (*program_free)(vh_program *program);

    /* At submit, before the frame is copied: whether it has what the model needs (and nothing it
     * cannot use wrongly). VH_ERR_BAD_FRAME with a message naming the field. Any thread. */
    vh_status (*check_frame)(const vh_program *program, const vh_frame *frame, vh_error *err);

    /* A frame's own state (frame->state), made once per job of the pipeline. */
    vh_status (*job_init)(const vh_program *program, vh_family_frame *frame, vh_error *err);
    void (*job_free)(vh_family_frame *frame);
    /* Start a frame: fill its vision planes and prefill rows (frame->pixels, frame->tokens) from
     * the inputs and set frame->pass to the prefill. VH_ERR_BAD_FRAME when the inputs cannot make
     * a frame (the message says why). */
    vh_status (*prepare)(vh_family_frame *frame, const vh_frame_input *in, vh_error *err);
    /* After the last stage of a pass (its outputs where frame->pass asked for them): 1 when another
     * pass follows (frame->pass set up for it), 0 when the frame is done. */
    int (*advance)(vh_family_frame *frame);
    /* The action of a finished frame (timings are the core's). */
    void (*result)(const vh_family_frame *frame, vh_frame_result *out);

    /* A typical frame for the session's warm-up, as a caller would submit it (its buffers the
     * program's): 1; 0 when the model
     * cannot run one (then there is no warm-up); -1 when out of memory. */
    int (*warmup_input)(vh_program *program, vh_frame *frame);
    /* Every round of the prompt a frame with this instruction and command is fed, in run order, into
     * rounds[0 .. *n_rounds): the ids prepare lays out (each round's malloc'd; none left on failure).
     * VH_ERR_INVALID_ARGUMENT, the message naming request->instruction or ->command, when no frame
     * could have them. Any thread. */
    vh_status (*prompt_rounds)(const vh_program *program, const char *instruction, int32_t command,
                               vh_family_prompt_round rounds[VH_FAMILY_MAX_PROMPT_ROUNDS], uint32_t *n_rounds,
                               vh_error *err);
    /* Optional: a vision side of several runs with the family's own work between them (the driving
     * front end, whose heads keep memory banks per stream). The core calls it instead of running
     * blocks [0, llm_embed_block) once, on the first stage's thread before the frame's prefill,
     * one frame at a time in submission order (a frame answered before it starts is skipped); it
     * is the one frame function that may change what the program keeps across frames (the family
     * keeps that behind a pointer of the program). NULL: the core runs the vision blocks on the
     * frame's pixels. */
    vh_status (*run_vision)(vh_family_frame *frame, const vh_vision_runner *runner, vh_error *err);
    /* Optional, after run_vision succeeded: the vision tokens its front end made for the frame
     * ([*rows][*width], the frame's own buffer), or NULL when it made none (a frame of tokens). */
    const float *(*vision_tokens)(const vh_family_frame *frame, uint32_t *rows, uint32_t *width);
} vh_family;

/* The family claiming `model_type`, or NULL. */
const vh_family *vh_family_find(const char *model_type);
/* The model types the table knows, comma-separated, for messages. */
void vh_family_known_types(char *list, size_t size);

#endif
