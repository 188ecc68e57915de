#include "backend_numerics.h"

#include <stdio.h>
#include <string.h>

/* From the backends' code (doc/backend-abi.md, "Precision"): cpu_generic computes in fp32 over the
 * checkpoint's weights as stored; cpu_amx packs the weights to bf16 and rounds every GEMM input to
 * bf16, accumulating in fp32; cuda keeps weights and the KV cache in bf16 and feeds its GEMMs bf16
 * with fp32 accumulation. The residual streams stay fp32 in all three. */
static const vh_backend_numerics table[] = {
    {"cpu_generic", "as stored", VH_COMPUTE_FP32, "weights as stored in the checkpoint, fp32 compute"},
    {"cpu_amx", "bf16", VH_COMPUTE_BF16, "bf16 weights, bf16 compute with fp32 accumulation"},
    {"cuda", "bf16", VH_COMPUTE_BF16, "bf16 weights and KV cache, bf16 compute with fp32 accumulation"},
};

const vh_backend_numerics *vh_backend_numerics_of(const char *backend)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].backend, backend)) return &table[i];
    static const vh_backend_numerics unknown = {"", "unknown", VH_COMPUTE_UNKNOWN,
                                                "numerics unknown to vh-run's table (tools/backend_numerics.c)"};
    return &unknown;
}

vh_compute_precision vh_backends_compute(const char *backends)
{
    int bf16 = 0, unknown = 0;
    char name[64];
    for (const char *p = backends; *p;) {
        const size_t n = strcspn(p, ",");
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
        const vh_compute_precision c = vh_backend_numerics_of(name)->compute;
        bf16 |= c == VH_COMPUTE_BF16;
        unknown |= c == VH_COMPUTE_UNKNOWN;
        p += n + (p[n] == ',');
    }
    return bf16 ? VH_COMPUTE_BF16 : unknown || !*backends ? VH_COMPUTE_UNKNOWN : VH_COMPUTE_FP32;
}

unsigned vh_backends_bf16_stages(const char *backends)
{
    unsigned n = 0;
    char name[64];
    for (const char *p = backends; *p;) {
        const size_t len = strcspn(p, ",");
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), p);
        n += vh_backend_numerics_of(name)->compute == VH_COMPUTE_BF16;
        p += len + (p[len] == ',');
    }
    return n;
}

const char *vh_compute_precision_name(vh_compute_precision p)
{
    return p == VH_COMPUTE_FP32 ? "fp32" : p == VH_COMPUTE_BF16 ? "bf16" : "unknown";
}
