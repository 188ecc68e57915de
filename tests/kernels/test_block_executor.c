/* backends/common: the kind table (block_variants) and the checks every executor shares
 * (block_executor), each with the status and message the executors have always given. */
#include <string.h>

#include "block_executor.h"
#include "block_variants.h"
#include "test_support.h"

static vh_block_params block_params = {.struct_size = sizeof(vh_block_params)};
static vh_block_desc blocks[2];
static vh_model_desc model;
static const vh_slot_desc slots[] = {{"embeds", VH_SLOT_KIND_EMBEDS, 0}, {"rows", VH_SLOT_KIND_ROWS, 0},
                                     {"t1.tokens", VH_SLOT_KIND_TOKENS, 1}, {"t1.pixels", VH_SLOT_KIND_PIXELS, 1}};

static vh_executor_params valid_params(void)
{
    memset(blocks, 0, sizeof blocks);
    for (int i = 0; i < 2; i++) {
        blocks[i].struct_size = sizeof(vh_block_desc);
        blocks[i].kind = VH_BLOCK_EMBED_LOOKUP;
        blocks[i].params = &block_params;
        blocks[i].n_inputs = 1;
        blocks[i].inputs[0] = 0;
        blocks[i].output = 1;
        blocks[i].state = VH_NO_STATE;
    }
    memset(&model, 0, sizeof model);
    model.struct_size = sizeof model;
    model.n_slots = sizeof slots / sizeof *slots;
    model.slots = slots;
    model.n_blocks = 2;
    model.blocks = blocks;
    model.n_towers = 2;
    return (vh_executor_params){.struct_size = sizeof(vh_executor_params), .model = &model, .first_block = 0,
                                .n_blocks = 2, .max_rows = 8, .max_sequences = 2, .max_context = 16, .max_images = 2};
}

START_TEST(variants_match_the_support_table)
{
    for (int i = 0; i < VH_N_BLOCK_VARIANTS; i++) {
        ck_assert_uint_eq(vh_block_variants[i].kind, vh_block_variant_support[i].kind);
        /* a transformer layer's entries say which features they run; no other kind's does */
        ck_assert_int_eq(vh_block_variant_support[i].transformer != NULL,
                         vh_block_variants[i].kind == VH_BLOCK_TRANSFORMER);
        /* a block reads images, rows or query sets, one of them */
        ck_assert_int_eq(vh_block_variants[i].uses_images + vh_block_variants[i].uses_rows +
                         vh_block_variants[i].on_queries, 1);
    }
}
END_TEST

/* A transformer layer is placed on the entry its slots and features match: on a tower's tokens
 * with a tower layer's features, on the rows with a decoder layer's; neither otherwise. */
START_TEST(variant_of_by_slots_and_features)
{
    vh_executor_params p = valid_params();
    (void)p;
    vh_transformer_params tower = {.struct_size = sizeof tower, .layer = 3, .norm = VH_NORM_LAYER, .norm_eps = 1e-6f,
                                   .placement = VH_NORM_PRE, .attention = VH_ATTN_FULL, .rope = VH_ROPE_NONE,
                                   .mlp = VH_MLP_GELU,
                                   .flags = VH_TF_FUSED_QKV | VH_TF_QKV_BIAS | VH_TF_O_BIAS | VH_TF_MLP_BIAS};
    vh_transformer_params decoder = {.struct_size = sizeof decoder, .layer = 5, .norm = VH_NORM_RMS,
                                     .norm_eps = 1e-5f, .placement = VH_NORM_PRE, .attention = VH_ATTN_CAUSAL_KV,
                                     .rope = VH_ROPE_HALF, .rope_theta = 1e4f, .mlp = VH_MLP_SILU_GATED,
                                     .lora_sets = 2, .lora_scale = 0.5f};
    vh_block_desc d = {.struct_size = sizeof d, .kind = VH_BLOCK_TRANSFORMER, .n_inputs = 1, .inputs = {2},
                       .output = 2, .params = (const vh_block_params *)&tower};
    const int t = vh_block_variant_of(&model, &d);
    ck_assert_int_ge(t, 0);
    ck_assert(vh_block_variants[t].in_tower && !vh_block_variants[t].llm_layer);
    vh_block_info info;
    vh_block_variant_read_params(&model, &d, &info);
    ck_assert_uint_eq(info.tower, 1); /* its slot's */
    ck_assert_uint_eq(info.layer, 3);
    ck_assert_float_eq(info.norm_eps, 1e-6f);

    d.params = (const vh_block_params *)&decoder; /* decoder features on a tower's tokens: no entry */
    ck_assert_int_eq(vh_block_variant_of(&model, &d), -1);
    d.inputs[0] = d.output = 1; /* on the rows */
    const int l = vh_block_variant_of(&model, &d);
    ck_assert_int_ge(l, 0);
    ck_assert(vh_block_variants[l].llm_layer && vh_block_variants[l].has_state);
    vh_block_variant_read_params(&model, &d, &info);
    ck_assert_uint_eq(info.layer, 5);
    ck_assert_float_eq(info.lora_scale, 0.5f);
    ck_assert_float_eq(info.rope_theta, 1e4f);
    decoder.rope = VH_ROPE_2D_INTERLEAVED; /* a feature no entry runs */
    ck_assert_int_eq(vh_block_variant_of(&model, &d), -1);
    d.kind = 9999;
    ck_assert_int_eq(vh_block_variant_of(&model, &d), -1);
}
END_TEST

START_TEST(creation_checks)
{
    char err[512];
    vh_executor_params p = valid_params(), known;
    ck_assert_int_eq(vh_block_executor_read_params("b", &p, &known, err, sizeof err), VH_OK);
    ck_assert_int_eq(vh_block_executor_check_params("b", &known, 1, err, sizeof err), VH_OK);
    ck_assert_int_eq(vh_block_executor_check_blocks("b", vh_block_variant_support, VH_N_BLOCK_VARIANTS, &known, err, sizeof err), VH_OK);

    vh_model_desc bigger[2]; /* a newer core's description: a tail this plugin does not know, set */
    memset(bigger, 0, sizeof bigger);
    memcpy(bigger, &model, sizeof model);
    bigger[0].struct_size = sizeof model + 8;
    ((unsigned char *)bigger)[sizeof model] = 1;
    p.model = bigger;
    ck_assert_int_eq(vh_block_executor_read_params("b", &p, &known, err, sizeof err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(err, "b: executor parameters or model description of a size this plugin does not know"), "%s",
                  err);

    p = valid_params();
    p.device = 1;
    ck_assert_int_eq(vh_block_executor_check_params("b", &p, 1, err, sizeof err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "b: invalid executor parameters");
    ck_assert_int_eq(vh_block_executor_check_params("b", &p, 2, err, sizeof err), VH_OK);
    p.n_blocks = 3;
    ck_assert_int_eq(vh_block_executor_check_params("b", &p, 2, err, sizeof err), VH_ERR_INVALID_ARGUMENT);

    p = valid_params();
    blocks[1].kind = 9999;
    ck_assert_int_eq(vh_block_executor_check_blocks("b", vh_block_variant_support, VH_N_BLOCK_VARIANTS, &p, err, sizeof err), VH_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err, "b: block 1 is of kind 9999"), "%s", err);
}
END_TEST

START_TEST(run_checks)
{
    char err[512];
    vh_executor_params p = valid_params();
    p.first_block = 1;
    p.n_blocks = 1;
    vh_batch b = {.struct_size = sizeof b};
    ck_assert_int_eq(vh_block_executor_check_run("b", &p, &b, 1, 1, err, sizeof err), VH_OK);
    ck_assert_int_eq(vh_block_executor_check_run("b", &p, &b, 0, 2, err, sizeof err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "b: blocks [0, 2) are not all in this executor's [1, 2)");
    b.options = 1u << 30;
    ck_assert_int_eq(vh_block_executor_check_run("b", &p, &b, 1, 1, err, sizeof err), VH_ERR_UNSUPPORTED);
    b.options = VH_BATCH_SEGMENT_ADAPTERS;
    ck_assert_int_eq(vh_block_executor_check_run("b", &p, &b, 1, 1, err, sizeof err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "b: VH_BATCH_SEGMENT_ADAPTERS without segment_adapters");

    /* images: 1 .. max_images, every tower's pixels */
    const float plane = 0.0f;
    const float *pixels[4] = {&plane, &plane, &plane, NULL};
    vh_batch v = {.struct_size = sizeof v, .n_images = 3, .pixels = pixels};
    ck_assert_int_eq(vh_block_executor_check_images("b", &p, &v, err, sizeof err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "b: batch has 3 images (max 2)");
    v.n_images = 2;
    ck_assert_int_eq(vh_block_executor_check_images("b", &p, &v, err, sizeof err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "b: pixels[3] is NULL");
    v.n_images = 1;
    ck_assert_int_eq(vh_block_executor_check_images("b", &p, &v, err, sizeof err), VH_OK);

    /* the head: tokens (with its LM weight) or hidden rows */
    vh_batch h = {.struct_size = sizeof h};
    ck_assert_int_eq(vh_block_executor_check_head("b", &h, 1, err, sizeof err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "b: the head needs out_tokens or hidden rows");
    int32_t tokens[1];
    h.out_tokens = tokens;
    ck_assert_int_eq(vh_block_executor_check_head("b", &h, 0, err, sizeof err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "b: tokens asked of a head without an LM weight");
    ck_assert_int_eq(vh_block_executor_check_head("b", &h, 1, err, sizeof err), VH_OK);

    /* LoRA sets: 0 always, 1 where held */
    const uint8_t sets[2] = {0, 1};
    vh_batch a = {.struct_size = sizeof a, .options = VH_BATCH_SEGMENT_ADAPTERS, .n_segments = 2,
                  .segment_adapters = sets};
    ck_assert_int_eq(vh_block_executor_check_adapters("b", &a, 1u, 4, 7, err, sizeof err), VH_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "b: segment 1 asks for LoRA set 1, which LLM layer 4 (block 7) does not hold");
    ck_assert_int_eq(vh_block_executor_check_adapters("b", &a, 3u, 4, 7, err, sizeof err), VH_OK);
    a.options = 0;
    ck_assert_int_eq(vh_block_executor_check_adapters("b", &a, 0u, 4, 7, err, sizeof err), VH_OK);

    /* hidden hand-offs */
    float rows[8];
    ck_assert_int_eq(vh_block_executor_check_hidden("b", "read_hidden", 1, rows, 9, 8, err, sizeof err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(err, "b: read_hidden of 9 rows (max 8)");
    ck_assert_int_eq(vh_block_executor_check_hidden("b", "bind_hidden", 0, rows, 1, 8, err, sizeof err),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(vh_block_executor_check_hidden("b", "write_hidden", 1, rows, 8, 8, err, sizeof err), VH_OK);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("block_executor");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, variants_match_the_support_table);
    tcase_add_test(tc, variant_of_by_slots_and_features);
    tcase_add_test(tc, creation_checks);
    tcase_add_test(tc, run_checks);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
