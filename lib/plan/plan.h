/*
 * Which backend runs which blocks: the model's blocks cut into stages, each a contiguous range of
 * blocks on one executor. The vision towers, the projector and the LLM's embedding always sit on
 * the first stage (they produce the LLM's input rows); later stages hold LLM blocks and the head.
 *
 * One backend: one stage. Two: the first holds the vision side and the first llm_split LLM blocks,
 * the second the other LLM blocks and the head (final norm + LM head). The split is given, or
 * chosen: as many blocks as fit a GPU memory budget (counted by the backend's own plan_memory), and
 * without a budget the split that balances the two stages' measured per-block costs
 * (plan/split_calibration.h). A dynamic zone of `split_zone` blocks on each side of the split is
 * held by both executors, so the split scheduler can move each new frame's cut inside
 * [split_min, split_max] without reloading anything.
 */
#ifndef VH_PLAN_PLAN_H
#define VH_PLAN_PLAN_H

#include "backend/plugin_loader.h"
#include "model/model.h"

#define VH_MAX_STAGES 4

typedef struct vh_stage {
    vh_plugin *plugin;                 /* owned by the plan */
    vh_executor *executor;             /* owned by the plan */
    uint32_t first_block, n_blocks;    /* the blocks the executor holds (stages overlap in the zone) */
    vh_device_kind device;
} vh_stage;

typedef enum vh_split_source {
    VH_SPLIT_SINGLE = 0,               /* one stage: no split */
    VH_SPLIT_EXPLICIT,                 /* the caller's llm_split */
    VH_SPLIT_BUDGET,                   /* the most blocks the first stage's memory budget holds */
    VH_SPLIT_BALANCED                  /* from measured per-block costs */
} vh_split_source;

/* Per-frame costs of the two stages as the planner estimated them (ns; 0 when not measured). */
typedef struct vh_stage_costs {
    double fixed_ns[2];                /* stage 0: vision + projector; stage 1: the LM head */
    double block_ns[2];                /* one LLM block, a whole frame (prefill + decode steps) */
} vh_stage_costs;

typedef struct vh_plan {
    uint32_t n_stages;
    vh_stage stages[VH_MAX_STAGES];
    uint32_t llm_first_block;          /* model block index of LLM layer 0 */
    uint32_t n_llm_layers;
    uint32_t llm_split;                /* two stages: the LLM blocks a frame runs on stage 0 by default */
    uint32_t split_min, split_max;     /* the dynamic zone: cuts both executors can serve */
    vh_split_source split_source;
    vh_stage_costs costs;              /* VH_SPLIT_BALANCED: what the choice was made from */
} vh_plan;

typedef struct vh_plan_request {
    const char *backends;              /* comma-separated names, or NULL: the best available */
    const char *plugin_path;
    int32_t n_threads;
    uint32_t max_context;              /* KV positions per sequence */
    uint32_t max_sequences;            /* KV sequences: frames in flight x segments_per_frame */
    uint32_t segments_per_frame;       /* a frame's independent prompts (its rows: max_context each); 0: 1 */
    uint32_t images_per_pass;          /* new frames a pass may carry (packed passes); 0: 1 */
    uint32_t images_per_frame;         /* images one frame's vision runs carry (a rig's cameras); 0: 1 */
    uint64_t gpu_memory_budget;        /* for GPU executors; 0: the whole card */
    int32_t llm_split;                 /* two backends: LLM blocks on the first (0..n_layers); -1: choose */
    uint32_t split_zone;               /* blocks on each side of the split held by both stages */
    uint32_t action_tokens;            /* decode passes per frame, for the cost balance */
    const vh_logger *log;
    /* Each stage's executor being created (its weights made resident), with the stage's index, the
     * number of stages, its backend and the share of its weights made resident so far: 0 before
     * executor_create, then as the backend reports (vh_executor_params.progress_fn). A
     * nonzero status stops the create: the executor frees what it made and the plan returns that
     * status and err. May be NULL. */
    vh_status (*executor_progress)(void *user, uint32_t stage, uint32_t n_stages, const char *backend, double done,
                                   vh_error *err);
    void *executor_progress_user;
} vh_plan_request;

/* Load the plugins, assign blocks to stages, create the executors (weights made resident). */
vh_status vh_plan_create(const vh_model *model, const vh_plan_request *req, vh_plan *plan, vh_error *err);
void vh_plan_destroy(vh_plan *plan);

/* Memory for hidden states crossing between this plan's executors: a GPU stage's page-locked host
 * memory when it offers it, else malloc. */
void *vh_plan_host_alloc(const vh_plan *plan, size_t bytes);
void vh_plan_host_free(const vh_plan *plan, void *ptr);

/* "cpu_generic" or "cuda,cpu_amx" */
void vh_plan_describe(const vh_plan *plan, char *buf, size_t size);

/* Whether the plugin knows every block of [first_block, first_block + n_blocks): kind, roles,
 * parameters, options, wiring (vh_block_check). VH_ERR_UNSUPPORTED names the block and what it
 * lacks. */
vh_status vh_plan_check_support(const vh_plugin *plugin, const vh_model *model, uint32_t first_block,
                                uint32_t n_blocks, vh_error *err);

#endif
