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
        if (n_names > 1)
            return vh_error_set(err, VH_ERR_UNSUPPORTED, "backends '%s': running blocks on several backends (the "
                                "hybrid pipeline) is not available in this version", req->backends);
    }

    vh_stage *stage = &plan->stages[0];
    vh_status st = n_names ? vh_plugin_load(names[0], req->plugin_path, req->log, &stage->plugin, err)
                           : vh_plugin_load_best(req->plugin_path, req->log, &stage->plugin, err);
    if (st) return st;
    plan->n_stages = 1;
    if (stage->plugin->iface->score() <= 0) {
        st = vh_error_set(err, VH_ERR_BACKEND_FAILED, "backend '%s' cannot run on this machine",
                          stage->plugin->iface->name);
        vh_plan_destroy(plan);
        return st;
    }
    stage->first_block = 0;
    stage->n_blocks = model->desc.n_blocks;
    if ((st = create_executor(model, req, stage, err))) {
        vh_plan_destroy(plan);
        return st;
    }
    return VH_OK;
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
