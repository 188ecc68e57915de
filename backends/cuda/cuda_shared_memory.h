/*
 * GPUs that share the host's memory (Jetson's integrated GPUs: cudaDevAttrIntegrated), and the
 * switch that treats a discrete GPU the same way (VH_CUDA_INTEGRATED=1), so the path is exercised
 * on the GPU machine: the hidden rows handed between stages live in mapped pinned host memory that
 * the GPU's kernels read and write in place (bind_hidden), and the memory budget is system RAM.
 * On a discrete GPU mapped memory works too, over PCIe, slowly: for tests, not for speed.
 */
#ifndef VH_CUDA_SHARED_MEMORY_H
#define VH_CUDA_SHARED_MEMORY_H

#include <stddef.h>

/* 1 when VH_CUDA_INTEGRATED=1 forces the shared-memory path on any GPU, 0 when it is 0 (forced
 * off), -1 when unset or anything else (the device decides). */
int vhc_shared_memory_forced(void);

/* 1 when device `device` shares the host's memory (integrated), or the switch forces it. */
int vhc_shares_host_memory(int device);

/* 1 when the device itself reports integrated memory (not the switch). */
int vhc_device_integrated(int device);

/* Page-locked host memory mapped into every device's address space (cudaHostAllocMapped |
 * cudaHostAllocPortable): both the CPU and the GPU read and write it without a copy. NULL on
 * failure. Free with cudaFreeHost. */
void *vhc_mapped_host_alloc(size_t bytes);

#endif
