/*
 * The executor's device memory (cuda_memory_plan.c): two arenas, weights and work, each one
 * cudaMalloc, carved by walks that run first on empty arenas to count the bytes.
 */
#ifndef VH_CUDA_MEMORY_PLAN_H
#define VH_CUDA_MEMORY_PLAN_H

#include "cuda_executor.h"

/* cuBLASLt's workspace: the work arena's last piece. */
#define CUDA_GEMM_WORKSPACE_BYTES ((size_t)32 << 20)

/* Carve n bytes from an arena sized beforehand by the same sequence of requests (NULL, counting
 * only, on an arena without memory). */
void *cuda_arena_take(cuda_arena *a, size_t n);

/* The blocks' weights (and a kind's packed tensors, cuda_kind.plan_packed). */
void cuda_memory_plan_weights(vh_executor *e, cuda_arena *a);

/* The activations, the pixels, the head's and planners' buffers, the workspace. */
void cuda_memory_plan_work(vh_executor *e, cuda_arena *a);

/* Count both arenas (on empty ones) and the KV cache (e->cache_bytes). */
void cuda_memory_plan_count(vh_executor *e, cuda_arena *weights, cuda_arena *work);

/* The counted bytes fit the memory budget and the device's free memory (an integrated GPU's: the
 * system's): VH_ERR_DEVICE_OUT_OF_MEMORY, naming what is short, otherwise. */
vh_status cuda_memory_plan_check(const vh_executor *e, uint64_t weight_bytes, uint64_t work_bytes, size_t free_bytes,
                                 char *err, size_t err_size);

/* Where cuBLASLt's workspace starts in the carved work arena. */
void *cuda_memory_plan_workspace(const vh_executor *e);

#endif
