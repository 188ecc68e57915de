/* Deliberately broken backend plugins, one per defect, built by tests/session/meson.build with
 * -DFAKE_KIND=...: the loader must refuse each with a clear message. And one that loads but is
 * older than the model: it lists the decoder layer (a TRANSFORMER of Llama's features) with the
 * roles up to the MLP's down projection only, one role fewer than the core's (as a plugin
 * built before a tensor role was added would), so the core and the plugin itself refuse blocks
 * that carry that role instead of ignoring the tensor. And one that cannot run on this machine and
 * says why (unavailable_reason), as cuda does without a GPU. */
#include <stddef.h>
#include <stdio.h>

#include "vlahybrid/backend.h"

#define FAKE_ABI_MAJOR 1
#define FAKE_SHORT_TABLE 2
#define FAKE_NULL_TABLE 3
#define FAKE_NO_ENTRY 4
#define FAKE_ABI_1_1 5
#define FAKE_NO_KINDS 6
#define FAKE_OLD_ROLES 7
#define FAKE_NO_DEVICE 8

/* 0: never chosen as "the best backend", so the broken-plugin folder offers nothing usable */
static int32_t score(void) { return FAKE_KIND == FAKE_OLD_ROLES || FAKE_KIND == FAKE_NO_DEVICE ? 0 : 1; }

#if FAKE_KIND != FAKE_NO_ENTRY
static const vh_transformer_support decoder = {.norm = VH_NORM_RMS, .placement = VH_NORM_PRE,
                                               .attention = VH_ATTN_CAUSAL_KV, .rope = VH_ROPE_HALF,
                                               .mlp = VH_MLP_SILU_GATED, .allowed = VH_TF_QKV_BIAS};
static const vh_kind_support kinds[] = {
    {VH_BLOCK_EMBED_LOOKUP, VH_EMBED_LOOKUP_N_ROLES, sizeof(vh_block_params), 0, VH_SLOT_KIND_EMBEDS,
     VH_SLOT_KIND_ROWS, NULL},
    {VH_BLOCK_TRANSFORMER, VH_TF_DOWN_W, sizeof(vh_transformer_params), 0, VH_SLOT_KIND_ROWS, VH_SLOT_KIND_ROWS,
     &decoder},
};
#endif

#if FAKE_KIND == FAKE_ABI_1_1 || FAKE_KIND == FAKE_NO_KINDS || FAKE_KIND == FAKE_OLD_ROLES || FAKE_KIND == FAKE_NO_DEVICE
static uint32_t device_count(void) { return 0; }
static vh_status device_info(uint32_t d, vh_device_info *i) { (void)d; (void)i; return VH_ERR_UNSUPPORTED; }
/* As the real plugins do: refuse any block it does not fully know, before anything else. */
static vh_status create(const vh_executor_params *p, vh_executor **e, char *err, size_t size)
{
    *e = NULL;
    for (uint32_t i = 0; i < p->n_blocks; i++)
        if (!vh_block_check(FAKE_NAME, kinds, 2, p->model, p->first_block + i, err, size))
            return VH_ERR_UNSUPPORTED;
    return VH_ERR_BACKEND_FAILED; /* a fake: it never computes */
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
#if FAKE_KIND == FAKE_NO_DEVICE
static void unavailable_reason(char *why, size_t size)
{
    snprintf(why, size, "no fake device: its driver 1.0 is older than the 2.0 this plugin needs");
}
#define REASON .unavailable_reason = unavailable_reason,
#else
#define REASON
#endif
#define FUNCTIONS REASON .device_count = device_count, .device_info = device_info, .executor_create = create, \
    .executor_destroy = destroy, .executor_run = run, .read_hidden = hidden_out, .write_hidden = hidden_in, \
    .memory = memory,
#else
#define FUNCTIONS
#endif

#if FAKE_KIND != FAKE_NO_ENTRY
static vh_backend_iface table = {
    .abi_major = FAKE_KIND == FAKE_ABI_MAJOR ? 99 : FAKE_KIND == FAKE_ABI_1_1 ? 1 : VH_BACKEND_ABI_MAJOR,
    .abi_minor = FAKE_KIND == FAKE_ABI_1_1 ? 1 : 7,
    .struct_size = FAKE_KIND == FAKE_SHORT_TABLE ? 16 : sizeof(vh_backend_iface),
    .name = FAKE_NAME,
    .n_kinds = FAKE_KIND == FAKE_NO_KINDS ? 0 : 2,
    .kinds = kinds,
    .score = score,
    FUNCTIONS
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
