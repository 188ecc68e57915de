/*
 * cpu_amx: the CPU backend for Intel CPUs with AMX (and others with AVX-512 bf16): linear layers
 * on its own bf16 GEMM (AMX tiles, AVX-512 bf16 for few rows) over weights packed once at load,
 * with q|k|v and gate|up fused; the rest of each block on the shared CPU executor and kernels.
 * VH_CPU_AMX_GEMM=onednn runs the linear layers on oneDNN's bf16 matmul instead (the measured
 * peer). Refused (score 0) where the CPU has neither AMX nor AVX-512 bf16.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_knobs.h"
#include "bf16_linear.h"
#include "cpu_executor.h"
#include "cpu_features.h"
#include "onednn_linear.h"

static const cpu_linear_ops own_linear_ops = {
    .backend = "cpu_amx",
    .create_pool = amx_create_pool,
    .create = bf16_linear_create,
    .destroy = bf16_linear_destroy,
    .prepare = bf16_linear_prepare,
    .release = bf16_linear_release,
    .finish_load = bf16_linear_finish_load,
    .linear = bf16_linear_run,
    .prepare_fused = bf16_linear_prepare_fused,
    .linear_fused = bf16_linear_fused,
    .attention = bf16_linear_attention,
};

static const cpu_linear_ops onednn_linear_ops = {
    .backend = "cpu_amx",
    .create_pool = amx_create_pool,
    .create = amx_linear_create,
    .destroy = amx_linear_destroy,
    .prepare = amx_linear_prepare,
    .release = amx_linear_release,
    .finish_load = amx_linear_finish_load,
    .linear = amx_linear_run,
};

/* Above cpu_generic (10) where bf16 matrix instructions exist; AMX above AVX-512 bf16 alone. */
static int32_t amx_score(void)
{
    cpu_bf16_features f = cpu_bf16_detect();
    return f.amx_bf16 ? 50 : f.avx512_bf16 ? 30 : 0;
}

static void amx_unavailable_reason(char *why, size_t why_size)
{
    cpu_bf16_features f = cpu_bf16_detect();
    snprintf(why, why_size, "this CPU has neither AMX-BF16 nor AVX-512 BF16%s (use cpu_generic)",
             f.avx512 ? " (it has AVX-512)" : "");
}

static vh_status amx_executor_create(const vh_executor_params *params, vh_executor **out, char *err, size_t err_size)
{
    if (amx_score() <= 0) {
        snprintf(err, err_size, "cpu_amx: this CPU has neither AMX nor AVX-512 bf16 (use cpu_generic)");
        return VH_ERR_BACKEND_FAILED;
    }
    const int onednn = vh_knob_is(VH_KNOB_CPU_AMX_GEMM, "onednn");
    return cpu_executor_create(params, onednn ? &onednn_linear_ops : &own_linear_ops, out, err, err_size);
}

static const vh_backend_iface cpu_amx_iface = VH_CPU_BACKEND_IFACE(
    "cpu_amx",
    "Intel AMX / AVX-512 bf16 CPU backend: own bf16 GEMM (AMX tiles, AVX-512 bf16; fp32 accumulation), "
    "shared CPU kernels; VH_CPU_AMX_GEMM=onednn: oneDNN bf16 matmul",
    amx_score, amx_executor_create, amx_unavailable_reason);

VH_PLUGIN_EXPORT const vh_backend_iface *vh_backend_entry(uint32_t core_abi_major, uint32_t core_abi_minor)
{
    (void)core_abi_minor;
    return core_abi_major == VH_BACKEND_ABI_MAJOR ? &cpu_amx_iface : NULL;
}
