/*
 * cuda: OpenVLA's blocks on NVIDIA GPUs (cuBLASLt GEMMs, CUDA kernels), one executor per GPU.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_executor.h"
#include "cuda_shared_memory.h"

static int32_t cuda_score(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? 100 : 0;
}

/* Whether an NVIDIA kernel driver is loaded: without one, the runtime says "CUDA driver version is
 * insufficient" (it finds no driver, so none new enough), which reads as an old driver. */
static int nvidia_driver_loaded(void)
{
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (f) fclose(f);
    return f != NULL;
}

/* cudaGetDeviceCount's error says why: no driver or no device (said so plainly), a driver older
 * than the runtime. */
static void cuda_unavailable_reason(char *why, size_t why_size)
{
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorNoDevice || (e == cudaErrorInsufficientDriver && !nvidia_driver_loaded()))
        snprintf(why, why_size, "no CUDA device (cudaGetDeviceCount: %s%s)", cudaGetErrorString(e),
                 e == cudaErrorInsufficientDriver ? "; no NVIDIA driver is loaded" : "");
    else if (e != cudaSuccess) snprintf(why, why_size, "no usable CUDA device: %s", cudaGetErrorString(e));
    else if (n == 0) snprintf(why, why_size, "no CUDA device visible (CUDA_VISIBLE_DEVICES?)");
    else snprintf(why, why_size, "%d CUDA devices, yet the backend scored 0", n);
}

static uint32_t cuda_device_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0 ? (uint32_t)n : 0;
}

static vh_status cuda_device_info(uint32_t device, vh_device_info *info)
{
    if (!info || info->struct_size < sizeof *info || device >= cuda_device_count()) return VH_ERR_INVALID_ARGUMENT;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    info->kind = VH_DEVICE_GPU;
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, (int)device) != cudaSuccess) return VH_ERR_BACKEND_FAILED;
    snprintf(info->name, sizeof info->name, "%.100s (sm_%d%d)", prop.name, prop.major, prop.minor);
    info->total_memory = prop.totalGlobalMem;
    int current = 0;
    size_t free_bytes = 0, total = 0;
    if (cudaGetDevice(&current) == cudaSuccess && cudaSetDevice((int)device) == cudaSuccess &&
        cudaMemGetInfo(&free_bytes, &total) == cudaSuccess)
        info->free_memory = free_bytes;
    cudaSetDevice(current);
    return VH_OK;
}

static vh_status cuda_memory(vh_executor *e, vh_memory_report *report)
{
    if (!e || !report || report->struct_size < sizeof *report) return VH_ERR_INVALID_ARGUMENT;
    report->weight_bytes = e->weights.size;
    report->cache_bytes = e->cache_bytes;
    report->work_bytes = e->work.size;
    return VH_OK;
}

/* Set once, at the first vh_backend_entry (plugin_init, which also fills the kinds list): the GPU shares the host's memory (Jetson), or
 * VH_CUDA_INTEGRATED=1 says to act as if it did. Device 0 decides (a Jetson has one GPU). */
static int shared_memory;

/* Hidden states cross to and from the CPU through page-locked memory: DMA copies, no staging. A
 * GPU sharing the host's memory gets it mapped too, and works on it in place (bind_hidden). */
static void *cuda_host_alloc(size_t bytes)
{
    if (shared_memory) return vhc_mapped_host_alloc(bytes);
    void *p = NULL;
    return cudaHostAlloc(&p, bytes, cudaHostAllocPortable) == cudaSuccess ? p : NULL;
}

static void cuda_host_free(void *p)
{
    if (p) cudaFreeHost(p);
}

/* Not const: bind_hidden is offered only where the GPU shares the host's memory (see below). */
static vh_backend_iface cuda_iface = {
    .abi_major = VH_BACKEND_ABI_MAJOR,
    .abi_minor = VH_BACKEND_ABI_MINOR,
    .struct_size = sizeof(vh_backend_iface),
    .name = "cuda",
    .description = "NVIDIA GPUs: bf16 weights, cuBLASLt GEMMs with fp32 accumulation, CUDA kernels",
    .n_kinds = 0,           /* set by the first vh_backend_entry (cuda_kinds_init) */
    .kinds = cuda_support,
    .batch_options = VH_BLOCK_VARIANT_BATCH_OPTIONS,
    .score = cuda_score,
    .device_count = cuda_device_count,
    .device_info = cuda_device_info,
    .executor_create = cuda_executor_create,
    .executor_destroy = cuda_executor_destroy,
    .executor_run = cuda_executor_run,
    .read_hidden = cuda_read_hidden,
    .read_slot = cuda_read_slot,
    .write_hidden = cuda_write_hidden,
    .memory = cuda_memory,
    .executor_plan_memory = cuda_executor_plan_memory,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .unavailable_reason = cuda_unavailable_reason,
};

/* On a GPU with memory of its own the rows cross by DMA copies (read_hidden / write_hidden, the
 * measured path); on one sharing the host's memory a copy buys nothing, so the next run works on
 * the core's mapped rows in place. */
static void plugin_init(void)
{
    cuda_kinds_init();
    cuda_iface.n_kinds = cuda_n_support;
    int n = 0;
    shared_memory = vhc_shared_memory_forced() == 1 ||
                    (cudaGetDeviceCount(&n) == cudaSuccess && n > 0 && vhc_shares_host_memory(0));
    if (shared_memory) cuda_iface.bind_hidden = cuda_bind_hidden;
}

VH_PLUGIN_EXPORT const vh_backend_iface *vh_backend_entry(uint32_t core_abi_major, uint32_t core_abi_minor)
{
    (void)core_abi_minor;
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, plugin_init);
    return core_abi_major == VH_BACKEND_ABI_MAJOR ? &cuda_iface : NULL;
}
