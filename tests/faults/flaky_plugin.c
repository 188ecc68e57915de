/* A backend that fails on purpose: every call is forwarded to a real plugin (VH_FLAKY_REAL: the
 * path of its .so), except that executor_run fails (VH_ERR_BACKEND_FAILED, "flaky: injected
 * failure") on every VH_FLAKY_FAIL_EVERY-th call counted over the process (0 or unset: never).
 * Named "flaky"; built into a folder of its own, so only a test that points VH_BACKEND_PATH there
 * finds it (tests/faults/test_backend_failure.c).
 * VH_FLAKY_ABI_MAJOR=2: it says it is a plugin of backend ABI 2.3 (whose kinds named model
 * architectures), which a core of ABI 3 must refuse before it calls anything. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "vlahybrid/backend.h"

static vh_backend_iface table;
static const vh_backend_iface *real;
static atomic_uint runs;

static vh_status flaky_run(vh_executor *e, const vh_batch *b, uint32_t first, uint32_t n, char *err, size_t size)
{
    const char *every = getenv("VH_FLAKY_FAIL_EVERY");
    const unsigned k = every ? (unsigned)atoi(every) : 0, call = atomic_fetch_add(&runs, 1) + 1;
    if (k > 0 && call % k == 0) {
        snprintf(err, size, "flaky: injected failure (run %u)", call);
        return VH_ERR_BACKEND_FAILED;
    }
    return real->executor_run(e, b, first, n, err, size);
}

VH_PLUGIN_EXPORT const vh_backend_iface *vh_backend_entry(uint32_t major, uint32_t minor)
{
    if (!real) {
        const char *path = getenv("VH_FLAKY_REAL");
        void *so = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
        vh_backend_entry_fn entry = so ? (vh_backend_entry_fn)dlsym(so, VH_BACKEND_ENTRY_SYMBOL) : NULL;
        real = entry ? entry(major, minor) : NULL;
        if (!real || real->struct_size < sizeof table) return NULL;
        table = *real;
        table.name = "flaky";
        table.executor_run = flaky_run;
    }
    const char *abi_major = getenv("VH_FLAKY_ABI_MAJOR"); /* read at each load: a test may change it */
    table.abi_major = abi_major ? (uint32_t)atoi(abi_major) : real->abi_major;
    table.abi_minor = abi_major ? 3 : real->abi_minor;
    return &table;
}
