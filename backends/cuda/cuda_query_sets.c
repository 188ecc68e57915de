/*
 * The cuda executor's query sets (VH_SLOT_KIND_QUERIES): each slot a held block reads or writes
 * lives on the device as [max_frames, rows, width] fp32, kept between runs (a head's frame is
 * several runs with the host between them); the slots the core fills (VH_BATCH_SLOT_INPUTS) are
 * uploaded before a run's blocks; read_slot copies a frame's query set, or an image's tower
 * tokens, back. The blocks on query sets share one scratch region, the largest any asks for.
 */
#include <stdlib.h>
#include <string.h>

#include "backend_error.h"
#include "cuda_memory_plan.h"
#include "cuda_run.h"

vh_status cuda_queries_describe(vh_executor *e, char *err, size_t err_size)
{
    int any = 0;
    for (uint32_t i = 0; i < e->params.n_blocks; i++) any |= e->blocks[i].variant->on_queries;
    if (!any) return VH_OK;
    if (!(e->queries.data = calloc(e->model->n_slots, sizeof *e->queries.data)) ||
        !(e->queries.host = calloc(e->model->n_slots, sizeof *e->queries.host)))
        return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
    return VH_OK;
}

/* Every QUERIES slot a held block reads or writes, once; then the scratch. */
void cuda_memory_plan_queries(vh_executor *e, cuda_arena *a)
{
    if (!e->queries.data) return;
    const vh_model_desc *m = e->model;
    const uint64_t frames = e->params.max_frames ? e->params.max_frames : 1;
    uint8_t *seen = calloc(m->n_slots, 1); /* a slot carved in this walk (the walk runs twice) */
    size_t scratch = 0;
    for (uint32_t i = 0; i < e->params.n_blocks; i++) {
        const cuda_block *b = &e->blocks[i];
        if (!b->variant->on_queries) continue;
        const vh_block_desc *d = b->desc;
        for (uint32_t j = 0; j <= d->n_inputs; j++) {
            const uint32_t slot = j < d->n_inputs ? d->inputs[j] : d->output;
            if (m->slots[slot].kind != VH_SLOT_KIND_QUERIES || (seen && seen[slot])) continue;
            if (seen) seen[slot] = 1;
            const vh_query_set_desc qs = cuda_query_set(e, slot);
            e->queries.data[slot] = cuda_arena_take(a, frames * qs.rows * qs.width * sizeof(float));
        }
        if (b->kind->scratch_bytes) {
            const size_t n = b->kind->scratch_bytes(e, b);
            if (n > scratch) scratch = n;
        }
    }
    free(seen);
    e->queries.scratch_bytes = scratch;
    e->queries.scratch = cuda_arena_take(a, scratch);
}

/* The previous run has finished (a run waits for its stream), so its mirrors are free to refill. */
cudaError_t cuda_stage_slot_inputs(vh_executor *e, const vh_batch *batch)
{
    if (!(batch->options & VH_BATCH_SLOT_INPUTS) || !e->queries.data) return cudaSuccess;
    const uint64_t frames = e->params.max_frames ? e->params.max_frames : 1;
    for (uint32_t s = 0; s < batch->n_slot_inputs && s < e->model->n_slots; s++) {
        if (!batch->slot_inputs[s] || !e->queries.data[s]) continue;
        const vh_query_set_desc qs = cuda_query_set(e, s);
        if (!e->queries.host[s]) {
            cudaError_t ce = cudaMallocHost((void **)&e->queries.host[s], sizeof(float) * frames * qs.rows * qs.width);
            if (ce != cudaSuccess) {
                e->queries.host[s] = NULL;
                return ce;
            }
        }
        memcpy(e->queries.host[s], batch->slot_inputs[s], sizeof(float) * batch->n_frames * qs.rows * qs.width);
    }
    return cudaSuccess;
}

cudaError_t cuda_upload_slot_inputs(vh_executor *e, const vh_batch *batch)
{
    if (!(batch->options & VH_BATCH_SLOT_INPUTS) || !e->queries.data) return cudaSuccess;
    for (uint32_t s = 0; s < batch->n_slot_inputs && s < e->model->n_slots; s++) {
        if (!batch->slot_inputs[s] || !e->queries.data[s] || !e->queries.host[s]) continue;
        const vh_query_set_desc qs = cuda_query_set(e, s);
        cudaError_t ce = cudaMemcpyAsync(e->queries.data[s], e->queries.host[s],
                                         sizeof(float) * batch->n_frames * qs.rows * qs.width, cudaMemcpyHostToDevice,
                                         e->stream);
        if (ce != cudaSuccess) return ce;
    }
    return cudaSuccess;
}

vh_status cuda_read_slot(vh_executor *e, uint32_t slot, uint32_t image, float *dst, size_t n_floats, char *err,
                         size_t err_size)
{
    const vh_model_desc *m = e->model;
    const uint32_t max_images = e->params.max_images ? e->params.max_images : 1;
    const float *src;
    size_t n;
    if (dst && slot < m->n_slots && m->slots[slot].kind == VH_SLOT_KIND_QUERIES) {
        const uint32_t max_frames = e->params.max_frames ? e->params.max_frames : 1;
        if (!e->queries.data || !e->queries.data[slot] || image >= max_frames)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: read_slot: slot %u ('%s') frame %u: not "
                                   "a query set this executor holds (frames < %u)", slot,
                                   m->slots[slot].name ? m->slots[slot].name : "?", image, max_frames);
        const vh_query_set_desc qs = cuda_query_set(e, slot);
        n = (size_t)qs.rows * qs.width;
        if (n_floats != n)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: read_slot: slot '%s' holds %u x %u floats "
                                   "a frame, %zu asked", m->slots[slot].name, qs.rows, qs.width, n_floats);
        src = cuda_query_rows(e, slot, image);
    } else {
        if (!dst || slot >= m->n_slots || m->slots[slot].kind != VH_SLOT_KIND_TOKENS ||
            m->slots[slot].tower >= m->n_towers || !e->vit.x[m->slots[slot].tower] || image >= max_images)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: read_slot: slot %u image %u is not a "
                                   "tower's tokens this executor holds (images < %u)", slot, image, max_images);
        const vh_vit_desc *v = &m->towers[m->slots[slot].tower];
        n = (size_t)(v->n_prefix + v->n_patches) * v->embed_dim;
        if (n_floats != n)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: read_slot: slot '%s' holds %zu floats an "
                                   "image, %zu asked", m->slots[slot].name, n, n_floats);
        src = cuda_tower_tokens(e, m->slots[slot].tower, image);
    }
    cudaSetDevice(e->device);
    cudaError_t ce = cudaMemcpyAsync(dst, src, sizeof(float) * n, cudaMemcpyDeviceToHost, e->stream);
    if (ce == cudaSuccess) ce = cuda_wait_stream(e);
    return ce == cudaSuccess ? VH_OK : cuda_fail(err, err_size, ce, "read_slot");
}

void cuda_queries_free(vh_executor *e)
{
    if (!e->queries.host) return;
    for (uint32_t s = 0; s < e->model->n_slots; s++)
        if (e->queries.host[s]) cudaFreeHost(e->queries.host[s]);
    free(e->queries.host);
    e->queries.host = NULL;
}
