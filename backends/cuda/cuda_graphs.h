/*
 * CUDA graphs (cuda_graphs.c): a one-row decode step and a vision batch replay captured graphs,
 * no per-kernel launch cost (a vision batch is ~600 small kernels, launch-bound without one).
 */
#ifndef VH_CUDA_GRAPHS_H
#define VH_CUDA_GRAPHS_H

#include "cuda_run.h"

/* A one-row decode step, or a vision batch, over these blocks: the first time it runs eagerly (its
 * GEMMs are timed then, cuda_gemm.c, which a capture cannot do), the second time it is captured,
 * later ones replay the graph. Everything that changes between replays is in the pinned mirrors
 * the graph's first copies read (pixels; token, positions, KV offsets). A few graphs are kept,
 * keyed by block range and image count (the least recently used is replaced). Returns VH_OK with
 * *launched = 0 when the caller is to enqueue the work itself. */
vh_status cuda_graph_run(vh_executor *e, const vh_batch *batch, const cuda_block *blocks, uint32_t first_block,
                         uint32_t n_blocks, int has_pixels, int has_rows, int *launched, char *err, size_t err_size);

/* The graphs kept, destroyed. */
void cuda_graphs_destroy(vh_executor *e);

#endif
