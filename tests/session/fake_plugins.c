/* Deliberately broken backend plugins, one per defect, built by tests/session/meson.build with
 * -DFAKE_KIND=...: the loader must refuse each with a clear message. And one that is not broken:
 * a plugin built against ABI 1.0, whose table ends before the 1.1 fields (loaded; the core falls
 * back where the 1.1 functions would serve). */
#include <stddef.h>

#include "vlahybrid/backend.h"

#define FAKE_ABI_MAJOR 1
#define FAKE_SHORT_TABLE 2
#define FAKE_NULL_TABLE 3
#define FAKE_NO_ENTRY 4
#define FAKE_ABI_1_0 5

/* 0: never chosen as "the best backend", so the broken-plugin folder offers nothing usable */
static int32_t score(void) { return FAKE_KIND == FAKE_ABI_1_0 ? 0 : 1; }

#if FAKE_KIND == FAKE_ABI_1_0
static uint32_t device_count(void) { return 0; }
static vh_status device_info(uint32_t d, vh_device_info *i) { (void)d; (void)i; return VH_ERR_UNSUPPORTED; }
static vh_status create(const vh_executor_params *p, vh_executor **e, char *err, size_t size)
{
    (void)p; (void)err; (void)size;
    *e = NULL;
    return VH_ERR_UNSUPPORTED;
}
static void destroy(vh_executor *e) { (void)e; }
static vh_status run(vh_executor *e, const vh_batch *b, uint32_t f, uint32_t n, char *err, size_t size)
{
    (void)e; (void)b; (void)f; (void)n; (void)err; (void)size;
    return VH_ERR_UNSUPPORTED;
}
static vh_status hidden_out(vh_executor *e, float *d, uint32_t n, char *err, size_t size)
{
    (void)e; (void)d; (void)n; (void)err; (void)size;
    return VH_ERR_UNSUPPORTED;
}
static vh_status hidden_in(vh_executor *e, const float *s, uint32_t n, char *err, size_t size)
{
    (void)e; (void)s; (void)n; (void)err; (void)size;
    return VH_ERR_UNSUPPORTED;
}
static vh_status memory(vh_executor *e, vh_memory_report *r) { (void)e; (void)r; return VH_ERR_UNSUPPORTED; }
#define V1_0_FUNCTIONS .device_count = device_count, .device_info = device_info, .executor_create = create, \
    .executor_destroy = destroy, .executor_run = run, .read_hidden = hidden_out, .write_hidden = hidden_in, \
    .memory = memory,
#else
#define V1_0_FUNCTIONS
#endif

#if FAKE_KIND != FAKE_NO_ENTRY
static vh_backend_iface table = {
    .abi_major = FAKE_KIND == FAKE_ABI_MAJOR ? 99 : VH_BACKEND_ABI_MAJOR,
    .abi_minor = FAKE_KIND == FAKE_ABI_1_0 ? 0 : 7,
    .struct_size = FAKE_KIND == FAKE_SHORT_TABLE ? 16
                   : FAKE_KIND == FAKE_ABI_1_0   ? offsetof(vh_backend_iface, executor_plan_memory)
                                                 : sizeof(vh_backend_iface),
    .name = FAKE_NAME,
    .score = score,
    V1_0_FUNCTIONS
};

VH_PLUGIN_EXPORT const vh_backend_iface *vh_backend_entry(uint32_t major, uint32_t minor)
{
    (void)major;
    (void)minor;
    return FAKE_KIND == FAKE_NULL_TABLE ? NULL : &table;
}
#else
VH_PLUGIN_EXPORT int not_the_entry_symbol(void) { return score(); }
#endif
