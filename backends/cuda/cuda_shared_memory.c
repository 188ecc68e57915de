#include "cuda_shared_memory.h"

#include "backend_knobs.h"

#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

int vhc_shared_memory_forced(void)
{
    const char *on = vh_knob_value(VH_KNOB_CUDA_INTEGRATED);
    if (!on) return -1;
    return !strcmp(on, "1") ? 1 : !strcmp(on, "0") ? 0 : -1;
}

int vhc_device_integrated(int device)
{
    int integrated = 0;
    return cudaDeviceGetAttribute(&integrated, cudaDevAttrIntegrated, device) == cudaSuccess && integrated;
}

int vhc_shares_host_memory(int device)
{
    const int forced = vhc_shared_memory_forced();
    return forced >= 0 ? forced : vhc_device_integrated(device);
}

void *vhc_mapped_host_alloc(size_t bytes)
{
    void *p = NULL;
    return cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess ? p : NULL;
}
