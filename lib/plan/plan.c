#include "plan/plan.h"

#include <stdio.h>
#include <string.h>

/* Split "a,b" into names; returns the count or -1 when there are too many or one is empty. */
static int split_backend_names(const char *csv, char names[][65], int max)
{
    int n = 0;
    const char *p = csv;
    while (1) {
        size_t len = strcspn(p, ",");
        if (len == 0 || len > 64 || n == max) return -1;
        memcpy(names[n], p, len);
        names[n][len] = '\0';
        n++;
        if (!p[len]) return n;
        p += len + 1;
    }
}

static vh_status create_executor(const vh_model *model, const vh_plan_request *req, vh_stage *stage,
                                 vh_error *err)
{
    vh_executor_params p = {
        .model = &model->desc,
        .device = 0,
        .first_block = stage->first_block,
        .n_blocks = stage->n_blocks,
        .max_sequences = 1,
        .max_context = req->max_context,
        .max_rows = req->max_context,
        .max_images = 1,
        .n_threads = req->n_threads,
        .memory_budget = req->gpu_memory_budget,
        .log_fn = req->log ? req->log->fn : NULL,
        .log_user = req->log ? req->log->user : NULL,
        .log_level = req->log ? req->log->level : VH_LOG_ERROR,
    };
    char why[512] = "";
    vh_status st = stage->plugin->iface->executor_create(&p, &stage->executor, why, sizeof why);
    if (st) {
        stage->executor = NULL;
        return vh_error_set(err, st, "backend '%s' could not load blocks %u..%u: %s", stage->plugin->iface->name,
                            stage->first_block, stage->first_block + stage->n_blocks - 1, why);
    }
    return VH_OK;
}

vh_status vh_plan_create(const vh_model *model, const vh_plan_request *req, vh_plan *plan, vh_error *err)
{
    memset(plan, 0, sizeof *plan);
    char names[VH_MAX_STAGES][65];
    int n_names = 0;
    if (req->backends) { /* NULL: the best available; "" is a mistake, not a request */
        n_names = split_backend_names(req->backends, names, VH_MAX_STAGES);
        if (n_names < 0)
            return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "backends '%s' is not a comma-separated list of at "
                                "most %d names", req->backends, VH_MAX_STAGES);
        if (n_names > 2)
            return vh_error_set(err, VH_ERR_UNSUPPORTED, "backends '%s': at most two stages in this version",
                                req->backends);
    }
    /* the blocks: [vision..., projector, LLM embedding | n_layers LLM blocks | head] */
    const uint32_t n_layers = model->head_block - model->llm_first_block;
    if (n_names == 2 && (req->llm_split < 0 || (uint32_t)req->llm_split > n_layers))
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "backends '%s' need llm_split, the LLM blocks on '%s': "
                            "0..%u (got %d)", req->backends, names[0], n_layers, req->llm_split);
    const uint32_t first_stage_blocks =
        n_names == 2 ? model->llm_first_block + (uint32_t)req->llm_split : model->desc.n_blocks;

    vh_status st = VH_OK;
    for (int i = 0; i < (n_names > 1 ? n_names : 1) && st == VH_OK; i++) {
        vh_stage *stage = &plan->stages[i];
        st = n_names ? vh_plugin_load(names[i], req->plugin_path, req->log, &stage->plugin, err)
                     : vh_plugin_load_best(req->plugin_path, req->log, &stage->plugin, err);
        if (st) break;
        plan->n_stages++;
        if (stage->plugin->iface->score() <= 0) {
            st = vh_error_set(err, VH_ERR_BACKEND_FAILED, "backend '%s' cannot run on this machine",
                              stage->plugin->iface->name);
            break;
        }
        stage->first_block = i == 0 ? 0 : first_stage_blocks;
        stage->n_blocks = i == 0 ? first_stage_blocks : model->desc.n_blocks - first_stage_blocks;
        st = create_executor(model, req, stage, err);
    }
    if (st) vh_plan_destroy(plan);
    return st;
}

void vh_plan_destroy(vh_plan *plan)
{
    for (uint32_t i = 0; i < plan->n_stages; i++) {
        vh_stage *s = &plan->stages[i];
        if (s->executor) s->plugin->iface->executor_destroy(s->executor);
        vh_plugin_unload(s->plugin);
    }
    memset(plan, 0, sizeof *plan);
}

void vh_plan_describe(const vh_plan *plan, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < plan->n_stages && used < size; i++) {
        int n = snprintf(buf + used, size - used, "%s%s", i ? "," : "", plan->stages[i].plugin->iface->name);
        if (n < 0) break;
        used += (size_t)n;
    }
}
