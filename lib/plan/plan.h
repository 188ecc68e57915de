/*
 * Which backend runs which blocks: the model's blocks cut into stages, each a contiguous range of
 * blocks on one executor. The vision towers, the projector and the LLM's embedding always sit on
 * the first stage (they produce the LLM's input rows); later stages hold LLM blocks and the head.
 * One backend: one stage. Two: the first holds the vision side and the first llm_split LLM blocks,
 * the second the other LLM blocks and the head (final norm + LM head); the frame runner hands the
 * rows' hidden states over between them.
 */
#ifndef VH_PLAN_PLAN_H
#define VH_PLAN_PLAN_H

#include "backend/plugin_loader.h"
#include "model/openvla_model.h"

#define VH_MAX_STAGES 4

typedef struct vh_stage {
    vh_plugin *plugin;                 /* owned by the plan */
    vh_executor *executor;             /* owned by the plan */
    uint32_t first_block, n_blocks;
} vh_stage;

typedef struct vh_plan {
    uint32_t n_stages;
    vh_stage stages[VH_MAX_STAGES];
} vh_plan;

typedef struct vh_plan_request {
    const char *backends;              /* comma-separated names, or NULL: the best available */
    const char *plugin_path;
    int32_t n_threads;
    uint32_t max_context;              /* KV positions per sequence */
    uint64_t gpu_memory_budget;        /* for GPU executors; 0: the whole card */
    int32_t llm_split;                 /* two backends: LLM blocks on the first (0..n_layers); -1: unset */
    const vh_logger *log;
} vh_plan_request;

/* Load the plugins, assign blocks to stages, create the executors (weights made resident). */
vh_status vh_plan_create(const vh_model *model, const vh_plan_request *req, vh_plan *plan, vh_error *err);
void vh_plan_destroy(vh_plan *plan);

/* "cpu_generic" or "cuda,cpu_amx" */
void vh_plan_describe(const vh_plan *plan, char *buf, size_t size);

#endif
