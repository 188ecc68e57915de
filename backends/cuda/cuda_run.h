/*
 * Running a batch (cuda_run.c): what the graphs capture and the wait the run ends with.
 */
#ifndef VH_CUDA_RUN_H
#define VH_CUDA_RUN_H

#include "cuda_executor.h"

/* Enqueue the batch's pixels and row metadata (from the pinned mirrors) and the blocks. */
vh_status cuda_enqueue(vh_executor *e, const vh_batch *batch, const cuda_block *blocks, uint32_t n_blocks,
                       int has_pixels, int has_rows, char *err, size_t err_size);

/* Wait until the stream's work is done: asleep on the executor's blocking event (a flag of the
 * event, not of the device, so a caller's own context flags stay as they are). */
cudaError_t cuda_wait_stream(vh_executor *e);

#endif
