/*
 * The tower layers with 2-D RoPE (EVA-02's blocks: windowed and global attention over a padded grid,
 * interleaved 2-D RoPE, SwiGLU with its sub-LayerNorm, q and v biases without a k bias) against the
 * released module: tests/fixtures/eva/make_eva_fixtures.py ran Orion's eva_vit.py (blob 7b89e9b4) in
 * float64 on a tiny EVAViT (a 10 x 10 grid in 4 x 4 windows padded to 12 x 12, window, global,
 * window layers) and stored the tokens after the patch embedding and after each block. The backend
 * runs the same blocks from the same pixels, described by the front end's loader
 * (lib/family/driving/eva_backbone.c: the checkpoint's tensors under the module's names, the
 * position table interpolated to the grid, checked against the module's), and its tokens
 * (read_slot) are compared at every checkpoint. Then refusals: geometry the layer cannot run,
 * features it lacks.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/plugin_loader.h"
#include "family/driving/eva_backbone.h"
#include "model/checkpoint.h"
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
    vh_model *model;                   /* the graph lib/family/driving/eva_backbone.c builds */
    float *pos, *pixels;
    char why[512];
} fixture;

/* A fixture set: the tiny one (eva/) or the agent's geometry (eva/real/: 640 x 640, a 40 x 40 grid
 * in 16 x 16 windows padded to 48 x 48, one image, the patch embedding's and the last layer's
 * tokens). */
typedef struct geometry {
    const char *dir;
    uint32_t img, grid, window, images;
    uint32_t checkpoints[DEPTH + 1], n_checkpoints;
} geometry;
static const geometry tiny = {"eva", S, G, WIN, IMAGES, {0, 1, 2, 3}, 4};
static const geometry real = {"eva/real", 640, 40, 16, 1, {0, DEPTH}, 2};
static const geometry *geo = &tiny;

static float *read_f32(const char *name, size_t n)
{
    char rel[128];
    snprintf(rel, sizeof rel, "%s/%s", geo->dir, name);
    char *path = vh_test_fixture_path(rel);
    size_t size = 0;
    float *data = (float *)vh_test_read_file(path, &size);
    ck_assert_msg(data && size == n * sizeof(float), "%s: %zu bytes, %zu expected", path, size, n * sizeof(float));
    free(path);
    return data;
}

/* The tiny EVAViT of tests/fixtures/tiny_weights.py (EVA_TINY) as the front end's loader describes it. */
static vh_eva_config tiny_config(void)
{
    vh_eva_config c = vh_eva_config_agent();
    c.img_size = geo->img, c.embed_dim = D, c.depth = DEPTH, c.num_heads = HEADS, c.mlp_hidden = F;
    c.window_size = geo->window;
    c.window_blocks = 0;
    for (uint32_t l = 0; l < DEPTH; l++) c.window_blocks |= (uint64_t)window_layer[l] << l;
    return c;
}

static void setup(fixture *f)
{
    memset(f, 0, sizeof *f);
    vh_error err;
    ck_assert_msg(vh_plugin_load(EVA_BACKEND, NULL, NULL, &f->plugin, &err) == VH_OK, "%s", err.message);
    f->model = calloc(1, sizeof *f->model);
    char *dir = vh_test_fixture_path(geo->dir);
    ck_assert_msg(vh_checkpoint_open(dir, &f->model->checkpoint, &err) == VH_OK, "%s", err.message);
    free(dir);
    ck_assert_msg(vh_model_alloc_blocks(f->model, 1 + DEPTH, &err) == VH_OK, "%s", err.message);
    f->model->desc.n_towers = 1;
    const size_t T = (size_t)geo->grid * geo->grid;
    const vh_eva_config c = tiny_config();
    uint32_t next = 0;
    ck_assert_msg(vh_eva_take_blocks(f->model, &c, "", 0, "cam.pixels", "vit.tokens", &next, &f->pos, &err) == VH_OK,
                  "%s", err.message);
    ck_assert_uint_eq(next, 1 + DEPTH);
    vh_model_finish_blocks(f->model);
    f->model->desc.n_image_tokens = T;
    /* the position table it interpolated must be the module's own (pos_embed.f32) */
    float *module_pos = read_f32("pos_embed.f32", (size_t)T * D);
    double *want = malloc(sizeof(double) * T * D);
    for (size_t i = 0; i < (size_t)T * D; i++) want[i] = module_pos[i];
    const double pos_error = vh_test_rel_error_of_largest(f->pos, want, (size_t)T * D);
    ck_assert_msg(pos_error <= 4e-6, "the interpolated position table: error %g", pos_error);
    free(want);
    free(module_pos);
    f->pixels = read_f32("pixels.f32", (size_t)geo->images * 3 * geo->img * geo->img);
}

static void teardown(fixture *f)
{
    vh_model_release(f->model);
    free(f->pos);
    free(f->pixels);
    vh_plugin_unload(f->plugin);
}

/* Block b's parameters, to edit (the descriptor points at them). */
static vh_transformer_params *layer(fixture *f, uint32_t b)
{
    return &f->model->block_data[b].params.transformer;
}

static vh_status create(fixture *f, uint32_t n_blocks, vh_executor **ex)
{
    vh_executor_params p = {.struct_size = sizeof p, .model = &f->model->desc, .first_block = 0, .n_blocks = n_blocks,
                            .max_sequences = 1, .max_context = 1, .max_rows = 1, .max_images = geo->images,
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

/* The agent's geometry: a 40 x 40 grid in windows of 16 (the last row and column of windows hold
 * 8 real tokens of 16 and 8 of padding), the table interpolated 14 -> 40, 1600 tokens an image. */
START_TEST(test_eva_real_geometry)
{
    geo = &real;
    fixture f;
    setup(&f);
    vh_executor *ex;
    ck_assert_msg(create(&f, 1 + DEPTH, &ex) == VH_OK, "%s", f.why);
    const float *planes[1] = {f.pixels};
    vh_batch batch = {.struct_size = sizeof batch, .n_images = 1, .pixels = planes};
    const size_t n = (size_t)real.grid * real.grid * D;
    float *got = malloc(sizeof(float) * n);
    double *want = malloc(sizeof(double) * n);
    for (uint32_t c = 0; c < real.n_checkpoints; c++) {
        const uint32_t k = real.checkpoints[c];
        ck_assert_msg(f.plugin->iface->executor_run(ex, &batch, 0, k + 1, f.why, sizeof f.why) == VH_OK, "%s", f.why);
        ck_assert_msg(f.plugin->iface->read_slot(ex, 1, 0, got, n, f.why, sizeof f.why) == VH_OK, "%s", f.why);
        char name[32];
        snprintf(name, sizeof name, "tokens_%u.f32", k);
        float *ref = read_f32(name, n);
        for (size_t j = 0; j < n; j++) want[j] = ref[j];
        const double e = vh_test_rel_error_of_largest(got, want, n);
        printf("%s: the agent's geometry, %s: error %.3g of the largest value (bound %.3g)\n", EVA_BACKEND,
               k ? "after window, global, window layers" : "patch embedding", e, EVA_TOL);
        ck_assert_msg(e <= EVA_TOL, "real geometry checkpoint %u: error %g", k, e);
        free(ref);
    }
    f.plugin->iface->executor_destroy(ex);
    free(got);
    free(want);
    teardown(&f);
    geo = &tiny;
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
    vh_transformer_params *l = layer(&f, 1);
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

/* The loader refuses a checkpoint that is not the configured backbone, naming what is wrong. */
START_TEST(test_eva_loader_refusals)
{
    vh_model *m = calloc(1, sizeof *m);
    vh_error err;
    char *dir = vh_test_fixture_path("eva");
    ck_assert_msg(vh_checkpoint_open(dir, &m->checkpoint, &err) == VH_OK, "%s", err.message);
    free(dir);
    ck_assert_msg(vh_model_alloc_blocks(m, 1 + DEPTH, &err) == VH_OK, "%s", err.message);
    vh_eva_config c = tiny_config();
    float *pos = NULL;
    uint32_t next = 0;
    c.num_heads = 3; /* 32 channels in 3 heads */
    ck_assert_int_eq(vh_eva_take_blocks(m, &c, "", 0, "p", "t", &next, &pos, &err), VH_ERR_BAD_MODEL);
    ck_assert_msg(strstr(err.message, "not a geometry"), "%s", err.message);
    c = tiny_config(), c.mlp_hidden = F + 1; /* the checkpoint's SwiGLU is 85 wide */
    ck_assert_int_ne(vh_eva_take_blocks(m, &c, "", 0, "p", "t", &next, &pos, &err), VH_OK);
    ck_assert_msg(strstr(err.message, "blocks.0.mlp.w1.weight"), "%s", err.message);
    free(pos);
    c = tiny_config(), next = 0, pos = NULL;
    ck_assert_int_ne(vh_eva_take_blocks(m, &c, "img_backbone.", 0, "p", "t", &next, &pos, &err), VH_OK);
    ck_assert_msg(strstr(err.message, "img_backbone.pos_embed"), "%s", err.message);
    ck_assert_ptr_null(pos);
    vh_model_release(m);
}
END_TEST

int main(void)
{
    if (!vh_test_backend_usable(EVA_BACKEND)) return 77;
    Suite *s = suite_create("eva_fixtures");
    TCase *tc = tcase_create("eva");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_eva_against_released_module);
    tcase_add_test(tc, test_eva_real_geometry);
    tcase_add_test(tc, test_eva_refusals);
    tcase_add_test(tc, test_eva_loader_refusals);
    suite_add_tcase(s, tc);
    return vh_test_run_suite(s);
}
