/*
 * The checks every block executor makes the same way, one copy of each with its message: the
 * executor's parameters and blocks at creation, a batch's blocks, struct, options, images, head
 * outputs and LoRA sets at each run, the row counts of the hidden-state hand-offs. `backend` is
 * the plugin's name, the prefix of every message. Each returns VH_OK or the status with the
 * message written to err. A backend adds its own limits (and messages) beside them.
 */
#ifndef VH_BLOCK_EXECUTOR_H
#define VH_BLOCK_EXECUTOR_H

#include "vlahybrid/backend.h"

/* The parameters and model description are of sizes this plugin knows: *known is the caller's
 * parameters, the fields both know. */
vh_status vh_block_executor_read_params(const char *backend, const vh_executor_params *params,
                                        vh_executor_params *known, char *err, size_t err_size);

/* Every block the executor is to hold (of those the model has) is of a kind and feature set in
 * `kinds` (the plugin's table: vh_block_variant_support, or the entries of it the backend runs),
 * as vh_block_check checks it, its graph is one the executors run and its tensors are those its
 * features read: VH_ERR_UNSUPPORTED otherwise; a decoder layer's LoRA pairs whole (both matrices,
 * ranks that agree): VH_ERR_INVALID_ARGUMENT otherwise. */
vh_status vh_block_executor_check_blocks(const char *backend, const vh_kind_support *kinds, uint32_t n_kinds,
                                         const vh_executor_params *params, char *err, size_t err_size);

/* The executor's blocks are the model's, its limits not zero, its device one of n_devices. */
vh_status vh_block_executor_check_params(const char *backend, const vh_executor_params *params, uint32_t n_devices,
                                         char *err, size_t err_size);

/* A run: blocks [first_block, first_block + n_blocks) are all the executor's; the batch's struct,
 * options (VH_BLOCK_VARIANT_BATCH_OPTIONS) and segment arrays are ones it knows. */
vh_status vh_block_executor_check_run(const char *backend, const vh_executor_params *params, const vh_batch *batch,
                                      uint32_t first_block, uint32_t n_blocks, char *err, size_t err_size);

/* A run of blocks that read images: 1 .. max_images of them, every tower's pixels given. */
vh_status vh_block_executor_check_images(const char *backend, const vh_executor_params *params,
                                         const vh_batch *batch, char *err, size_t err_size);

/* A run through the head: it writes tokens (then it needs its LM weight) or hidden rows. */
vh_status vh_block_executor_check_head(const char *backend, const vh_batch *batch, int has_lm_weight, char *err,
                                       size_t err_size);

/* Every segment's LoRA set is held by this LLM layer (lora_sets: bit s for set s; block_index: the
 * model's). Set 0 always is: without adapters of its own a layer runs its base weights, as it does
 * for a batch without VH_BATCH_SEGMENT_ADAPTERS. Set 1 must be there: running the base instead of
 * the second expert would be a silent wrong answer. */
vh_status vh_block_executor_check_adapters(const char *backend, const vh_batch *batch, uint32_t lora_sets,
                                           uint32_t layer, uint32_t block_index, char *err, size_t err_size);

/* What the blocks of one run read and write: the parts of the batch they need. */
typedef struct vh_block_run_needs {
    int images, pixels, rows;          /* some block reads the batch's images, its pixels, its rows */
    int head, planner;                 /* the read-out is in the run; a planner is */
    uint32_t head_block;               /* the read-out's index in the run (head) */
    int queries;                       /* some block writes a query set */
    int gathers;                       /* the most images' tokens a block gathers into a frame's set */
} vh_block_run_needs;

/* A run with blocks on query sets: 1 .. max_frames frames (where a block gathers `gathers` images'
 * tokens a frame, the frames' images within max_images); the slot inputs, if any, only for QUERIES
 * slots. */
vh_status vh_block_executor_check_frames(const char *backend, const vh_executor_params *params,
                                         const vh_batch *batch, int gathers, char *err, size_t err_size);

/* A run of blocks [first_block, first_block + n_blocks) of the model, as every executor checks it:
 * what its blocks need (*needs), the read-out's outputs (vh_block_executor_check_head), each
 * planner's batch layout, and every decoder layer holding the LoRA set each segment names. The
 * descriptors were checked at create; this reads them, not a backend's own block structs. */
vh_status vh_block_executor_check_run_blocks(const char *backend, const vh_model_desc *m, const vh_batch *batch,
                                             uint32_t first_block, uint32_t n_blocks, vh_block_run_needs *needs,
                                             char *err, size_t err_size);

/* The LoRA sets block d holds: bit s where any pair of set s is there (pairs are whole:
 * vh_block_executor_check_blocks). */
uint32_t vh_block_lora_sets_held(const vh_block_desc *d);

/* A hand-off of hidden rows (`what`: "read_hidden", "write_hidden", "bind_hidden") of an executor
 * that holds rows (has_rows), with its memory, of 1 .. max_rows rows. */
vh_status vh_block_executor_check_hidden(const char *backend, const char *what, int has_rows, const void *rows,
                                         uint32_t n_rows, uint32_t max_rows, char *err, size_t err_size);

#endif
