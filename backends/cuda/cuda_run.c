/*
 * Running a batch: its checks, the rows staged in the pinned mirrors, the blocks enqueued on the
 * stream (or a captured graph replayed, cuda_graphs.c), the outputs copied back, one wait at the
 * end; and the hidden rows handed between stages.
 */
#include "cuda_run.h"

#include "backend_error.h"
#include "block_executor.h"
#include "cuda_graphs.h"

#include <string.h>

cudaError_t cuda_wait_stream(vh_executor *e)
{
    if (!e->done) return cudaStreamSynchronize(e->stream);
    cudaError_t ce = cudaEventRecord(e->done, e->stream);
    return ce == cudaSuccess ? cudaEventSynchronize(e->done) : ce;
}

static vh_status validate_and_stage_rows(vh_executor *e, const vh_batch *b, char *err, size_t err_size)
{
    const vh_executor_params *p = &e->params;
    const vh_llm_desc *l = &e->model->llm;
    if (b->n_rows == 0 || b->n_rows > p->max_rows || !b->tokens || b->n_segments == 0 || !b->segments ||
        b->n_segments > e->max_segments)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: batch of %u rows in %u segments exceeds the "
                    "executor's limits (%u rows, %u segments)", b->n_rows, b->n_segments, p->max_rows, e->max_segments);
    const int64_t kv_dim = (int64_t)l->n_kv_heads * l->head_dim;
    const uint32_t max_images = p->max_images ? p->max_images : 1;
    uint32_t row = 0, n_own = 0;
    /* segments with their own image rows take the top patch slots, below them the images' */
    for (uint32_t s = 0; s < b->n_segments && (b->options & VH_BATCH_SEGMENT_EMBEDS); s++) n_own += !!b->segments[s].embeds;
    if (n_own > max_images)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: %u segments bring their own image rows "
                               "(at most %u)", n_own, max_images);
    e->head.n_embeds = 0;
    for (uint32_t s = 0; s < b->n_segments; s++) {
        const vh_segment *seg = &b->segments[s];
        /* a segment with its own image rows (VH_BATCH_SEGMENT_EMBEDS) takes the next free patch slot */
        const int own = (b->options & VH_BATCH_SEGMENT_EMBEDS) && seg->embeds;
        const uint32_t image = own ? max_images - 1 - e->head.n_embeds : (uint32_t)seg->image;
        if (own) {
            e->head.embed_slot[e->head.n_embeds] = image;
            e->head.embed_src[e->head.n_embeds] = seg->embeds;
            e->head.embed_rows[e->head.n_embeds++] = 0;
        }
        if (seg->n_rows == 0 || seg->sequence >= p->max_sequences || row + seg->n_rows > b->n_rows ||
            (uint64_t)seg->position + seg->n_rows > p->max_context || (int64_t)seg->position + seg->rope_delta < 0)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: segment %u (sequence %u, %u rows at %u) is "
                        "outside the KV cache (%u sequences x %u positions)", s, seg->sequence, seg->n_rows,
                        seg->position, p->max_sequences, p->max_context);
        uint32_t image_rows = 0;
        const int64_t seq_base = (int64_t)seg->sequence * p->max_context * kv_dim;
        for (uint32_t i = 0; i < seg->n_rows; i++, row++) {
            int32_t tok = b->tokens[row];
            vhc_row *r = &e->llm.rows_host[row];
            if (tok == VH_TOKEN_IMAGE) {
                if ((!own && (seg->image < 0 || (uint32_t)seg->image >= max_images - n_own)) ||
                    image_rows >= e->model->n_image_tokens)
                    return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: segment %u has image rows for image "
                                "%d beyond its %u patches", s, seg->image, e->model->n_image_tokens);
                r->patch = (int32_t)(image * e->model->n_image_tokens + image_rows++);
                if (own) e->head.embed_rows[e->head.n_embeds - 1] = image_rows;
            } else if (tok < 0 || (uint32_t)tok >= l->vocab) {
                return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: token %d out of the vocabulary", tok);
            } else {
                r->patch = -1;
            }
            r->token = tok;
            r->rope_pos = (int32_t)(seg->position + i) + seg->rope_delta;
            r->n_keys = (int32_t)(seg->position + i + 1);
            r->kv_seq_base = seq_base;
            r->kv_write = seq_base + (int64_t)(seg->position + i) * kv_dim;
        }
        e->llm.last_rows_host[s] = (int32_t)row - 1;
    }
    if (row != b->n_rows)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: segments cover %u rows, batch has %u", row, b->n_rows);
    if ((b->options & VH_BATCH_HIDDEN_ROWS) && e->head.rows_host)
        for (uint32_t i = 0; i < b->n_hidden_rows && i < e->head.max_hidden; i++)
            e->head.rows_host[i] = (int32_t)b->hidden_rows[i];
    cuda_llm_plan_attention(e, b);
    return VH_OK;
}

/* Runs of consecutive segments the planners run on (every segment without VH_BATCH_SEGMENT_PLANS):
 * calls fn(e, batch, first, n) for each; stops at the first error. */
static cudaError_t for_planned_runs(vh_executor *e, const vh_batch *batch,
                                    cudaError_t (*fn)(vh_executor *, const vh_batch *, uint32_t, uint32_t))
{
    cudaError_t ce = cudaSuccess;
    for (uint32_t s = 0; s < batch->n_segments && ce == cudaSuccess;) {
        if (!vh_batch_plans_segment(batch, s)) {
            s++;
            continue;
        }
        uint32_t n = 1;
        while (s + n < batch->n_segments && vh_batch_plans_segment(batch, s + n)) n++;
        ce = fn(e, batch, s, n);
        s += n;
    }
    return ce;
}

static cudaError_t upload_noise_run(vh_executor *e, const vh_batch *b, uint32_t first, uint32_t n)
{
    return cudaMemcpyAsync(e->head.noise + (size_t)first * b->plan_noise_stride,
                           b->plan_noise + (size_t)first * b->plan_noise_stride,
                           sizeof(float) * n * b->plan_noise_stride, cudaMemcpyHostToDevice, e->stream);
}

static cudaError_t copy_plan_run(vh_executor *e, const vh_batch *b, uint32_t first, uint32_t n)
{
    return cudaMemcpyAsync(b->out_plan + (size_t)first * b->plan_out_stride,
                           e->head.plan + (size_t)first * b->plan_out_stride,
                           sizeof(float) * n * b->plan_out_stride, cudaMemcpyDeviceToHost, e->stream);
}

/* The planned segments' noise (VH_BATCH_SEGMENT_PLANS: only theirs is read). The planners compute
 * every segment's rows in one batch all the same (a few small GEMMs): the others' noise is zeros
 * and their plans are never copied out. */
static cudaError_t upload_noise(vh_executor *e, const vh_batch *batch)
{
    if ((batch->options & VH_BATCH_SEGMENT_PLANS)) {
        cudaError_t ce = cudaMemsetAsync(e->head.noise, 0, sizeof(float) * batch->n_segments * batch->plan_noise_stride,
                                         e->stream);
        if (ce != cudaSuccess) return ce;
    }
    return for_planned_runs(e, batch, upload_noise_run);
}

vh_status cuda_enqueue(vh_executor *e, const vh_batch *batch, const cuda_block *blocks, uint32_t n_blocks,
                       int has_pixels, int has_rows, char *err, size_t err_size)
{
    cudaError_t ce;
    VHC_MARK(e, "batch upload", (int)batch->n_rows);
    if (has_pixels && (ce = cudaMemcpyAsync(e->vit.pixels, e->vit.pixels_host,
                                            sizeof(float) * batch->n_images * e->vit.pixel_floats,
                                            cudaMemcpyHostToDevice, e->stream)))
        return cuda_fail(err, err_size, ce, "uploading the pixels");
    if (has_rows &&
        ((ce = cudaMemcpyAsync(e->llm.rows, e->llm.rows_host, sizeof(vhc_row) * batch->n_rows, cudaMemcpyHostToDevice,
                               e->stream)) ||
         (ce = cudaMemcpyAsync(e->llm.last_rows, e->llm.last_rows_host, sizeof(int32_t) * batch->n_segments,
                               cudaMemcpyHostToDevice, e->stream)) ||
         (e->llm.n_tiles && (ce = cudaMemcpyAsync(e->llm.tiles, e->llm.tiles_host,
                                                  sizeof(vhc_attention_tile) * e->llm.n_tiles,
                                                  cudaMemcpyHostToDevice, e->stream)))))
        return cuda_fail(err, err_size, ce, "uploading the batch");
    /* the segments' own image rows, the hidden rows asked for, the planners' noise */
    const size_t Dl = e->model->llm.hidden;
    for (uint32_t i = 0; has_rows && i < e->head.n_embeds; i++)
        if ((ce = cudaMemcpyAsync(e->proj.patch_embeds + (size_t)e->head.embed_slot[i] * e->model->n_image_tokens * Dl,
                                  e->head.embed_src[i],
                                  sizeof(float) * e->head.embed_rows[i] * Dl, cudaMemcpyHostToDevice, e->stream)))
            return cuda_fail(err, err_size, ce, "uploading the segments' embeddings");
    if ((batch->options & VH_BATCH_HIDDEN_ROWS) && e->head.rows &&
        (ce = cudaMemcpyAsync(e->head.rows, e->head.rows_host, sizeof(int32_t) * batch->n_hidden_rows,
                              cudaMemcpyHostToDevice, e->stream)))
        return cuda_fail(err, err_size, ce, "uploading the hidden rows");
    if ((batch->options & VH_BATCH_PLAN) && e->head.noise && (ce = upload_noise(e, batch)))
        return cuda_fail(err, err_size, ce, "uploading the planners' noise");
    if ((ce = cuda_upload_slot_inputs(e, batch))) return cuda_fail(err, err_size, ce, "uploading the query sets");
    vh_status st = VH_OK;
    for (uint32_t i = 0; i < n_blocks && st == VH_OK; i++) {
        const cuda_block *b = &blocks[i];
        st = b->kind->run(e, b, batch, err, err_size);
    }
    VHC_MARK(e, "copies out", 0);
    return st;
}

/* Gather the batch's image planes (each image, each tower) into the pinned mirror. */
static void stage_pixels(vh_executor *e, const vh_batch *batch)
{
    const vh_model_desc *m = e->model;
    for (uint32_t i = 0; i < batch->n_images; i++)
        for (uint32_t t = 0; t < m->n_towers; t++)
            memcpy(e->vit.pixels_host + i * e->vit.pixel_floats + e->vit.tower_pixels[t],
                   batch->pixels[(size_t)i * m->n_towers + t],
                   sizeof(float) * 3 * m->towers[t].image_size * m->towers[t].image_size);
}

static vh_status run_blocks(vh_executor *e, const vh_batch *batch, uint32_t first_block, uint32_t n_blocks,
                            int bound, char *err, size_t err_size)
{
    const vh_executor_params *p = &e->params;
    vh_status st = vh_block_executor_check_run("cuda", p, batch, first_block, n_blocks, err, err_size);
    if (st) return st;
    const cuda_block *blocks = &e->blocks[first_block - p->first_block];
    /* a planner reads this run's hidden rows: the head runs in the same call; its strides fit the
     * device buffers */
    int has_head = 0;
    for (uint32_t i = 0; i < n_blocks; i++) {
        const vh_block_variant *k = blocks[i].variant;
        has_head |= k->is_head;
        if (!k->is_planner) continue;
        if (!has_head || !vh_planner_batch_valid(&blocks[i].info.plan, batch) ||
            batch->plan_noise_stride > CUDA_PLAN_STRIDE_MAX || batch->plan_out_stride > CUDA_PLAN_STRIDE_MAX)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: a planner block needs the head in the "
                                   "same run, the batch's plan noise and outputs (VH_BATCH_PLAN, strides that hold "
                                   "them, at most %d) and each segment's feature among its hidden rows",
                                   CUDA_PLAN_STRIDE_MAX);
    }
    vh_block_run_needs needs;
    if ((st = vh_block_executor_check_run_blocks("cuda", e->model, batch, first_block, n_blocks, &needs, err,
                                                 err_size)))
        return st;
    cudaSetDevice(e->device);
    const int needs_images = needs.images, needs_pixels = needs.pixels, needs_rows = needs.rows;
    const int has_planner = needs.planner;
    const int hidden_rows = has_head && (batch->options & VH_BATCH_HIDDEN_ROWS);
    if (needs_images && (st = vh_block_executor_check_images("cuda", p, batch, err, err_size))) return st;
    if (needs.queries && (st = vh_block_executor_check_frames("cuda", p, batch, needs.gathers, err, err_size))) return st;
    if (hidden_rows) {
        if (batch->n_hidden_rows > e->head.max_hidden || !vh_batch_hidden_rows_valid(batch))
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: %u hidden rows asked of a batch of %u "
                                   "rows (at most %u, each inside the batch)", batch->n_hidden_rows, batch->n_rows,
                                   CUDA_HIDDEN_ROWS_PER_SEGMENT * e->max_segments);
    }
    if (needs_rows && (st = validate_and_stage_rows(e, batch, err, err_size))) return st;

    vhc_profile_run_begin(e->profile);
    cudaError_t ce0;
    if (needs_pixels) stage_pixels(e, batch);
    if ((ce0 = cuda_stage_slot_inputs(e, batch))) return cuda_fail(err, err_size, ce0, "staging the query sets");
    int launched = 0;
    const int decode_step = needs_rows && !needs_images && batch->n_rows == 1 && batch->n_segments == 1;
    const int vision_batch = needs_images && !needs_rows && !needs.queries;
    /* (the core's inputs are in the pinned mirrors by now, the addresses a graph replays) */
    const int query_run = needs.queries && !needs_rows && !needs_pixels;
    /* (no options: every segment runs LoRA set 0, the one a graph captured) */
    const int plain = !batch->options || (query_run && batch->options == VH_BATCH_SLOT_INPUTS);
    if (e->graphs_enabled && plain && (decode_step || vision_batch || query_run) &&
        (st = cuda_graph_run(e, batch, blocks, first_block, n_blocks, needs_pixels, needs_rows, &launched, err, err_size)))
        return st;
    if (!launched && (st = cuda_enqueue(e, batch, blocks, n_blocks, needs_pixels, needs_rows, err, err_size))) return st;
    cudaError_t ce = cudaGetLastError();
    /* bound rows are the caller's already: nothing to hand out */
    const int hand_out = needs_rows && !has_head && batch->n_rows <= HIDDEN_OUT_ROWS && !bound;
    e->x_out_rows = 0;
    if (ce == cudaSuccess && hand_out)
        ce = cudaMemcpyAsync(e->llm.x_out_host, e->llm.x, sizeof(float) * batch->n_rows * e->model->llm.hidden,
                             cudaMemcpyDeviceToHost, e->stream);
    if (ce == cudaSuccess && hidden_rows)
        ce = cudaMemcpyAsync(batch->out_hidden, e->head.hidden, sizeof(float) * batch->n_hidden_rows * e->model->llm.hidden,
                             cudaMemcpyDeviceToHost, e->stream);
    if (ce == cudaSuccess && has_planner) ce = for_planned_runs(e, batch, copy_plan_run);
    if (ce == cudaSuccess && has_head && batch->out_tokens) {
        ce = cudaMemcpyAsync(e->llm.tokens_host, e->llm.tokens, sizeof(int32_t) * batch->n_segments,
                             cudaMemcpyDeviceToHost, e->stream);
        if (ce == cudaSuccess && batch->out_logits)
            ce = cudaMemcpyAsync(batch->out_logits, e->llm.logits, sizeof(float) * batch->n_segments * e->model->llm.vocab,
                                 cudaMemcpyDeviceToHost, e->stream);
    }
    vhc_profile_run_close(e->profile, e->stream);
    if (ce == cudaSuccess) ce = cuda_wait_stream(e);
    if (ce != cudaSuccess) return cuda_fail(err, err_size, ce, "running the blocks");
    vhc_profile_run_end(e->profile);
    if (has_head && batch->out_tokens) memcpy(batch->out_tokens, e->llm.tokens_host, sizeof(int32_t) * batch->n_segments);
    if (needs_rows) e->last_rows_count = batch->n_rows;
    if (hand_out) e->x_out_rows = batch->n_rows;
    return VH_OK;
}

/* A run works on its own llm.x, or, after bind_hidden, on the core's mapped rows (for that run
 * only: the binding is used up whatever the outcome). */
vh_status cuda_executor_run(vh_executor *e, const vh_batch *batch, uint32_t first_block, uint32_t n_blocks,
                            char *err, size_t err_size)
{
    float *own_x = e->llm.x, *bound_x = e->bound_x;
    e->bound_x = NULL;
    if (bound_x && batch && batch->n_rows > e->bound_rows)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: a batch of %u rows, %u rows bound",
                               batch->n_rows, e->bound_rows);
    if (bound_x) e->llm.x = bound_x;
    vh_status st = run_blocks(e, batch, first_block, n_blocks, bound_x != NULL, err, err_size);
    e->llm.x = own_x;
    return st;
}

vh_status cuda_bind_hidden(vh_executor *e, float *rows, uint32_t n_rows, char *err, size_t err_size)
{
    vh_status st = vh_block_executor_check_hidden("cuda", "bind_hidden", e->llm.x != NULL, rows, n_rows,
                                                  e->params.max_rows, err, err_size);
    if (st) return st;
    cudaSetDevice(e->device);
    void *device_rows = NULL;
    cudaError_t ce = cudaHostGetDevicePointer(&device_rows, rows, 0);
    if (ce != cudaSuccess) {
        cudaGetLastError();
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: bind_hidden: the rows are not mapped host "
                               "memory from this plugin's host_alloc: %s", cudaGetErrorString(ce));
    }
    e->bound_x = device_rows;
    e->bound_rows = n_rows;
    e->x_out_rows = 0; /* the rows handed out by an earlier run are not this run's */
    return VH_OK;
}

vh_status cuda_read_hidden(vh_executor *e, float *dst, uint32_t n_rows, char *err, size_t err_size)
{
    vh_status st = vh_block_executor_check_hidden("cuda", "read_hidden", e->llm.x != NULL, dst, n_rows,
                                                  e->params.max_rows, err, err_size);
    if (st) return st;
    if (n_rows <= e->x_out_rows) { /* already copied out by the run */
        memcpy(dst, e->llm.x_out_host, sizeof(float) * n_rows * e->model->llm.hidden);
        return VH_OK;
    }
    cudaSetDevice(e->device);
    cudaError_t ce = cudaMemcpyAsync(dst, e->llm.x, sizeof(float) * n_rows * e->model->llm.hidden,
                                     cudaMemcpyDeviceToHost, e->stream);
    if (ce == cudaSuccess) ce = cuda_wait_stream(e);
    return ce == cudaSuccess ? VH_OK : cuda_fail(err, err_size, ce, "read_hidden");
}

vh_status cuda_write_hidden(vh_executor *e, const float *src, uint32_t n_rows, char *err, size_t err_size)
{
    vh_status st = vh_block_executor_check_hidden("cuda", "write_hidden", e->llm.x != NULL, src, n_rows,
                                                  e->params.max_rows, err, err_size);
    if (st) return st;
    cudaSetDevice(e->device);
    e->x_out_rows = 0;
    cudaError_t ce = cudaMemcpyAsync(e->llm.x, src, sizeof(float) * n_rows * e->model->llm.hidden,
                                     cudaMemcpyHostToDevice, e->stream);
    if (ce == cudaSuccess) ce = cuda_wait_stream(e);
    return ce == cudaSuccess ? VH_OK : cuda_fail(err, err_size, ce, "write_hidden");
}
