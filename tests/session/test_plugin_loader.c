/* The plugin loader: finding backends by name along the search path, and refusing plugins built
 * for another ABI (tests/session/fake_plugins.c) with a message naming both versions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/plugin_loader.h"
#include "family/model_load.h"
#include "plan/plan.h"
#include "test_support.h"

static vh_status load(const char *name, const char *path, vh_plugin **p, vh_error *err)
{
    vh_error_clear(err);
    return vh_plugin_load(name, path, NULL, p, err);
}

START_TEST(test_cpu_generic_from_env_path)
{
    vh_plugin *p = NULL;
    vh_error err;
    ck_assert_msg(load("cpu_generic", NULL, &p, &err) == VH_OK, "%s", err.message);
    ck_assert_str_eq(p->iface->name, "cpu_generic");
    ck_assert_uint_eq(p->iface->abi_major, VH_BACKEND_ABI_MAJOR);
    ck_assert_int_gt(p->iface->score(), 0);
    ck_assert_uint_eq(p->iface->device_count(), 1);
    vh_device_info info = {.struct_size = sizeof info};
    ck_assert_int_eq(p->iface->device_info(0, &info), VH_OK);
    ck_assert_int_eq(info.kind, VH_DEVICE_CPU);
    ck_assert_int_eq(p->iface->device_info(1, &info), VH_ERR_INVALID_ARGUMENT);

    /* the explicit file path works too */
    char path[4096];
    snprintf(path, sizeof path, "%s", p->path);
    vh_plugin_unload(p);
    ck_assert_int_eq(load("cpu_generic", path, &p, &err), VH_OK);
    vh_plugin_unload(p);
    /* ... but not under another name */
    ck_assert_int_eq(load("cuda", path, &p, &err), VH_ERR_BACKEND_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(err.message, "is backend 'cpu_generic'"));
}
END_TEST

START_TEST(test_not_found_lists_the_search_path)
{
    vh_plugin *p = (vh_plugin *)1;
    vh_error err;
    ck_assert_int_eq(load("nonexistent", FAKE_PLUGIN_DIR, &p, &err), VH_ERR_BACKEND_NOT_FOUND);
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(err.message, "vh_backend_nonexistent.so"));
    ck_assert_ptr_nonnull(strstr(err.message, FAKE_PLUGIN_DIR));
    /* and the core's own plugin folder: beside what holds the core (this statically linked test
     * program), libdir's vlahybrid/backends (lib/backend/plugin_dirs.h) */
    char own[4096];
    ssize_t n = readlink("/proc/self/exe", own, sizeof own - 1);
    ck_assert_int_gt(n, 0);
    own[n] = '\0';
    snprintf(strrchr(own, '/'), sizeof own - (size_t)(strrchr(own, '/') - own), "/vlahybrid/backends");
    ck_assert_msg(strstr(err.message, own), "%s does not name %s", err.message, own);
}
END_TEST

START_TEST(test_invalid_names)
{
    vh_plugin *p;
    vh_error err;
    const char *bad[] = {"", "../cpu_generic", "cpu/generic", "CPU", "a b", NULL};
    for (int i = 0; bad[i]; i++)
        ck_assert_msg(load(bad[i], NULL, &p, &err) == VH_ERR_INVALID_ARGUMENT, "'%s' accepted", bad[i]);
    ck_assert_int_eq(load(NULL, NULL, &p, &err), VH_ERR_INVALID_ARGUMENT);
}
END_TEST

/* the library's own ABI version, as its messages print it */
#define STR_(x) #x
#define STR(x) STR_(x)
#define CORE_ABI STR(VH_BACKEND_ABI_MAJOR) "." STR(VH_BACKEND_ABI_MINOR)

static const struct broken {
    const char *name;
    const char *in_message[2];
} broken[] = {
    {"badabi", {"implements backend ABI 99.7", "speaks " CORE_ABI}},
    {"short", {"16 bytes", "speaks " CORE_ABI}},
    {"nulltable", {"refused backend ABI " CORE_ABI, "returned NULL"}},
    {"noentry", {"not a vlahybrid backend", "vh_backend_entry"}},
    {"abi11", {"implements backend ABI 1.1", "needs ABI " STR(VH_BACKEND_ABI_MAJOR) ".x"}},
    {"nokinds", {"lists no block kinds", "n_kinds 0"}},
};

START_TEST(test_broken_plugin_refused)
{
    const struct broken *b = &broken[_i];
    vh_plugin *p = (vh_plugin *)1;
    vh_error err;
    ck_assert_int_eq(load(b->name, FAKE_PLUGIN_DIR, &p, &err), VH_ERR_BACKEND_ABI);
    ck_assert_ptr_null(p);
    for (int k = 0; k < 2; k++)
        ck_assert_msg(strstr(err.message, b->in_message[k]) != NULL, "%s: '%s' lacks '%s'", b->name, err.message,
                      b->in_message[k]);
}
END_TEST

/* A plugin older than the model: it knows the decoder layer with one role fewer than the core (as one
 * built before a tensor role was added). The core refuses to give it those blocks, naming the
 * block, kind and role; and the plugin's own executor_create refuses them too. Neither computes a
 * block without the tensor. */
START_TEST(test_plugin_older_than_the_model_refuses)
{
    vh_plugin *p = NULL;
    vh_error err;
    ck_assert_msg(load("oldroles", FAKE_PLUGIN_DIR, &p, &err) == VH_OK, "%s", err.message);
    char *dir = vh_test_source_path("models/openvla-tiny");
    vh_model *m = NULL;
    ck_assert_msg(vh_model_load(dir, &m, &err) == VH_OK, "%s", err.message);
    free(dir);
    ck_assert_int_eq(vh_plan_check_support(p, m, m->llm_embed_block, 2, &err), VH_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "backend 'oldroles'") && strstr(err.message, "TRANSFORMER") &&
                  strstr(err.message, "down_proj") && strstr(err.message, "does not know"), "%s", err.message);
    /* a range it knows is accepted: the embedding */
    ck_assert_int_eq(vh_plan_check_support(p, m, m->llm_embed_block, 1, &err), VH_OK);
    /* and a kind it does not list at all: the head */
    ck_assert_int_eq(vh_plan_check_support(p, m, m->head_block, 1, &err), VH_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "READOUT") && strstr(err.message, "does not run"), "%s", err.message);
    /* the plugin's own refusal */
    vh_executor_params params = {.struct_size = sizeof params, .model = &m->desc, .first_block = m->llm_first_block,
                                 .n_blocks = 1, .max_sequences = 1, .max_context = 8, .max_rows = 8};
    vh_executor *ex = (vh_executor *)1;
    char why[512] = "";
    ck_assert_int_eq(p->iface->executor_create(&params, &ex, why, sizeof why), VH_ERR_UNSUPPORTED);
    ck_assert_ptr_null(ex);
    char role[32];
    snprintf(role, sizeof role, "role %d", VH_TF_DOWN_W);
    ck_assert_msg(strstr(why, role) && strstr(why, "does not know"), "%s", why);
    vh_model_free(m);
    vh_plugin_unload(p);
}
END_TEST

/* A backend that scores 0 here is refused with its own reason (no GPU, no AVX-512 bf16, an old
 * driver), not just "cannot run". */
START_TEST(test_refusal_says_why)
{
    vh_session_params p;
    vh_session_params_init(&p);
    char *dir = vh_test_source_path("models/openvla-tiny");
    p.model_path = dir;
    p.backends = "nodevice";
    p.plugin_path = FAKE_PLUGIN_DIR;
    vh_session *s = (vh_session *)1;
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_BACKEND_FAILED);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(vh_last_error(), "backend 'nodevice' cannot run on this machine: no fake device: its driver "
                                          "1.0 is older than the 2.0"), "%s", vh_last_error());
    p.backends = "oldroles"; /* no unavailable_reason: the refusal alone */
    ck_assert_int_eq(vh_session_create(&p, &s), VH_ERR_BACKEND_FAILED);
    ck_assert_msg(strstr(vh_last_error(), "backend 'oldroles' cannot run on this machine"), "%s", vh_last_error());
    free(dir);
}
END_TEST

START_TEST(test_best_skips_broken_plugins)
{
    /* only broken plugins in the path: nothing usable, and the message says where it looked */
    unsetenv("VH_BACKEND_PATH");
    vh_plugin *p = (vh_plugin *)1;
    vh_error err;
    vh_error_clear(&err);
    ck_assert_int_eq(vh_plugin_load_best(FAKE_PLUGIN_DIR, NULL, &p, &err), VH_ERR_BACKEND_NOT_FOUND);
    ck_assert_ptr_null(p);
    ck_assert_ptr_nonnull(strstr(err.message, FAKE_PLUGIN_DIR));
}
END_TEST

/* The best plugin is the usable one with the highest score among those built here (cpu_generic
 * always scores 10; cpu_amx more on AVX-512 bf16 / AMX CPUs; cuda more with a GPU). */
START_TEST(test_best_has_the_highest_score)
{
    const char *names[] = {"cpu_generic", "cpu_amx", "cuda"};
    int32_t highest = 0;
    for (int i = 0; i < 3; i++) {
        vh_plugin *p = NULL;
        vh_error err;
        if (load(names[i], NULL, &p, &err) != VH_OK) continue;
        if (p->iface->score() > highest) highest = p->iface->score();
        vh_plugin_unload(p);
    }
    ck_assert_int_ge(highest, 10);
    vh_plugin *p = NULL;
    vh_error err;
    vh_error_clear(&err);
    ck_assert_msg(vh_plugin_load_best(FAKE_PLUGIN_DIR, NULL, &p, &err) == VH_OK, "%s", err.message);
    ck_assert_int_eq(p->iface->score(), highest);
    vh_plugin_unload(p);
}
END_TEST

START_TEST(test_iface_checks)
{
    vh_error err;
    vh_backend_iface t = {.abi_major = VH_BACKEND_ABI_MAJOR, .abi_minor = 0, .struct_size = sizeof t, .name = "x"};
    ck_assert_int_eq(vh_plugin_check_iface(&t, "x.so", &err), VH_ERR_BACKEND_ABI); /* functions missing */
    ck_assert_ptr_nonnull(strstr(err.message, "missing"));
    ck_assert_int_eq(vh_plugin_check_iface(NULL, "x.so", &err), VH_ERR_BACKEND_ABI);
}
END_TEST

/* A minor version appends roles, batch options and batch fields, no table field: a plugin of an
 * older minor (its decoder layer without the bias roles, without the newer batch options) still
 * loads, still runs a newer core's batches that use none of the new options (their fields, past
 * its vh_batch, are zero: its tail check passes), and refuses a block with q/k/v biases (a role it
 * does not know) instead of ignoring the bias. */
START_TEST(test_older_minor_plugin_accepted)
{
    vh_plugin *p = NULL;
    vh_error err;
    ck_assert_msg(load("cpu_generic", NULL, &p, &err) == VH_OK, "%s", err.message);
    vh_backend_iface old = *p->iface;
    old.abi_minor = 0;
    vh_kind_support kinds[16];
    ck_assert_uint_le(old.n_kinds, 16);
    memcpy(kinds, old.kinds, sizeof kinds[0] * old.n_kinds);
    for (uint32_t i = 0; i < old.n_kinds; i++)
        if (kinds[i].kind == VH_BLOCK_TRANSFORMER && kinds[i].input_kind == VH_SLOT_KIND_ROWS)
            kinds[i].n_roles = VH_TF_Q_B; /* the decoder layer without its bias roles */
    old.kinds = kinds;
    old.batch_options = VH_BATCH_HIDDEN_ROWS | VH_BATCH_SEGMENT_EMBEDS | VH_BATCH_PLAN;
    ck_assert_msg(vh_plugin_check_iface(&old, "old.so", &err) == VH_OK, "%s", err.message);

    vh_batch b = {.struct_size = sizeof b, .options = VH_BATCH_HIDDEN_ROWS};
    ck_assert(vh_struct_tail_zero(&b, b.struct_size, (uint32_t)offsetof(vh_batch, segment_adapters)));
    char why[256];
    ck_assert(vh_batch_options_check("old", old.batch_options, &b, why, sizeof why));
    b.options |= VH_BATCH_SEGMENT_ADAPTERS;
    ck_assert(!vh_batch_options_check("old", old.batch_options, &b, why, sizeof why));
    ck_assert_msg(strstr(why, "0x8"), "%s", why);

    float bias[4] = {0};
    vh_tensor_view t = {.data = bias, .dtype = VH_DTYPE_F32, .ndim = 1, .shape = {4}, .name = "q_proj.bias",
                        .role = VH_TF_Q_B};
    vh_transformer_params lp = {.struct_size = sizeof lp, .norm = VH_NORM_RMS, .placement = VH_NORM_PRE,
                                .attention = VH_ATTN_CAUSAL_KV, .rope = VH_ROPE_HALF, .mlp = VH_MLP_SILU_GATED,
                                .flags = VH_TF_QKV_BIAS};
    vh_block_desc d[2] = {{0}, {.struct_size = sizeof d[1], .kind = VH_BLOCK_TRANSFORMER,
                                .params = (const vh_block_params *)&lp, .n_tensors = 1, .tensors = &t, .n_inputs = 1,
                                .inputs = {0}, .output = 0, .state = 0}};
    const vh_slot_desc rows = {"rows", VH_SLOT_KIND_ROWS, 0};
    const vh_model_desc m = {.struct_size = sizeof m, .n_slots = 1, .slots = &rows, .n_blocks = 2, .blocks = d};
    ck_assert(!vh_block_check("old", kinds, old.n_kinds, &m, 1, why, sizeof why));
    ck_assert_msg(strstr(why, "q_proj.bias") && strstr(why, "does not know"), "%s", why);
    ck_assert_msg(vh_block_check("new", p->iface->kinds, p->iface->n_kinds, &m, 1, why, sizeof why), "%s", why);
    vh_plugin_unload(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plugin_loader");
    TCase *tc = tcase_create("loader");
    tcase_add_test(tc, test_cpu_generic_from_env_path);
    tcase_add_test(tc, test_not_found_lists_the_search_path);
    tcase_add_test(tc, test_invalid_names);
    tcase_add_loop_test(tc, test_broken_plugin_refused, 0, (int)(sizeof broken / sizeof broken[0]));
    tcase_add_test(tc, test_plugin_older_than_the_model_refuses);
    tcase_add_test(tc, test_best_skips_broken_plugins);
    tcase_add_test(tc, test_best_has_the_highest_score);
    tcase_add_test(tc, test_refusal_says_why);
    tcase_add_test(tc, test_iface_checks);
    tcase_add_test(tc, test_older_minor_plugin_accepted);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
