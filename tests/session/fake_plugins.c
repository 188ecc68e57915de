/* Deliberately broken backend plugins, one per defect, built by tests/session/meson.build with
 * -DFAKE_KIND=...: the loader must refuse each with a clear message. */
#include "vlahybrid/backend.h"

#define FAKE_ABI_MAJOR 1
#define FAKE_SHORT_TABLE 2
#define FAKE_NULL_TABLE 3
#define FAKE_NO_ENTRY 4

static int32_t score(void) { return 1; }

#if FAKE_KIND != FAKE_NO_ENTRY
static vh_backend_iface table = {
    .abi_major = FAKE_KIND == FAKE_ABI_MAJOR ? 99 : VH_BACKEND_ABI_MAJOR,
    .abi_minor = 7,
    .struct_size = FAKE_KIND == FAKE_SHORT_TABLE ? 16 : sizeof(vh_backend_iface),
    .name = FAKE_NAME,
    .score = score,
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
