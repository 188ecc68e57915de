/*
 * The tower layers with 2-D RoPE (EVA-02's blocks: windowed and global attention over a padded grid,
 * interleaved 2-D RoPE, SwiGLU with its sub-LayerNorm, q and v biases without a k bias) against the
 * released module: tests/fixtures/eva/make_eva_fixtures.py ran Orion's eva_vit.py (blob 7b89e9b4) in
 * float64 on a tiny EVAViT (a 10 x 10 grid in 4 x 4 windows padded to 12 x 12, window, global,
 * window layers) and stored the tokens after the patch embedding and after each block. The backend
 * runs the same blocks from the same pixels, described by features (no family yet: the graph is
 * made here as the Orion front end will make it, the position table interpolated to the grid by
 * lib/image/grid_interpolate.c and checked against the module's), and its tokens (read_slot) are
 * compared at every checkpoint. Then refusals: geometry the layer cannot run, features it lacks.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/plugin_loader.h"
#include "image/grid_interpolate.h"
#include "model/checkpoint.h"
#include "model/tensor_lookup.h"
#include "test_support.h"

#ifndef EVA_BACKEND
#define EVA_BACKEND "cpu_generic"
#endif
/* |got - want| over the largest |want| of the checkpoint. fp32 against float64 through three
 * layers of width 32: a few 1e-7; 1e-4 is the bound. */
#ifndef EVA_TOL
#define EVA_TOL 1e-4
#endif

enum { IMAGES = 2, S = 160, P = 16, G = 10, T = G * G, D = 32, HEADS = 2, HD = 16, F = 85, DEPTH = 3, WIN = 4 };
static const int window_layer[DEPTH] = {1, 0, 1};

typedef struct fixture {
    vh_plugin *plugin;
    vh_checkpoint *ck;
    float *pos, *pixels;
    vh_tensor_view views[1 + DEPTH][VH_MAX_ROLES];
    vh_block_desc blocks[1 + DEPTH];
    vh_patch_embed_params patch;
    vh_transformer_params layers[1 + DEPTH];
    vh_slot_desc slots[2];
    vh_model_desc desc;
    char why[512];
} fixture;

static float *read_f32(const char *name, size_t n)
{
    char rel[128];
    snprintf(rel, sizeof rel, "eva/%s", name);
    char *path = vh_test_fixture_path(rel);
    size_t size = 0;
    float *data = (float *)vh_test_read_file(path, &size);
    ck_assert_msg(data && size == n * sizeof(float), "%s: %zu bytes, %zu expected", path, size, n * sizeof(float));
    free(path);
    return data;
}

static void take(fixture *f, uint32_t block, uint32_t *n, uint32_t role, vh_tensor_shape shape, const char *fmt,
                 uint32_t layer)
{
    vh_error err;
    vh_tensor_view *v = &f->views[block][(*n)++];
    ck_assert_msg(vh_tensor_takef(f->ck, v, 0, shape, &err, fmt, layer) == VH_OK, "%s", err.message);
    v->role = role;
}

static void setup(fixture *f)
{
    memset(f, 0, sizeof *f);
    vh_error err;
    ck_assert_msg(vh_plugin_load(EVA_BACKEND, NULL, NULL, &f->plugin, &err) == VH_OK, "%s", err.message);
    char *dir = vh_test_fixture_path("eva");
    ck_assert_msg(vh_checkpoint_open(dir, &f->ck, &err) == VH_OK, "%s", err.message);
    free(dir);
    /* the position table as the front end's loader will make it: the checkpoint's 14 x 14 (after
     * its class slot) interpolated to the grid, which must be the module's own (pos_embed.f32) */
    vh_tensor_view table;
    ck_assert_msg(vh_tensor_takef(f->ck, &table, 0, VH_SHAPE(1, 197, D), &err, "%s", "pos_embed") == VH_OK, "%s",
                  err.message);
    ck_assert_int_eq(table.dtype, VH_DTYPE_F32);
    f->pos = malloc(sizeof(float) * T * D);
    vh_grid_interpolate_bicubic((const float *)table.data + D, 14, 14, D, f->pos, G, G);
    float *module_pos = read_f32("pos_embed.f32", (size_t)T * D);
    double *want = malloc(sizeof(double) * T * D);
    for (size_t i = 0; i < (size_t)T * D; i++) want[i] = module_pos[i];
    const double pos_error = vh_test_rel_error_of_largest(f->pos, want, (size_t)T * D);
    ck_assert_msg(pos_error <= 4e-6, "the interpolated position table: error %g", pos_error);
    free(want);
    free(module_pos);
    f->pixels = read_f32("pixels.f32", (size_t)IMAGES * 3 * S * S);

    f->slots[0] = (vh_slot_desc){"cam.pixels", VH_SLOT_KIND_PIXELS, 0};
    f->slots[1] = (vh_slot_desc){"vit.tokens", VH_SLOT_KIND_TOKENS, 0};
    uint32_t n = 0;
    take(f, 0, &n, VH_PATCH_EMBED_W, VH_SHAPE(D, 3, P, P), "patch_embed.proj.weight%.0u", 0);
    take(f, 0, &n, VH_PATCH_EMBED_B, VH_SHAPE(D), "patch_embed.proj.bias%.0u", 0);
    f->views[0][n++] = (vh_tensor_view){.data = f->pos, .dtype = VH_DTYPE_F32, .ndim = 3, .shape = {1, T, D},
                                        .name = "pos_embed (interpolated to the grid)", .role = VH_PATCH_EMBED_POS};
    f->patch = (vh_patch_embed_params){.struct_size = sizeof f->patch};
    f->blocks[0] = (vh_block_desc){.struct_size = sizeof(vh_block_desc), .kind = VH_BLOCK_PATCH_EMBED,
                                   .params = (const vh_block_params *)&f->patch, .n_tensors = n,
                                   .tensors = f->views[0], .n_inputs = 1, .inputs = {0}, .output = 1,
                                   .state = VH_NO_STATE};
    static const struct { uint32_t role; const char *name; int matrix, in; } layer_roles[] = {
        {VH_TF_ATTN_NORM_W, "blocks.%u.norm1.weight", 0, 0}, {VH_TF_ATTN_NORM_B, "blocks.%u.norm1.bias", 0, 0},
        {VH_TF_Q_W, "blocks.%u.attn.q_proj.weight", D, D}, {VH_TF_K_W, "blocks.%u.attn.k_proj.weight", D, D},
        {VH_TF_V_W, "blocks.%u.attn.v_proj.weight", D, D}, {VH_TF_Q_B, "blocks.%u.attn.q_bias", 0, 0},
        {VH_TF_V_B, "blocks.%u.attn.v_bias", 0, 0}, {VH_TF_O_W, "blocks.%u.attn.proj.weight", D, D},
        {VH_TF_O_B, "blocks.%u.attn.proj.bias", 0, 0}, {VH_TF_MLP_NORM_W, "blocks.%u.norm2.weight", 0, 0},
        {VH_TF_MLP_NORM_B, "blocks.%u.norm2.bias", 0, 0}, {VH_TF_GATE_W, "blocks.%u.mlp.w1.weight", F, D},
        {VH_TF_GATE_B, "blocks.%u.mlp.w1.bias", 0, F}, {VH_TF_UP_W, "blocks.%u.mlp.w2.weight", F, D},
        {VH_TF_UP_B, "blocks.%u.mlp.w2.bias", 0, F}, {VH_TF_SUB_NORM_W, "blocks.%u.mlp.ffn_ln.weight", 0, F},
        {VH_TF_SUB_NORM_B, "blocks.%u.mlp.ffn_ln.bias", 0, F}, {VH_TF_DOWN_W, "blocks.%u.mlp.w3.weight", D, F},
        {VH_TF_DOWN_B, "blocks.%u.mlp.w3.bias", 0, 0},
    };
    for (uint32_t l = 0; l < DEPTH; l++) {
        const uint32_t b = 1 + l;
        n = 0;
        for (size_t r = 0; r < sizeof layer_roles / sizeof *layer_roles; r++) {
            const int64_t rows = layer_roles[r].matrix ? layer_roles[r].matrix : (layer_roles[r].in ? layer_roles[r].in : D);
            vh_tensor_shape shape = layer_roles[r].matrix ? VH_SHAPE(rows, layer_roles[r].in) : VH_SHAPE(rows);
            take(f, b, &n, layer_roles[r].role, shape, layer_roles[r].name, l);
        }
        /* EVA-02's block in the vocabulary (doc/architecture.md, "The EVA-02 ViT block, described") */
        f->layers[b] = (vh_transformer_params){
            .struct_size = sizeof(vh_transformer_params), .layer = l, .norm = VH_NORM_LAYER, .norm_eps = 1e-6f,
            .placement = VH_NORM_PRE, .attention = window_layer[l] ? VH_ATTN_WINDOWED : VH_ATTN_FULL,
            .window = window_layer[l] ? WIN : 0, .rope = VH_ROPE_2D_INTERLEAVED, .rope_theta = 10000.0f,
            .rope_grid = 16, .mlp = VH_MLP_SILU_GATED,
            .flags = VH_TF_Q_BIAS | VH_TF_V_BIAS | VH_TF_O_BIAS | VH_TF_MLP_BIAS | VH_TF_MLP_SUB_NORM};
        f->blocks[b] = (vh_block_desc){.struct_size = sizeof(vh_block_desc), .kind = VH_BLOCK_TRANSFORMER,
                                       .params = (const vh_block_params *)&f->layers[b], .n_tensors = n,
                                       .tensors = f->views[b], .n_inputs = 1, .inputs = {1}, .output = 1,
                                       .state = VH_NO_STATE};
    }
    f->desc = (vh_model_desc){.struct_size = sizeof(vh_model_desc), .n_towers = 1, .n_slots = 2, .slots = f->slots,
                              .n_blocks = 1 + DEPTH, .blocks = f->blocks};
    f->desc.towers[0] = (vh_vit_desc){.image_size = S, .patch_size = P, .grid = G, .n_patches = T, .embed_dim = D,
                                      .n_heads = HEADS, .head_dim = HD, .mlp_hidden = F, .n_blocks = DEPTH};
    f->desc.n_image_tokens = T;
}

static void teardown(fixture *f)
{
    vh_checkpoint_close(f->ck);
    free(f->pos);
    free(f->pixels);
    vh_plugin_unload(f->plugin);
}

static vh_status create(fixture *f, uint32_t n_blocks, vh_executor **ex)
{
    vh_executor_params p = {.struct_size = sizeof p, .model = &f->desc, .first_block = 0, .n_blocks = n_blocks,
                            .max_sequences = 1, .max_context = 1, .max_rows = 1, .max_images = IMAGES,
                            .n_threads = 2};
    *ex = NULL;
    f->why[0] = '\0';
    return f->plugin->iface->executor_create(&p, ex, f->why, sizeof f->why);
}

/* Every checkpoint: the patch embedding's tokens, then each layer's, for both images. */
START_TEST(test_eva_against_released_module)
{
    fixture f;
    setup(&f);
    ck_assert_msg(f.plugin->iface->read_slot != NULL, "%s offers no read_slot", EVA_BACKEND);
    vh_executor *ex;
    ck_assert_msg(create(&f, 1 + DEPTH, &ex) == VH_OK, "%s", f.why);
    const float *planes[IMAGES] = {f.pixels, f.pixels + (size_t)3 * S * S};
    vh_batch batch = {.struct_size = sizeof batch, .n_images = IMAGES, .pixels = planes};
    float *got = malloc(sizeof(float) * T * D);
    double *want = malloc(sizeof(double) * T * D);
    for (uint32_t k = 0; k <= DEPTH; k++) {
        ck_assert_msg(f.plugin->iface->executor_run(ex, &batch, 0, k + 1, f.why, sizeof f.why) == VH_OK, "%s", f.why);
        char name[32];
        snprintf(name, sizeof name, "tokens_%u.f32", k);
        float *ref = read_f32(name, (size_t)IMAGES * T * D);
        for (uint32_t i = 0; i < IMAGES; i++) {
            ck_assert_msg(f.plugin->iface->read_slot(ex, 1, i, got, (size_t)T * D, f.why, sizeof f.why) == VH_OK, "%s",
                          f.why);
            for (size_t j = 0; j < (size_t)T * D; j++) want[j] = ref[(size_t)i * T * D + j];
            const double e = vh_test_rel_error_of_largest(got, want, (size_t)T * D);
            printf("%s: %s image %u: error %.3g of the largest value (bound %.3g)\n", EVA_BACKEND,
                   k ? (window_layer[k - 1] ? "after a windowed layer" : "after a global layer") : "patch embedding",
                   i, e, EVA_TOL);
            ck_assert_msg(e <= EVA_TOL, "checkpoint %u image %u: error %g", k, i, e);
        }
        free(ref);
    }
    /* a slot that is not a tower's tokens, a count that is not the slot's */
    ck_assert_int_eq(f.plugin->iface->read_slot(ex, 0, 0, got, (size_t)T * D, f.why, sizeof f.why),
                     VH_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(f.plugin->iface->read_slot(ex, 1, 0, got, 7, f.why, sizeof f.why), VH_ERR_INVALID_ARGUMENT);
    ck_assert_msg(strstr(f.why, "vit.tokens"), "%s", f.why);
    ck_assert_int_eq(f.plugin->iface->read_slot(ex, 1, IMAGES, got, (size_t)T * D, f.why, sizeof f.why),
                     VH_ERR_INVALID_ARGUMENT);
    f.plugin->iface->executor_destroy(ex);
    free(got);
    free(want);
    teardown(&f);
}
END_TEST

static void expect_refused(fixture *f, const char *a, const char *b)
{
    vh_executor *ex;
    ck_assert_int_eq(create(f, 1 + DEPTH, &ex), VH_ERR_UNSUPPORTED);
    ck_assert_ptr_null(ex);
    ck_assert_msg(strstr(f->why, a) && (!b || strstr(f->why, b)), "%s", f->why);
}

/* What the layer cannot run is refused at create, naming the block and what is wrong. */
START_TEST(test_eva_refusals)
{
    fixture f;
    setup(&f);
    vh_transformer_params *l = &f.layers[1];
    l->window = G + 1; /* a window larger than the grid */
    expect_refused(&f, "block 1 (TRANSFORMER, layer 0): 2-D RoPE", "window within the 10 x 10 grid (11)");
    l->window = WIN, l->rope_grid = 0;
    expect_refused(&f, "2-D RoPE", "position grid (0)");
    l->rope_grid = 16, l->flags |= VH_TF_FUSED_QKV; /* separate q, k, v only */
    expect_refused(&f, "block 1 (TRANSFORMER, layer 0)", "fused q|k|v set (it runs it without)");
    l->flags &= ~(VH_TF_FUSED_QKV | VH_TF_MLP_SUB_NORM);
    expect_refused(&f, "block 1 (TRANSFORMER, layer 0)", "MLP sub-norm not set (it runs it only with)");
    l->flags |= VH_TF_MLP_SUB_NORM | VH_TF_K_BIAS; /* a k bias promised, not given */
    char lacks[64];
    snprintf(lacks, sizeof lacks, "lacks the tensor of role %d", VH_TF_K_B);
    expect_refused(&f, "block 1 (TRANSFORMER, layer 0)", lacks);
    l->flags &= ~VH_TF_K_BIAS, l->attention = VH_ATTN_CROSS;
    expect_refused(&f, "block 1 (TRANSFORMER, layer 0)", "attention 'cross'");
    teardown(&f);
}
END_TEST

int main(void)
{
    if (!vh_test_backend_usable(EVA_BACKEND)) return 77;
    Suite *s = suite_create("eva_fixtures");
    TCase *tc = tcase_create("eva");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_eva_against_released_module);
    tcase_add_test(tc, test_eva_refusals);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
