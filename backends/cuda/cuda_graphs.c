/*
 * CUDA graphs for the runs that are launch-bound: a one-row decode step, a vision batch and a run
 * of blocks on query sets (cuda_graphs.h).
 */
#include "cuda_graphs.h"

#include <string.h>

/* The slots the core filled, as the key's bitmask; 0 when the model has too many slots for one. */
static int filled_slots(const vh_executor *e, const vh_batch *batch, uint64_t mask[CUDA_GRAPH_INPUT_WORDS])
{
    memset(mask, 0, sizeof(uint64_t) * CUDA_GRAPH_INPUT_WORDS);
    if (!(batch->options & VH_BATCH_SLOT_INPUTS)) return 1;
    for (uint32_t s = 0; s < batch->n_slot_inputs && s < e->model->n_slots; s++) {
        if (!batch->slot_inputs[s]) continue;
        if (s >= 64 * CUDA_GRAPH_INPUT_WORDS) return 0;
        mask[s / 64] |= 1ull << (s % 64);
    }
    return 1;
}

vh_status cuda_graph_run(vh_executor *e, const vh_batch *batch, const cuda_block *blocks, uint32_t first_block,
                         uint32_t n_blocks, int has_pixels, int has_rows, int *launched, char *err, size_t err_size)
{
    *launched = 0;
    const uint32_t n_slots = sizeof e->graphs / sizeof e->graphs[0], n_images = has_pixels ? batch->n_images : 0;
    uint64_t inputs[CUDA_GRAPH_INPUT_WORDS];
    if (!filled_slots(e, batch, inputs)) return VH_OK;
    uint32_t slot = 0;
    int found = 0;
    for (uint32_t i = 0; i < n_slots && !found; i++) {
        found = e->graphs[i].seen && e->graphs[i].first_block == first_block && e->graphs[i].n_blocks == n_blocks &&
                e->graphs[i].n_images == n_images && e->graphs[i].n_frames == batch->n_frames &&
                e->graphs[i].x == e->llm.x && !memcmp(e->graphs[i].inputs, inputs, sizeof inputs);
        if (found || e->graphs[i].last_use < e->graphs[slot].last_use) slot = i;
    }
    if (!found) { /* first sight: run eagerly, remember the key */
        if (e->graphs[slot].exec) cudaGraphExecDestroy(e->graphs[slot].exec);
        e->graphs[slot].exec = NULL;
        e->graphs[slot].first_block = first_block;
        e->graphs[slot].n_blocks = n_blocks;
        e->graphs[slot].n_images = n_images;
        e->graphs[slot].n_frames = batch->n_frames;
        memcpy(e->graphs[slot].inputs, inputs, sizeof inputs);
        e->graphs[slot].x = e->llm.x;
        e->graphs[slot].seen = 1;
        e->graphs[slot].last_use = ++e->graph_clock;
        return VH_OK;
    }
    if (!e->graphs[slot].exec) {
        cudaGraph_t graph = NULL;
        if (cudaStreamBeginCapture(e->stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
            e->graphs_enabled = 0;
            cudaGetLastError();
            return VH_OK;
        }
        vh_status st = cuda_enqueue(e, batch, blocks, n_blocks, has_pixels, has_rows, err, err_size);
        cudaError_t ce = cudaStreamEndCapture(e->stream, &graph);
        if (st == VH_OK && ce == cudaSuccess) ce = cudaGraphInstantiate(&e->graphs[slot].exec, graph, 0);
        if (graph) cudaGraphDestroy(graph);
        if (st != VH_OK || ce != cudaSuccess) { /* run without graphs from now on */
            e->graphs[slot].exec = NULL;
            e->graphs_enabled = 0;
            cudaGetLastError();
            return VH_OK;
        }
    }
    e->graphs[slot].last_use = ++e->graph_clock;
    cudaError_t ce = cudaGraphLaunch(e->graphs[slot].exec, e->stream);
    if (ce != cudaSuccess) return cuda_fail(err, err_size, ce, "launching a graph");
    *launched = 1;
    return VH_OK;
}

void cuda_graphs_destroy(vh_executor *e)
{
    for (uint32_t i = 0; i < sizeof e->graphs / sizeof e->graphs[0]; i++)
        if (e->graphs[i].exec) cudaGraphExecDestroy(e->graphs[i].exec);
}
