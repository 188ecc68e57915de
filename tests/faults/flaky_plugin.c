/* A backend that fails on purpose: every call is forwarded to a real plugin (VH_FLAKY_REAL: the
 * path of its .so), except that executor_run fails (VH_ERR_BACKEND_FAILED, "flaky: injected
 * failure") on every VH_FLAKY_FAIL_EVERY-th call counted over the process (0 or unset: never).
 * Named "flaky"; built into a folder of its own, so only a test that points VH_BACKEND_PATH there
 * finds it (tests/faults/test_backend_failure.c).
 * VH_FLAKY_ABI_MINOR=2: it says it is a 2.2 plugin and checks the executor parameters as a 2.2
 * plugin does (at least the 2.2 struct, nothing set beyond it: a 2.3 core's progress hook would
 * be refused), then hands them on as they came (the real plugin, of 2.3, takes the 2.2 struct). */
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

static vh_status flaky_create(const vh_executor_params *p, vh_executor **e, char *err, size_t size)
{
    const char *minor = getenv("VH_FLAKY_ABI_MINOR");
    if (minor && atoi(minor) == 2 &&
        (p->struct_size < VH_EXECUTOR_PARAMS_V2_2_SIZE ||
         !vh_struct_tail_zero(p, p->struct_size, (uint32_t)VH_EXECUTOR_PARAMS_V2_2_SIZE))) {
        *e = NULL;
        snprintf(err, size, "flaky (ABI 2.2): executor parameters of %u bytes with fields it does not know set",
                 p->struct_size);
        return VH_ERR_INVALID_ARGUMENT;
    }
    return real->executor_create(p, e, err, size);
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
        table.executor_create = flaky_create;
    }
    const char *abi_minor = getenv("VH_FLAKY_ABI_MINOR"); /* read at each load: a test may change it */
    table.abi_minor = abi_minor ? (uint32_t)atoi(abi_minor) : real->abi_minor;
    return &table;
}
