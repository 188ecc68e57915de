#include "plan/plan.h"

#include "plan/split_calibration.h"
#include "util/thread_start.h"

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

static vh_executor_params executor_params(const vh_model *model, const vh_plan_request *req, uint32_t first_block,
                                          uint32_t n_blocks)
{
    const uint32_t images = req->images_per_pass ? req->images_per_pass : 1;
    const uint32_t segments = req->segments_per_frame ? req->segments_per_frame : 1;
    return (vh_executor_params){
        .struct_size = sizeof(vh_executor_params),
        .model = &model->desc,
        .device = 0,
        .first_block = first_block,
        .n_blocks = n_blocks,
        .max_sequences = req->max_sequences ? req->max_sequences : 1,
        .max_context = req->max_context,
        .max_rows = req->max_context * segments * images,
        /* a segment bringing its own vision rows takes an image's place (each of a frame's segments may) */
        .max_images = images * segments > req->images_per_frame ? images * segments : req->images_per_frame,
        .max_frames = 1, /* blocks on query sets run one frame at a time (vh_family.run_vision) */
        .n_threads = req->n_threads,
        .memory_budget = req->gpu_memory_budget,
        .log_fn = req->log ? req->log->fn : NULL,
        .log_user = req->log ? req->log->user : NULL,
        .log_level = req->log ? req->log->level : VH_LOG_ERROR,
    };
}

/* CPU threads for a CPU stage: the caller's count, or all cores it may use; but beside a GPU stage,
 * one core is left to the GPU stage's thread (it launches kernels and waits on the GPU), else the
 * CPU stage's barriers wait for a thread the OS has descheduled in favour of it. */
static int32_t cpu_stage_threads(const vh_plan_request *req, const vh_plan *plan)
{
    if (req->n_threads > 0) return req->n_threads;
    int has_gpu = 0;
    for (uint32_t i = 0; i < plan->n_stages; i++) has_gpu |= plan->stages[i].device == VH_DEVICE_GPU;
    const int cores = vh_thread_cpus(); /* the CPUs this thread may use (the session's cpu_affinity, if given) */
    return has_gpu && cores > 2 ? (int32_t)(cores - 1) : 0;
}

vh_status vh_plan_check_support(const vh_plugin *plugin, const vh_model *model, uint32_t first_block,
                                 uint32_t n_blocks, vh_error *err)
{
    const vh_backend_iface *be = plugin->iface;
    char why[512];
    for (uint32_t i = first_block; i < first_block + n_blocks; i++)
        if (!vh_block_check(be->name, be->kinds, be->n_kinds, &model->desc, i, why, sizeof why))
            return vh_error_set(err, VH_ERR_UNSUPPORTED, "backend '%s' cannot run this model's blocks: %s", be->name,
                                why);
    return VH_OK;
}

/* An executor's progress passed on to the request's hook; the hook's refusal kept, for
 * the plan to return once the executor has stopped. */
typedef struct executor_progress {
    const vh_plan_request *req;
    uint32_t stage, n_stages;
    const char *backend;
    vh_status st;
    vh_error err;
} executor_progress;

static int on_executor_progress(void *user, uint64_t done, uint64_t total)
{
    executor_progress *p = user;
    if (p->st == VH_OK)
        p->st = p->req->executor_progress(p->req->executor_progress_user, p->stage, p->n_stages, p->backend,
                                          total ? (double)done / (double)total : 1.0, &p->err);
    return p->st != VH_OK;
}

static vh_status create_executor(const vh_model *model, const vh_plan_request *req, vh_plan *plan, uint32_t index,
                                 vh_error *err)
{
    vh_stage *stage = &plan->stages[index];
    const vh_backend_iface *be = stage->plugin->iface;
    vh_executor_params p = executor_params(model, req, stage->first_block, stage->n_blocks);
    if (stage->device == VH_DEVICE_CPU) p.n_threads = cpu_stage_threads(req, plan);
    executor_progress progress = {.req = req, .stage = index, .n_stages = plan->n_stages, .backend = be->name};
    if (req->executor_progress)
        p.progress_fn = on_executor_progress, p.progress_user = &progress;
    char why[512] = "";
    vh_status st = vh_plan_check_support(stage->plugin, model, stage->first_block, stage->n_blocks, err);
    if (st) return st;
    if (req->executor_progress &&
        (st = req->executor_progress(req->executor_progress_user, index, plan->n_stages, be->name, 0, err)))
        return st;
    st = be->executor_create(&p, &stage->executor, why, sizeof why);
    if (progress.st) { /* cancelled by the hook: its status and message, whatever the backend made of it */
        if (st == VH_OK) be->executor_destroy(stage->executor);
        stage->executor = NULL;
        *err = progress.err;
        return progress.st;
    }
    if (st) {
        stage->executor = NULL;
        return vh_error_set(err, st, "backend '%s' could not load blocks %u..%u: %s", be->name, stage->first_block,
                            stage->first_block + stage->n_blocks - 1, why);
    }
    return VH_OK;
}

/* The most LLM blocks the first stage can hold under its device memory limit (the budget, or
 * the device's free memory), as its backend counts them; n_layers when the backend cannot say or
 * is not a GPU. VH_ERR_DEVICE_OUT_OF_MEMORY when not even the vision side and the embedding fit. */
static vh_status first_stage_capacity(const vh_model *model, const vh_plan_request *req, const vh_plan *plan,
                                      uint32_t *capacity, vh_error *err)
{
    const vh_stage *s = &plan->stages[0];
    *capacity = plan->n_llm_layers;
    vh_status (*plan_memory)(const vh_executor_params *, vh_memory_report *, char *, size_t) =
        VH_PLUGIN_OPTIONAL(s->plugin, executor_plan_memory);
    if (s->device != VH_DEVICE_GPU || !plan_memory) return VH_OK;
    vh_device_info info = {.struct_size = sizeof info};
    s->plugin->iface->device_info(0, &info);
    uint64_t limit = req->gpu_memory_budget ? req->gpu_memory_budget : info.free_memory;
    if (info.free_memory && info.free_memory < limit) limit = info.free_memory;
    uint64_t vision_side = 0; /* bytes with no LLM block */
    for (int32_t n = (int32_t)plan->n_llm_layers; n >= 0; n--) { /* cheap: nothing is allocated */
        vh_executor_params p = executor_params(model, req, 0, plan->llm_first_block + (uint32_t)n);
        p.memory_budget = 0;
        vh_memory_report need = {.struct_size = sizeof need};
        char why[512] = "";
        vh_status st = plan_memory(&p, &need, why, sizeof why);
        if (st) return vh_error_set(err, st, "backend '%s': %s", s->plugin->iface->name, why);
        const uint64_t total = need.weight_bytes + need.cache_bytes + need.work_bytes;
        if (total <= limit) {
            *capacity = (uint32_t)n;
            return VH_OK;
        }
        vision_side = total;
    }
    return vh_error_set(err, VH_ERR_DEVICE_OUT_OF_MEMORY, "backend '%s': the vision side and the embedding alone "
                        "need %.3f GB, more than the %s (%.3f GB)", s->plugin->iface->name, vision_side / 1e9,
                        req->gpu_memory_budget ? "GPU memory budget" : "free GPU memory", limit / 1e9);
}

/* Two stages: the split, the zone, and each executor's range. */
static vh_status choose_split(const vh_model *model, const vh_plan_request *req, vh_plan *plan, vh_error *err)
{
    const uint32_t n = plan->n_llm_layers;
    if (req->llm_split >= 0 && (uint32_t)req->llm_split > n)
        return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "llm_split %d: the model has %u LLM blocks", req->llm_split, n);
    /* the first stage's room in LLM blocks: only a chosen split asks the backend (a given split
     * is the caller's; executor_create then checks the budget) */
    uint32_t split, capacity = n;
    vh_status st;
    if (req->llm_split >= 0) {
        split = (uint32_t)req->llm_split;
        plan->split_source = VH_SPLIT_EXPLICIT;
    } else if ((st = first_stage_capacity(model, req, plan, &capacity, err))) {
        return st;
    } else if (req->gpu_memory_budget && plan->stages[0].device == VH_DEVICE_GPU) {
        split = capacity;
        plan->split_source = VH_SPLIT_BUDGET;
    } else {
        vh_plugin *plugins[2] = {plan->stages[0].plugin, plan->stages[1].plugin};
        vh_plan_request measured = *req; /* the CPU stage measured with the threads it will have */
        measured.n_threads = cpu_stage_threads(req, plan);
        if ((st = vh_split_calibrate(model, &measured, plugins, &plan->costs, err))) return st;
        split = vh_split_balance(&plan->costs, n);
        if (split > capacity) split = capacity;
        plan->split_source = VH_SPLIT_BALANCED;
    }
    const uint32_t z = req->split_zone;
    plan->llm_split = split;
    plan->split_min = split > z ? split - z : 0;
    plan->split_max = split + z < capacity ? split + z : capacity; /* split <= capacity <= n */
    plan->stages[0].first_block = 0;
    plan->stages[0].n_blocks = plan->llm_first_block + plan->split_max;
    plan->stages[1].first_block = plan->llm_first_block + plan->split_min;
    plan->stages[1].n_blocks = model->desc.n_blocks - plan->stages[1].first_block;
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
    plan->llm_first_block = model->llm_first_block;
    plan->n_llm_layers = model->head_block - model->llm_first_block;

    vh_status st = VH_OK;
    for (int i = 0; i < (n_names > 1 ? n_names : 1) && st == VH_OK; i++) {
        vh_stage *stage = &plan->stages[i];
        st = n_names ? vh_plugin_load(names[i], req->plugin_path, req->log, &stage->plugin, err)
                     : vh_plugin_load_best(req->plugin_path, req->log, &stage->plugin, err);
        if (st) break;
        plan->n_stages++;
        if (stage->plugin->iface->score() <= 0) {
            char why[256] = "";
            void (*reason)(char *, size_t) = VH_PLUGIN_OPTIONAL(stage->plugin, unavailable_reason);
            if (reason) reason(why, sizeof why);
            st = vh_error_set(err, VH_ERR_BACKEND_FAILED, "backend '%s' cannot run on this machine%s%s",
                              stage->plugin->iface->name, why[0] ? ": " : "", why);
            break;
        }
        vh_device_info info = {.struct_size = sizeof info};
        if (stage->plugin->iface->device_info(0, &info) == VH_OK) stage->device = info.kind;
    }
    if (st == VH_OK && plan->n_stages == 1) {
        plan->stages[0].n_blocks = model->desc.n_blocks;
        plan->split_source = VH_SPLIT_SINGLE;
        plan->llm_split = plan->split_min = plan->split_max = plan->n_llm_layers;
    } else if (st == VH_OK) {
        st = choose_split(model, req, plan, err);
    }
    for (uint32_t i = 0; i < plan->n_stages && st == VH_OK; i++) st = create_executor(model, req, plan, i, err);
    if (st) vh_plan_destroy(plan);
    return st;
}

/* The stage whose plugin offers host memory (a GPU's page-locked memory), or the first. */
static const vh_plugin *host_memory_plugin(const vh_plan *plan)
{
    for (uint32_t i = 0; i < plan->n_stages; i++)
        if (VH_PLUGIN_OPTIONAL(plan->stages[i].plugin, host_alloc)) return plan->stages[i].plugin;
    return plan->stages[0].plugin;
}

void *vh_plan_host_alloc(const vh_plan *plan, size_t bytes)
{
    return vh_plugin_host_alloc(host_memory_plugin(plan), bytes);
}

void vh_plan_host_free(const vh_plan *plan, void *ptr)
{
    vh_plugin_host_free(host_memory_plugin(plan), ptr);
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
