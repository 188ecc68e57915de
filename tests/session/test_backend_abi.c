/* Backend ABI 2.0 against the real cpu_generic plugin: a block or a batch it does not fully know is
 * refused at once with a message naming what it lacks (a kind of another number, a descriptor or
 * parameter struct of another size, a field it does not know set, an option bit, a tensor role,
 * the wiring), never computed; and a batch can return the final-normed hidden state of chosen
 * rows, checked against a float64 RMSNorm of the rows the same run left in place.
 * ABI 2.3: executor_create reports its progress in bytes of the blocks' tensors (counted here from
 * the views), non-decreasing and ending at the total, stops with VH_ERR_CANCELLED and nothing made
 * at whichever call returns nonzero (every one tried; the ASan job checks nothing leaks), and still
 * takes a 2.2 core's shorter struct (no progress then). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/plugin_loader.h"
#include "plan/plan.h"
#include "family/model_load.h"
#include "test_support.h"

typedef struct fixture {
    vh_plugin *plugin;
    vh_model *model;
    vh_model_desc desc;                /* a copy whose blocks point into `blocks` */
    vh_block_desc *blocks;
    char why[512];
} fixture;

static void setup(fixture *f)
{
    memset(f, 0, sizeof *f);
    vh_error err;
    ck_assert_msg(vh_plugin_load("cpu_generic", NULL, NULL, &f->plugin, &err) == VH_OK, "%s", err.message);
    char *dir = vh_test_source_path("models/openvla-tiny");
    ck_assert_msg(vh_model_load(dir, &f->model, &err) == VH_OK, "%s", err.message);
    free(dir);
    f->desc = f->model->desc;
    f->blocks = malloc(sizeof *f->blocks * f->desc.n_blocks);
    memcpy(f->blocks, f->model->blocks, sizeof *f->blocks * f->desc.n_blocks);
    f->desc.blocks = f->blocks;
}

static void teardown(fixture *f)
{
    free(f->blocks);
    vh_model_free(f->model);
    vh_plugin_unload(f->plugin);
}

/* executor_create over [first, first + n) of the (edited) copy. */
static vh_status create(fixture *f, uint32_t first, uint32_t n, vh_executor **ex)
{
    vh_executor_params p = {.struct_size = sizeof p, .model = &f->desc, .first_block = first, .n_blocks = n,
                            .max_sequences = 1, .max_context = 300, .max_rows = 300, .max_images = 1,
                            .n_threads = 1};
    f->why[0] = '\0';
    *ex = NULL;
    return f->plugin->iface->executor_create(&p, ex, f->why, sizeof f->why);
}

static void expect_refused(fixture *f, uint32_t first, const char *a, const char *b)
{
    vh_executor *ex;
    ck_assert_int_eq(create(f, first, 1, &ex), VH_ERR_UNSUPPORTED);
    ck_assert_ptr_null(ex);
    ck_assert_msg(strstr(f->why, "cpu_generic") && strstr(f->why, a) && (!b || strstr(f->why, b)), "message: %s",
                  f->why);
}

/* Block i of the copy with its tensors and one more (a copy of its first) of `role`, in `tensors`
 * ([VH_MAX_ROLES + 1]). */
static void add_tensor_of_role(fixture *f, uint32_t i, vh_tensor_view *tensors, uint32_t role)
{
    const uint32_t n = f->model->blocks[i].n_tensors;
    memcpy(tensors, f->model->blocks[i].tensors, sizeof(vh_tensor_view) * n);
    tensors[n] = tensors[0];
    tensors[n].role = role;
    f->blocks[i].tensors = tensors;
    f->blocks[i].n_tensors = n + 1;
}

START_TEST(test_unknown_kind)
{
    fixture f;
    setup(&f);
    const uint32_t i = f.model->llm_first_block;
    f.blocks[i].kind = 99; /* a kind of a later ABI */
    expect_refused(&f, i, "kind 99", "does not run");
    teardown(&f);
}
END_TEST

START_TEST(test_short_or_longer_structs)
{
    fixture f;
    setup(&f);
    const uint32_t i = f.model->llm_first_block;
    f.blocks[i].struct_size = sizeof(vh_block_desc) - 4; /* short */
    expect_refused(&f, i, "struct_size", NULL);
    f.blocks[i].struct_size = sizeof(vh_block_desc);
    /* parameters: short, and longer with a field this plugin does not know set */
    struct { vh_transformer_params known; uint32_t newer; } params = {{.struct_size = sizeof params}, 0};
    params.known = *(const vh_transformer_params *)f.model->blocks[i].params;
    params.known.struct_size = sizeof params;
    f.blocks[i].params = (const vh_block_params *)&params;
    vh_executor *ex;
    ck_assert_msg(create(&f, i, 1, &ex) == VH_OK, "a longer struct with its extra field zero: %s", f.why);
    f.plugin->iface->executor_destroy(ex);
    params.newer = 1;
    expect_refused(&f, i, "parameters", "does not know");
    params.known.struct_size = 4;
    expect_refused(&f, i, "parameters", NULL);
    /* executor parameters shorter than the plugin's */
    f.blocks[i] = f.model->blocks[i];
    vh_executor_params p = {.struct_size = sizeof p - 8, .model = &f.desc, .first_block = i, .n_blocks = 1,
                            .max_sequences = 1, .max_context = 8, .max_rows = 8};
    ex = (vh_executor *)1;
    ck_assert_int_eq(f.plugin->iface->executor_create(&p, &ex, f.why, sizeof f.why), VH_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(ex);
    ck_assert_msg(strstr(f.why, "size"), "%s", f.why);
    teardown(&f);
}
END_TEST

START_TEST(test_unknown_option_role_or_wiring)
{
    fixture f;
    setup(&f);
    const uint32_t i = f.model->llm_first_block;
    f.blocks[i].options = 1u << 7;
    expect_refused(&f, i, "option bits 0x80", NULL);
    f.blocks[i].options = 0;

    /* a tensor of a role added after this plugin was built (a LoRA pair, say) */
    vh_tensor_view tensors[VH_MAX_ROLES + 1];
    add_tensor_of_role(&f, i, tensors, VH_TF_N_ROLES);
    char role[32];
    snprintf(role, sizeof role, "role %d", VH_TF_N_ROLES);
    expect_refused(&f, i, role, "does not know");
    /* the same role twice */
    tensors[f.model->blocks[i].n_tensors].role = VH_TF_Q_W;
    expect_refused(&f, i, "given twice", NULL);
    f.blocks[i] = f.model->blocks[i];

    /* a graph this plugin does not run: a decoder layer reading the image embeddings */
    f.blocks[i].inputs[0] = f.model->blocks[f.model->llm_embed_block].inputs[0];
    expect_refused(&f, i, "reads embeds slot 'image.embeds'", NULL);
    f.blocks[i] = f.model->blocks[i];
    f.blocks[i].inputs[0] = f.desc.n_slots; /* a slot the model does not have */
    expect_refused(&f, i, "input 0 is slot", NULL);
    f.blocks[i] = f.model->blocks[i];
    f.blocks[i].state = VH_NO_STATE; /* a decoder layer without its KV cache */
    expect_refused(&f, i, "owns no KV cache state", NULL);
    teardown(&f);
}
END_TEST

/* A transformer layer with a feature the plugin does not implement is refused, naming the block,
 * the feature and the backend, both by the core (before it asks for an executor) and by the
 * plugin itself. */
START_TEST(test_unsupported_features)
{
    fixture f;
    setup(&f);
    const uint32_t i = f.model->llm_first_block;
    vh_transformer_params p = *(const vh_transformer_params *)f.model->blocks[i].params;
    f.blocks[i].params = (const vh_block_params *)&p;
    vh_executor *ex;
    ck_assert_msg(create(&f, i, 1, &ex) == VH_OK, "the copy as it is: %s", f.why);
    f.plugin->iface->executor_destroy(ex);
    char layer[64];
    snprintf(layer, sizeof layer, "block %u (TRANSFORMER, layer 0)", i);

    p.attention = VH_ATTN_WINDOWED;
    expect_refused(&f, i, layer, "attention 'windowed' (it runs causal over a KV cache)");
    p.attention = VH_ATTN_CAUSAL_KV, p.norm = VH_NORM_LAYER;
    expect_refused(&f, i, layer, "norm 'LayerNorm' (it runs RMSNorm)");
    p.norm = VH_NORM_RMS, p.rope = VH_ROPE_2D_INTERLEAVED;
    expect_refused(&f, i, layer, "rope '2-D interleaved'");
    p.rope = VH_ROPE_HALF, p.placement = VH_NORM_POST;
    expect_refused(&f, i, layer, "placement 'post-norm'");
    p.placement = VH_NORM_PRE, p.flags = VH_TF_EXTRA_KEYS;
    expect_refused(&f, i, layer, "extra keys set");
    p.flags = VH_TF_K_BIAS; /* allowed, but the bias it promises is not there */
    char lacks[64];
    snprintf(lacks, sizeof lacks, "lacks the tensor of role %d its features need", VH_TF_K_B);
    expect_refused(&f, i, layer, lacks);
    p.flags = 0;
    /* a tensor its features do not use (a gate bias without VH_TF_MLP_BIAS): refused, not ignored */
    vh_tensor_view tensors[VH_MAX_ROLES + 1];
    add_tensor_of_role(&f, i, tensors, VH_TF_GATE_B);
    char unused[64];
    snprintf(unused, sizeof unused, "of role %d, which its features do not use", VH_TF_GATE_B);
    expect_refused(&f, i, layer, unused);
    f.blocks[i].tensors = f.model->blocks[i].tensors;
    f.blocks[i].n_tensors = f.model->blocks[i].n_tensors;
    p.flags = VH_TF_O_BIAS; /* a bias this plugin's decoder layer does not have */
    expect_refused(&f, i, layer, "output bias set (it runs it without)");
    p.flags = 0, p.lora_sets = 3;
    expect_refused(&f, i, layer, "3 LoRA sets (it runs at most 2)");
    p.lora_sets = 0, p.norm = 0;
    expect_refused(&f, i, layer, "norm 'unset'");
    p.norm = VH_NORM_RMS;

    /* the core's own refusal, before any executor: the backend, the block and the feature */
    p.attention = VH_ATTN_CROSS;
    const vh_model_desc saved = f.model->desc;
    f.model->desc = f.desc;
    vh_error err;
    ck_assert_int_eq(vh_plan_check_support(f.plugin, f.model, i, 1, &err), VH_ERR_UNSUPPORTED);
    f.model->desc = saved;
    ck_assert_msg(strstr(err.message, "backend 'cpu_generic'") && strstr(err.message, layer) &&
                  strstr(err.message, "attention 'cross'"), "%s", err.message);
    p.attention = VH_ATTN_CAUSAL_KV;

    /* a tower's layer (block 1: the first tower's first) without the fused q|k|v it runs */
    vh_transformer_params q = *(const vh_transformer_params *)f.model->blocks[1].params;
    f.blocks[1].params = (const vh_block_params *)&q;
    q.flags &= ~VH_TF_FUSED_QKV;
    expect_refused(&f, 1, "block 1 (TRANSFORMER, layer 0)", "fused q|k|v not set (it runs it only with)");
    f.blocks[1] = f.model->blocks[1];
    /* the second tower's first layer (it has no LayerScale) saying it has one: allowed, but the
     * tensors are not there */
    const uint32_t second = 1 + f.desc.towers[0].n_blocks + 1;
    vh_transformer_params r = *(const vh_transformer_params *)f.model->blocks[second].params;
    ck_assert(!(r.flags & VH_TF_LAYER_SCALE));
    f.blocks[second].params = (const vh_block_params *)&r;
    r.flags |= VH_TF_LAYER_SCALE;
    expect_refused(&f, second, "lacks the tensor of role", NULL);
    teardown(&f);
}
END_TEST

/* One prefill of the embedding, the LLM blocks and the head: tokens as ever, and the normed hidden
 * state of three chosen rows beside them. The reference: the same rows left by a run without the
 * head (the last LLM block's output, read_hidden), normed in float64. */
START_TEST(test_hidden_rows_and_batch_checks)
{
    fixture f;
    setup(&f);
    const vh_model *m = f.model;
    const uint32_t first = m->llm_embed_block, n = m->desc.n_blocks - first, Dl = m->desc.llm.hidden;
    vh_executor *ex;
    ck_assert_msg(create(&f, first, n, &ex) == VH_OK, "%s", f.why);
    enum { ROWS = 12 };
    int32_t tokens[ROWS];
    for (int r = 0; r < ROWS; r++) tokens[r] = 1 + (r * 37) % 500;
    vh_segment seg = {.sequence = 0, .n_rows = ROWS, .position = 0, .image = -1};
    const uint32_t rows[3] = {0, 5, ROWS - 1};
    float *hidden = malloc(sizeof(float) * 3 * Dl), *raw = malloc(sizeof(float) * ROWS * Dl);
    int32_t token = -1;
    vh_batch b = {.struct_size = sizeof b, .options = VH_BATCH_HIDDEN_ROWS, .n_segments = 1, .segments = &seg,
                  .n_rows = ROWS, .tokens = tokens, .out_tokens = &token, .n_hidden_rows = 3, .hidden_rows = rows,
                  .out_hidden = hidden};
    const vh_backend_iface *be = f.plugin->iface;
    ck_assert_msg(be->executor_run(ex, &b, first, n, f.why, sizeof f.why) == VH_OK, "%s", f.why);
    ck_assert_int_ge(token, 0);
    /* hidden rows only: no tokens asked */
    float *hidden_only = malloc(sizeof(float) * 3 * Dl);
    b.out_tokens = NULL;
    b.out_hidden = hidden_only;
    ck_assert_msg(be->executor_run(ex, &b, first, n, f.why, sizeof f.why) == VH_OK, "%s", f.why);
    ck_assert_int_eq(memcmp(hidden, hidden_only, sizeof(float) * 3 * Dl), 0);
    /* the rows before the head, normed in float64 with the head's weight */
    vh_batch body = {.struct_size = sizeof body, .n_segments = 1, .segments = &seg, .n_rows = ROWS, .tokens = tokens};
    ck_assert_msg(be->executor_run(ex, &body, first, n - 1, f.why, sizeof f.why) == VH_OK, "%s", f.why);
    ck_assert_int_eq(be->read_hidden(ex, raw, ROWS, f.why, sizeof f.why), VH_OK);
    const vh_tensor_view *w = vh_block_tensor(&m->blocks[m->head_block], VH_READOUT_NORM);
    double worst = 0;
    for (int k = 0; k < 3; k++) {
        const float *x = raw + (size_t)rows[k] * Dl;
        double ss = 0;
        for (uint32_t c = 0; c < Dl; c++) ss += (double)x[c] * x[c];
        const double scale = 1.0 / sqrt(ss / Dl + m->desc.llm.rms_eps);
        for (uint32_t c = 0; c < Dl; c++) {
            const double wc = w->dtype == VH_DTYPE_F32 ? ((const float *)w->data)[c]
                                                       : vh_bf16_to_f32(((const uint16_t *)w->data)[c]);
            const double want = wc * x[c] * scale, got = hidden[(size_t)k * Dl + c];
            const double e = fabs(got - want) / (fabs(want) + 1e-3);
            if (e > worst) worst = e;
        }
    }
    ck_assert_msg(worst < 1e-5, "hidden rows differ from float64 RMSNorm by %g (relative)", worst);

    /* batch checks: an unknown option, a short struct, a row outside the batch */
    b.options = VH_BATCH_HIDDEN_ROWS | (1u << 9);
    ck_assert_int_eq(be->executor_run(ex, &b, first, n, f.why, sizeof f.why), VH_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(f.why, "0x200"), "%s", f.why);
    b.options = VH_BATCH_HIDDEN_ROWS;
    b.struct_size = sizeof b - 8;
    ck_assert_int_eq(be->executor_run(ex, &b, first, n, f.why, sizeof f.why), VH_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(f.why, "struct_size"), "%s", f.why);
    b.struct_size = sizeof b;
    const uint32_t outside[1] = {ROWS};
    b.hidden_rows = outside;
    b.n_hidden_rows = 1;
    ck_assert_int_eq(be->executor_run(ex, &b, first, n, f.why, sizeof f.why), VH_ERR_INVALID_ARGUMENT);
    be->executor_destroy(ex);
    free(hidden);
    free(hidden_only);
    free(raw);
    teardown(&f);
}
END_TEST

typedef struct progress_log {
    int calls, cancel_at;              /* cancel_at: the call (1-based) that returns nonzero; 0: none */
    uint64_t last_done, total;
    int went_down;
} progress_log;

static int log_progress(void *user, uint64_t done, uint64_t total)
{
    progress_log *l = user;
    l->calls++;
    l->went_down |= done < l->last_done || (l->total && total != l->total) || done > total;
    l->last_done = done;
    l->total = total;
    return l->calls == l->cancel_at;
}

static vh_status create_all(fixture *f, progress_log *l, uint32_t struct_size, vh_executor **ex)
{
    vh_executor_params p = {.struct_size = struct_size, .model = &f->desc, .first_block = 0,
                            .n_blocks = f->desc.n_blocks, .max_sequences = 1, .max_context = 300, .max_rows = 300,
                            .max_images = 1, .n_threads = 1, .progress_fn = log_progress, .progress_user = l};
    *ex = (vh_executor *)1;
    f->why[0] = '\0';
    return f->plugin->iface->executor_create(&p, ex, f->why, sizeof f->why);
}

START_TEST(test_create_progress_and_cancel)
{
    fixture f;
    setup(&f);
    uint64_t bytes = 0; /* what the plugin should count: every tensor's elements x its dtype's size */
    for (uint32_t b = 0; b < f.desc.n_blocks; b++)
        for (uint32_t t = 0; t < f.blocks[b].n_tensors; t++) {
            const vh_tensor_view *v = &f.blocks[b].tensors[t];
            uint64_t n = v->dtype == VH_DTYPE_F32 ? 4 : 2;
            for (uint32_t k = 0; k < v->ndim; k++) n *= (uint64_t)v->shape[k];
            bytes += n;
        }
    progress_log full = {0};
    vh_executor *ex;
    ck_assert_msg(create_all(&f, &full, sizeof(vh_executor_params), &ex) == VH_OK, "%s", f.why);
    f.plugin->iface->executor_destroy(ex);
    ck_assert_int_gt(full.calls, 2);
    ck_assert_int_eq(full.went_down, 0);
    ck_assert_uint_eq(full.total, bytes);
    ck_assert_uint_eq(full.last_done, bytes);
    for (int k = 1; k <= full.calls; k++) {
        progress_log l = {.cancel_at = k};
        ck_assert_int_eq(create_all(&f, &l, sizeof(vh_executor_params), &ex), VH_ERR_CANCELLED);
        ck_assert_ptr_null(ex);
        ck_assert_int_eq(l.calls, k); /* not called again once it asked to stop */
        ck_assert_msg(strstr(f.why, "cancelled"), "%s", f.why);
    }
    /* a shorter struct (an older core's, of ABI 2): refused */
    progress_log none = {0};
    ck_assert_int_eq(create_all(&f, &none, offsetof(vh_executor_params, progress_fn), &ex), VH_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(ex);
    ck_assert_int_eq(none.calls, 0);
    teardown(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("backend_abi");
    TCase *tc = tcase_create("abi2");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_unknown_kind);
    tcase_add_test(tc, test_short_or_longer_structs);
    tcase_add_test(tc, test_unknown_option_role_or_wiring);
    tcase_add_test(tc, test_unsupported_features);
    tcase_add_test(tc, test_hidden_rows_and_batch_checks);
    tcase_add_test(tc, test_create_progress_and_cancel);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
