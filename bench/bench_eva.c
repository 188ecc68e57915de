/* bench_eva: milliseconds per frame of the camera front end's ViT (EVA-02-L, lib/family/driving/
 * eva_backbone.c) on one backend's executor, and the tensor throughput that gives.
 *
 *   vh-synth-checkpoint --family orion --front-end --out DIR --tokenizer T   (or a converted Orion)
 *   ninja -C build bench/bench_eva && build/bench/bench_eva --model DIR [--backend cuda] [--images 6]
 *       [--depth 24] [--iters 20] [--warmup 3] [--threads 16 (a CPU backend's)]
 *
 * The blocks are the loader's, from the checkpoint's img_backbone.* at the agent's geometry (640 x
 * 640, 16 windowed blocks of 16 and 8 global ones; --depth keeps the first N); the pixels seeded
 * pseudo-random planes (the cost does not depend on them). A frame is one executor_run of the patch
 * embedding and every block over --images images, the pixels' upload and the final wait included.
 * Prints the median and best of --iters frames and the FLOPs the backend executes a frame (GEMMs on
 * the real tokens; attention over every window, padded query rows included, as the GPU runs it and
 * as the released module computes it) over the median, against a bf16 dense peak of 989 TFLOP/s
 * (H100 / H200 SXM). Not installed, not run by `meson test`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/plugin_loader.h"
#include "family/driving/eva_backbone.h"
#include "model/checkpoint.h"
#include "bench_clock.h"

#define BF16_PEAK_TFLOPS 989.0

/* FLOPs of one image: the patch GEMM, then each block's q, k, v, o, gate, up, down GEMMs on the
 * real tokens and QK^T + PV over its windows (or the grid). */
static double flops_per_image(const vh_eva_config *c)
{
    const double g = c->img_size / c->patch_size, T = g * g, D = c->embed_dim, F = c->mlp_hidden;
    double f = 2.0 * T * D * 3 * c->patch_size * c->patch_size;
    for (uint32_t l = 0; l < c->depth; l++) {
        f += 2.0 * T * (4 * D * D + 3 * D * F);
        if (c->window_blocks >> l & 1) {
            const double w = c->window_size, nw = (g + w - 1) / c->window_size;
            f += nw * nw * 4.0 * (w * w) * (w * w) * D;
        } else {
            f += 4.0 * T * T * D;
        }
    }
    return f;
}

int main(int argc, char **argv)
{
    const char *model_dir = NULL, *backend = "cuda";
    int images = 6, iters = 20, warmup = 3, depth = 24, threads = 16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: bench_eva --model DIR [--backend NAME] [--images N] [--depth N] [--iters N] [--warmup N] [--threads N]\n");
            return 0;
        }
        if (!v) {
            fprintf(stderr, "bench_eva: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--model")) model_dir = v;
        else if (!strcmp(a, "--backend")) backend = v;
        else if (!strcmp(a, "--images")) images = atoi(v);
        else if (!strcmp(a, "--depth")) depth = atoi(v);
        else if (!strcmp(a, "--iters")) iters = atoi(v);
        else if (!strcmp(a, "--warmup")) warmup = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else {
            fprintf(stderr, "bench_eva: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    if (!model_dir || images < 1 || images > 64 || iters < 1 || warmup < 0 || depth < 1 || depth > 24) {
        fprintf(stderr, "bench_eva: --model DIR is required; --images 1..64, --depth 1..24, --iters >= 1\n");
        return 2;
    }
    vh_eva_config c = vh_eva_config_agent();
    c.depth = (uint32_t)depth;
    const uint32_t grid = c.img_size / c.patch_size, T = grid * grid;

    vh_error err;
    vh_plugin *plugin = NULL;
    vh_model *m = calloc(1, sizeof *m);
    float *pos = NULL, *pixels = NULL, *out = NULL;
    vh_executor *ex = NULL;
    int rc = 1;
    if (!m || vh_plugin_load(backend, NULL, NULL, &plugin, &err) || vh_checkpoint_open(model_dir, &m->checkpoint, &err) ||
        vh_model_alloc_blocks(m, 1 + c.depth, &err)) {
        fprintf(stderr, "bench_eva: %s\n", m ? err.message : "out of memory");
        goto done;
    }
    m->desc.n_towers = 1;
    uint32_t next = 0;
    if (vh_eva_take_blocks(m, &c, "img_backbone.", 0, "cam.pixels", "vit.tokens", &next, &pos, &err)) {
        fprintf(stderr, "bench_eva: %s\n", err.message);
        goto done;
    }
    vh_model_finish_blocks(m);
    m->desc.n_image_tokens = T;
    const size_t plane = (size_t)3 * c.img_size * c.img_size;
    pixels = malloc(sizeof(float) * plane * images);
    out = malloc(sizeof(float) * T * c.embed_dim);
    if (!pixels || !out) goto done;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < plane * images; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        pixels[i] = (float)((double)(seed >> 11) / 9007199254740992.0 * 4.0 - 2.0);
    }
    vh_executor_params p = {.struct_size = sizeof p, .model = &m->desc, .first_block = 0, .n_blocks = 1 + c.depth,
                            .max_sequences = 1, .max_context = 1, .max_rows = 1, .max_images = (uint32_t)images,
                            .n_threads = threads > 0 ? (uint32_t)threads : 1};
    char why[512] = "";
    if (plugin->iface->executor_create(&p, &ex, why, sizeof why)) {
        fprintf(stderr, "bench_eva: %s executor: %s\n", backend, why);
        goto done;
    }
    const float *planes[64];
    for (int i = 0; i < images; i++) planes[i] = pixels + plane * i;
    vh_batch batch = {.struct_size = sizeof batch, .n_images = (uint32_t)images, .pixels = planes};
    double *ms = malloc(sizeof(double) * iters);
    if (!ms) goto done;
    for (int k = 0; k < warmup + iters; k++) {
        const double t0 = vh_bench_now_ms();
        if (plugin->iface->executor_run(ex, &batch, 0, 1 + c.depth, why, sizeof why)) {
            fprintf(stderr, "bench_eva: run: %s\n", why);
            free(ms);
            goto done;
        }
        if (k >= warmup) ms[k - warmup] = vh_bench_now_ms() - t0;
    }
    if (plugin->iface->read_slot(ex, 1, (uint32_t)images - 1, out, (size_t)T * c.embed_dim, why, sizeof why)) {
        fprintf(stderr, "bench_eva: read_slot: %s\n", why);
        free(ms);
        goto done;
    }
    double checksum = 0;
    for (size_t i = 0; i < (size_t)T * c.embed_dim; i++) checksum += out[i];
    qsort(ms, iters, sizeof *ms, vh_bench_cmp_double);
    const double median = ms[iters / 2], flops = flops_per_image(&c) * images;
    printf("bench_eva: %s, EVA-02 %u blocks (%u windowed of %u), %d images of %u x %u, %d frames: median %.2f ms, "
           "best %.2f ms; %.2f TFLOP a frame, %.0f TFLOP/s = %.0f%% of %.0f (bf16 dense peak); checksum %.6g\n",
           backend, c.depth, (unsigned)__builtin_popcountll(c.window_blocks & ((1ull << c.depth) - 1)), c.window_size,
           images, c.img_size, c.img_size, iters, median, ms[0], flops / 1e12, flops / median / 1e9,
           100.0 * flops / median / 1e9 / BF16_PEAK_TFLOPS, BF16_PEAK_TFLOPS, checksum);
    free(ms);
    rc = 0;
done:
    if (ex) plugin->iface->executor_destroy(ex);
    if (m) vh_model_release(m);
    free(pos);
    free(pixels);
    free(out);
    if (plugin) vh_plugin_unload(plugin);
    return rc;
}
