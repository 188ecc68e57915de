/*
 * cpu_generic: the backend that runs anywhere. Its one device is the host CPU.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "executor.h"

static int32_t cpu_score(void)
{
    return 10; /* always usable; specialised backends score higher where they apply */
}

static uint32_t cpu_device_count(void)
{
    return 1;
}

static void read_cpu_model_name(char *buf, size_t size)
{
    snprintf(buf, size, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *colon = strchr(line, ':');
        if (!colon) break;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(buf, size, "%s", colon);
        break;
    }
    fclose(f);
}

static vh_status cpu_device_info(uint32_t device, vh_device_info *info)
{
    if (device != 0 || !info) return VH_ERR_INVALID_ARGUMENT;
    memset(info, 0, sizeof *info);
    info->kind = VH_DEVICE_CPU;
    read_cpu_model_name(info->name, sizeof info->name);
    long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) info->total_memory = (uint64_t)pages * (uint64_t)page;
    if (avail > 0 && page > 0) info->free_memory = (uint64_t)avail * (uint64_t)page;
    return VH_OK;
}

static vh_status cpu_read_hidden(vh_executor *e, float *dst, uint32_t n_rows, char *err, size_t err_size)
{
    if (!e->llm.x || !dst || n_rows == 0 || n_rows > e->params.max_rows) {
        snprintf(err, err_size, "cpu_generic: read_hidden of %u rows (max %u)", n_rows, e->params.max_rows);
        return VH_ERR_INVALID_ARGUMENT;
    }
    memcpy(dst, e->llm.x, sizeof(float) * n_rows * e->model->llm.hidden);
    return VH_OK;
}

static vh_status cpu_write_hidden(vh_executor *e, const float *src, uint32_t n_rows, char *err, size_t err_size)
{
    if (!e->llm.x || !src || n_rows == 0 || n_rows > e->params.max_rows) {
        snprintf(err, err_size, "cpu_generic: write_hidden of %u rows (max %u)", n_rows, e->params.max_rows);
        return VH_ERR_INVALID_ARGUMENT;
    }
    memcpy(e->llm.x, src, sizeof(float) * n_rows * e->model->llm.hidden);
    return VH_OK;
}

static vh_status cpu_memory(vh_executor *e, vh_memory_report *report)
{
    if (!e || !report) return VH_ERR_INVALID_ARGUMENT;
    report->weight_bytes = e->weight_bytes;
    report->cache_bytes = e->cache_bytes;
    report->work_bytes = e->work_bytes;
    return VH_OK;
}

static const vh_backend_iface cpu_generic_iface = {
    .abi_major = VH_BACKEND_ABI_MAJOR,
    .abi_minor = VH_BACKEND_ABI_MINOR,
    .struct_size = sizeof(vh_backend_iface),
    .name = "cpu_generic",
    .description = "portable CPU backend: OpenBLAS GEMMs, C kernels, fp32 compute over bf16/f16/f32 weights",
    .score = cpu_score,
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .executor_create = cpu_executor_create,
    .executor_destroy = cpu_executor_destroy,
    .executor_run = cpu_executor_run,
    .read_hidden = cpu_read_hidden,
    .write_hidden = cpu_write_hidden,
    .memory = cpu_memory,
};

VH_PLUGIN_EXPORT const vh_backend_iface *vh_backend_entry(uint32_t core_abi_major, uint32_t core_abi_minor)
{
    (void)core_abi_minor; /* minor versions only append; the core reads what it knows */
    return core_abi_major == VH_BACKEND_ABI_MAJOR ? &cpu_generic_iface : NULL;
}
