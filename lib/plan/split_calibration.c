#include "plan/split_calibration.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/knobs.h"
#include "util/log.h"

#define CACHE_FILE "split-costs-v1.tsv"
#define PROMPT_TEXT_ROWS 24 /* a typical instruction's prompt text, beside the image tokens */
#define MAX_COST_NS 3.6e12   /* an hour: a cached cost beyond it is not a measurement */
#define REPEATS 3           /* the first run warms up (GEMM heuristics, graphs); the best of the rest */

typedef struct probe {
    const vh_plugin *plugin;
    vh_executor *executor;
    char why[512];
} probe;

static vh_status probe_create(probe *p, const vh_model *model, const vh_plan_request *req, uint32_t first_block,
                              uint32_t n_blocks, vh_error *err)
{
    vh_executor_params params = {
        .struct_size = sizeof params, .model = &model->desc, .first_block = first_block, .n_blocks = n_blocks, .max_sequences = 1,
        .max_context = req->max_context, .max_rows = req->max_context, .max_images = 1, .n_threads = req->n_threads,
        .memory_budget = 0, .log_level = VH_LOG_ERROR};
    vh_status st = p->plugin->iface->executor_create(&params, &p->executor, p->why, sizeof p->why);
    if (st) {
        p->executor = NULL;
        return vh_error_set(err, st, "measuring block costs: backend '%s' could not load blocks %u..%u: %s",
                            p->plugin->iface->name, first_block, first_block + n_blocks - 1, p->why);
    }
    return VH_OK;
}

static void probe_destroy(probe *p)
{
    if (p->executor) p->plugin->iface->executor_destroy(p->executor);
    p->executor = NULL;
}

static vh_status probe_fail(probe *p, vh_status st, vh_error *err)
{
    return vh_error_set(err, st, "measuring block costs on '%s': %s", p->plugin->iface->name, p->why);
}

/* One frame's LLM passes over `block` (an LLM block or the head) of a probe: the prefill of
 * `rows` rows and `steps` one-row decode passes after it; the best of the repeats, in ns. */
static vh_status time_llm_passes(probe *p, uint32_t block, const float *hidden, uint32_t rows, uint32_t steps,
                                 double *prefill_ns, double *decode_ns, vh_error *err)
{
    const vh_backend_iface *be = p->plugin->iface;
    int32_t tokens[1] = {0}, out = 0;
    *prefill_ns = *decode_ns = 1e30;
    for (int r = 0; r < REPEATS; r++) {
        vh_segment seg = {.sequence = 0, .n_rows = rows, .position = 0, .image = -1};
        int32_t *row_tokens = calloc(rows, sizeof *row_tokens);
        if (!row_tokens) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (calibration)");
        vh_batch b = {.struct_size = sizeof(vh_batch), .n_segments = 1, .segments = &seg, .n_rows = rows, .tokens = row_tokens, .out_tokens = &out};
        int64_t t0 = vh_now_ns();
        vh_status st = be->write_hidden(p->executor, hidden, rows, p->why, sizeof p->why);
        if (!st) st = be->executor_run(p->executor, &b, block, 1, p->why, sizeof p->why);
        int64_t t1 = vh_now_ns();
        free(row_tokens);
        if (st) return probe_fail(p, st, err);
        double decode = 0;
        for (uint32_t k = 0; k < steps; k++) {
            seg = (vh_segment){.sequence = 0, .n_rows = 1, .position = rows + k, .image = -1};
            b = (vh_batch){.struct_size = sizeof(vh_batch), .n_segments = 1, .segments = &seg, .n_rows = 1, .tokens = tokens, .out_tokens = &out};
            int64_t s0 = vh_now_ns();
            if ((st = be->write_hidden(p->executor, hidden, 1, p->why, sizeof p->why)) ||
                (st = be->executor_run(p->executor, &b, block, 1, p->why, sizeof p->why)))
                return probe_fail(p, st, err);
            decode += (double)(vh_now_ns() - s0);
        }
        if (r == 0) continue;
        if ((double)(t1 - t0) < *prefill_ns) *prefill_ns = (double)(t1 - t0);
        if (decode < *decode_ns) *decode_ns = decode;
    }
    return VH_OK;
}

/* The leading vision blocks one image batch runs: those reading only pixels, a tower's tokens or
 * embeddings. A camera front end's position encoder and heads read query sets (a frame's slot
 * inputs, several runs with the host between them: the family's run_vision), which one batch of
 * pixels cannot drive: they are left out of the cost (on the GPU machine a third of the ViT's). */
static uint32_t image_batch_blocks(const vh_model *model)
{
    uint32_t n = 0;
    for (; n < model->llm_embed_block; n++) {
        const vh_block_desc *d = &model->desc.blocks[n];
        for (uint32_t i = 0; i < d->n_inputs; i++)
            if (model->desc.slots[d->inputs[i]].kind == VH_SLOT_KIND_QUERIES) return n;
    }
    return n;
}

static vh_status time_vision(probe *p, const vh_model *model, uint32_t n_blocks, double *vision_ns, vh_error *err)
{
    float *planes_mem[VH_MAX_TOWERS] = {0};
    const float *planes[VH_MAX_TOWERS];
    vh_status st = VH_OK;
    for (uint32_t t = 0; t < model->desc.n_towers; t++) {
        size_t S = model->desc.towers[t].image_size;
        planes_mem[t] = calloc(3 * S * S, sizeof(float)); /* a mid-grey frame after normalisation */
        if (!planes_mem[t]) st = vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (calibration)");
        planes[t] = planes_mem[t];
    }
    *vision_ns = 1e30;
    vh_batch b = {.struct_size = sizeof(vh_batch), .n_images = 1, .pixels = planes};
    for (int r = 0; r < REPEATS && !st; r++) {
        int64_t t0 = vh_now_ns();
        st = p->plugin->iface->executor_run(p->executor, &b, 0, n_blocks, p->why, sizeof p->why);
        if (st) st = probe_fail(p, st, err);
        else if (r > 0 && (double)(vh_now_ns() - t0) < *vision_ns) *vision_ns = (double)(vh_now_ns() - t0);
    }
    for (uint32_t t = 0; t < model->desc.n_towers; t++) free(planes_mem[t]);
    return st;
}

/* ---- the cache ---- */

static int cache_path(char *path, size_t size)
{
    const char *dir = vh_knob_cache_dir();
    if (dir && !strcmp(dir, "off")) return 0;
    if (dir && *dir) return snprintf(path, size, "%s/%s", dir, CACHE_FILE) < (int)size;
    const char *xdg = secure_getenv("XDG_CACHE_HOME"), *home = secure_getenv("HOME");
    if (xdg && *xdg) return snprintf(path, size, "%s/vlahybrid/%s", xdg, CACHE_FILE) < (int)size;
    if (home && *home) return snprintf(path, size, "%s/.cache/vlahybrid/%s", home, CACHE_FILE) < (int)size;
    return 0;
}

static void cache_key(const vh_model *model, const vh_plan_request *req, vh_plugin *const plugins[2], uint32_t rows,
                      char *key, size_t size)
{
    const vh_llm_desc *l = &model->desc.llm;
    int used = 0;
    for (int i = 0; i < 2; i++) {
        vh_device_info info = {.struct_size = sizeof info};
        plugins[i]->iface->device_info(0, &info);
        for (char *c = info.name; *c; c++)
            if (*c == '\t' || *c == '\n' || *c == ' ') *c = '_';
        used += snprintf(key + used, size - (size_t)used, "%s@%s,", plugins[i]->iface->name, info.name);
        if (used >= (int)size) return;
    }
    uint64_t vision_sig = 0;
    for (uint32_t t = 0; t < model->desc.n_towers; t++) {
        const vh_vit_desc *v = &model->desc.towers[t];
        vision_sig = vision_sig * 1000003u + v->embed_dim * 131u + v->n_blocks * 7u + v->n_patches + v->mlp_hidden;
    }
    snprintf(key + used, size - (size_t)used, "threads=%d,llm=%ux%ux%u/%ux%u,V=%u,vision=%llu,rows=%u,ctx=%u,passes=%u",
             req->n_threads, l->hidden, l->intermediate, l->n_heads, l->n_kv_heads, l->head_dim, l->vocab,
             (unsigned long long)vision_sig, rows, req->max_context, req->action_tokens);
}

/* Open the cache file with `flags`: only a regular file (O_NONBLOCK: a FIFO in its place must not
 * block the session's create). The cache is optional: any trouble is a warning and the costs are
 * measured (and not cached) instead; a missing file is silent. */
static FILE *cache_open(const char *path, int flags, const char *mode, const vh_logger *log)
{
    char reason[128];
    int fd = open(path, flags | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd < 0) {
        if (errno != ENOENT || (flags & O_CREAT))
            vh_log_warn(log, "split-cost cache %s: cannot open: %s (measuring without it)", path,
                        strerror_r(errno, reason, sizeof reason));
        return NULL;
    }
    struct stat st;
    FILE *f = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        vh_log_warn(log, "split-cost cache %s: not a regular file (measuring without it)", path);
    else if (!(f = fdopen(fd, mode)))
        vh_log_warn(log, "split-cost cache %s: cannot open: out of memory", path);
    if (!f) close(fd);
    return f;
}

/* "fixed0 block0 fixed1 block1" (ns, what cache_write wrote): four numbers and nothing else, each
 * finite and in range (they become int64 nanoseconds in the scheduler), a block's cost above 0. */
static int parse_costs(const char *text, vh_stage_costs *c)
{
    double v[4];
    int end = -1;
    if (sscanf(text, "%lf %lf %lf %lf %n", &v[0], &v[1], &v[2], &v[3], &end) != 4 || end < 0 || text[end]) return 0;
    for (int i = 0; i < 4; i++)
        if (!isfinite(v[i]) || v[i] < 0 || v[i] > MAX_COST_NS || (i % 2 && v[i] == 0)) return 0;
    c->fixed_ns[0] = v[0];
    c->block_ns[0] = v[1];
    c->fixed_ns[1] = v[2];
    c->block_ns[1] = v[3];
    return 1;
}

/* The first valid line for `key`; lines for it that are not valid are ignored with a warning. */
static int cache_read(const char *key, vh_stage_costs *c, const vh_logger *log)
{
    char path[4096], line[1024];
    if (!cache_path(path, sizeof path)) return 0;
    FILE *f = cache_open(path, O_RDONLY, "r", log);
    if (!f) return 0;
    int found = 0;
    for (unsigned n = 1; !found && fgets(line, sizeof line, f); n++) {
        const int whole = strchr(line, '\n') || feof(f);
        if (!whole) /* longer than any line cache_write writes: skip the rest of it */
            for (int ch = 0; ch != '\n' && ch != EOF;) ch = fgetc(f);
        char *tab = strchr(line, '\t');
        if (!tab) continue;
        *tab = '\0';
        if (strcmp(line, key)) continue;
        found = whole && parse_costs(tab + 1, c);
        if (!found)
            vh_log_warn(log, "split-cost cache %s, line %u: not four costs in range for this setup: ignored", path, n);
    }
    fclose(f);
    return found;
}

static void cache_write(const char *key, const vh_stage_costs *c, const vh_logger *log)
{
    char path[4096];
    if (!cache_path(path, sizeof path)) return;
    /* create the folders on the way (~/.cache, ~/.cache/vlahybrid) when missing */
    for (char *slash = strchr(path + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(path, 0700); /* EEXIST is the usual answer; the open reports what matters */
        *slash = '/';
    }
    FILE *f = cache_open(path, O_WRONLY | O_APPEND | O_CREAT, "a", log);
    if (!f) return;
    fprintf(f, "%s\t%.0f %.0f %.0f %.0f\n", key, c->fixed_ns[0], c->block_ns[0], c->fixed_ns[1], c->block_ns[1]);
    if (fclose(f) != 0) vh_log_warn(log, "split-cost cache %s: writing failed", path);
}

vh_status vh_split_calibrate(const vh_model *model, const vh_plan_request *req, vh_plugin *const plugins[2],
                             vh_stage_costs *costs, vh_error *err)
{
    memset(costs, 0, sizeof *costs);
    const vh_llm_desc *l = &model->desc.llm;
    uint32_t rows = model->desc.n_image_tokens + PROMPT_TEXT_ROWS;
    if (rows + req->action_tokens > req->max_context) rows = req->max_context - req->action_tokens;
    const uint32_t steps = req->action_tokens > 1 ? req->action_tokens - 1 : 0;
    char key[1024];
    cache_key(model, req, plugins, rows, key, sizeof key);
    if (cache_read(key, costs, req->log)) return VH_OK;

    float *hidden = malloc(sizeof(float) * rows * l->hidden);
    if (!hidden) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (calibration)");
    uint32_t state = 12345u; /* activations of an ordinary size; the values do not matter for time */
    for (size_t i = 0; i < (size_t)rows * l->hidden; i++) {
        state = state * 1664525u + 1013904223u;
        hidden[i] = ((float)(state >> 8) / 16777216.0f - 0.5f);
    }
    vh_status st = VH_OK;
    for (int s = 0; s < 2 && !st; s++) {
        probe block = {.plugin = plugins[s]}, fixed = {.plugin = plugins[s]};
        double prefill, decode;
        st = probe_create(&block, model, req, model->llm_first_block, 1, err);
        if (!st) st = time_llm_passes(&block, model->llm_first_block, hidden, rows, steps, &prefill, &decode, err);
        probe_destroy(&block);
        if (!st) costs->block_ns[s] = prefill + decode;
        if (!st && s == 0) { /* the vision towers and the projector */
            const uint32_t vision = image_batch_blocks(model); /* the heads on query sets not even loaded */
            if (vision) st = probe_create(&fixed, model, req, 0, vision, err);
            if (!st && vision) st = time_vision(&fixed, model, vision, &costs->fixed_ns[0], err);
        } else if (!st && vh_block_tensor(&model->blocks[model->head_block], VH_READOUT_VOCAB)) {
            /* the LM head, once a pass (a head that only returns hidden rows, and what follows it,
             * are left out: a few rows, small beside the blocks) */
            st = probe_create(&fixed, model, req, model->head_block, 1, err);
            if (!st) st = time_llm_passes(&fixed, model->head_block, hidden, rows, steps, &prefill, &decode, err);
            if (!st) costs->fixed_ns[1] = prefill + decode;
        }
        probe_destroy(&fixed);
    }
    free(hidden);
    if (!st) cache_write(key, costs, req->log);
    return st;
}

uint32_t vh_split_balance(const vh_stage_costs *c, uint32_t n_layers)
{
    uint32_t best = 0;
    double best_ns = 1e300;
    for (uint32_t s = 0; s <= n_layers; s++) {
        double t0 = c->fixed_ns[0] + s * c->block_ns[0], t1 = c->fixed_ns[1] + (n_layers - s) * c->block_ns[1];
        double slower = t0 > t1 ? t0 : t1;
        if (slower < best_ns) {
            best_ns = slower;
            best = s;
        }
    }
    return best;
}
