/*
 * The cuda executor's life: its blocks described from the model (cuda_executor_describe), device
 * setup, its memory planned and checked (cuda_memory_plan.c), weights uploaded (cuda_upload.c),
 * host mirrors and the GEMM handle made; and its destruction. Runs are cuda_run.c's.
 */
#include "backend_error.h"
#include "backend_knobs.h"
#include "backend_log.h"
#include "block_executor.h"
#include "cuda_executor.h"
#include "cuda_graphs.h"
#include "cuda_memory_plan.h"
#include "cuda_shared_memory.h"
#include "cuda_upload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vh_status cuda_fail(char *err, size_t err_size, cudaError_t e, const char *what)
{
    vh_status st = e == cudaErrorMemoryAllocation ? VH_ERR_DEVICE_OUT_OF_MEMORY : VH_ERR_BACKEND_FAILED;
    return vh_backend_fail(err, err_size, st, "cuda: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

static vh_status allocate_host_mirrors(vh_executor *e, char *err, size_t err_size)
{
    cudaError_t ce;
    const uint64_t images = e->params.max_images ? e->params.max_images : 1;
    if (e->vit.pixels &&
        (ce = cudaMallocHost((void **)&e->vit.pixels_host, sizeof(float) * images * e->vit.pixel_floats)))
        return cuda_fail(err, err_size, ce, "pinned pixel buffer");
    if (!e->llm.x) return VH_OK;
    if ((ce = cudaMallocHost((void **)&e->llm.rows_host, sizeof(vhc_row) * e->params.max_rows)) ||
        (ce = cudaMallocHost((void **)&e->llm.last_rows_host, sizeof(int32_t) * e->max_segments)) ||
        (ce = cudaMallocHost((void **)&e->llm.tokens_host, sizeof(int32_t) * e->max_segments)) ||
        (ce = cudaMallocHost((void **)&e->llm.tiles_host, sizeof(vhc_attention_tile) * e->llm.max_tiles)) ||
        (ce = cudaMallocHost((void **)&e->llm.x_out_host, sizeof(float) * HIDDEN_OUT_ROWS * e->model->llm.hidden)) ||
        (e->head.rows && (ce = cudaMallocHost((void **)&e->head.rows_host, sizeof(int32_t) * e->head.max_hidden))))
        return cuda_fail(err, err_size, ce, "pinned host buffers");
    e->head.embed_src = calloc(images, sizeof *e->head.embed_src);
    e->head.embed_rows = calloc(images, sizeof *e->head.embed_rows);
    e->head.embed_slot = calloc(images, sizeof *e->head.embed_slot);
    if (!e->head.embed_src || !e->head.embed_rows || !e->head.embed_slot)
        return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
    return VH_OK;
}

void cuda_executor_free_host(vh_executor *e)
{
    if (!e) return;
    cuda_queries_free(e);
    free(e->queries.data);
    free(e->blocks);
    free(e);
}

/* The first of blocks [0, upto] that is a decoder layer (upto itself when none before it is). */
static uint32_t first_llm_block(const vh_executor *e, uint32_t upto)
{
    for (uint32_t i = 0; i < upto; i++)
        if (e->blocks[i].variant->llm_layer) return i;
    return upto;
}

vh_status cuda_executor_describe(const vh_executor_params *params, vh_executor **out, char *err, size_t err_size)
{
    *out = NULL;
    vh_executor_params known; /* the fields both sides know */
    vh_status st = vh_block_executor_read_params("cuda", params, &known, err, err_size);
    if (st) return st;
    params = &known;
    const vh_model_desc *m = params->model;
    if ((st = vh_block_executor_check_blocks("cuda", cuda_support, cuda_n_support, params, err, err_size))) return st;
    int n_devices = 0;
    cudaError_t ce = cudaGetDeviceCount(&n_devices);
    if (ce != cudaSuccess || n_devices == 0)
        return vh_backend_fail(err, err_size, VH_ERR_BACKEND_FAILED, "cuda: no usable GPU (%s)",
                    ce != cudaSuccess ? cudaGetErrorString(ce) : "none found");
    if ((st = vh_block_executor_check_params("cuda", params, (uint32_t)n_devices, err, err_size))) return st;
    vh_executor *e = calloc(1, sizeof *e);
    if (e) e->blocks = calloc(params->n_blocks, sizeof *e->blocks);
    if (!e || !e->blocks) {
        free(e);
        return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "cuda: out of host memory");
    }
    e->params = *params;
    e->model = m;
    e->device = (int)params->device;
    e->max_segments = params->max_sequences < params->max_rows ? params->max_sequences : params->max_rows;
    for (uint32_t i = 0; i < params->n_blocks; i++) {
        cuda_block *b = &e->blocks[i];
        const vh_block_desc *d = &m->blocks[params->first_block + i];
        const int index = vh_block_variant_of(m, d);
        b->desc = d;
        b->variant = &vh_block_variants[index];
        b->kind = &cuda_kinds[index];
        b->state = d->state;
        vh_block_variant_read_params(m, d, &b->info);
        if (b->variant->is_planner) {
            const vh_planner_params *pp = &b->info.plan;
            if (!vh_planner_params_valid(pp, m->llm.hidden) ||
                2ull * pp->n_modes * pp->n_steps + 2ull * pp->latent_dim > CUDA_PLAN_STRIDE_MAX) {
                cuda_executor_free_host(e);
                return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: planner of feature %u (the "
                                       "LLM's hidden size is %u), %u GRU layers of %u, %u modes of %u steps",
                                       pp->feature_dim, m->llm.hidden, pp->gru_layers, pp->gru_hidden, pp->n_modes,
                                       pp->n_steps);
            }
        }
        for (uint32_t t = 0; t < d->n_tensors; t++) b->t[d->tensors[t].role] = d->tensors[t];
        if (b->variant->llm_layer) b->lora_sets = vh_block_lora_sets_held(d);
        if ((b->variant->has_state && d->state == VH_NO_STATE) ||
            (b->variant->in_tower && b->info.tower >= m->n_towers)) {
            cuda_executor_free_host(e);
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "cuda: block %u: no state slot, or a "
                                   "tower the model lacks", params->first_block + i);
        }
        if (b->variant->llm_layer && b->info.rope_theta != e->blocks[first_llm_block(e, i)].info.rope_theta) {
            cuda_executor_free_host(e);
            return vh_backend_fail(err, err_size, VH_ERR_UNSUPPORTED, "cuda: block %u: decoder layers of one executor "
                                   "share one RoPE table; this one's theta differs", params->first_block + i);
        }
        if (b->variant->has_state) {
            if (e->n_layers_held == 0) e->first_state = b->state;
            e->n_layers_held++;
        }
        if (b->kind->check && (st = b->kind->check(e, b, err, err_size))) {
            cuda_executor_free_host(e);
            return st;
        }
    }
    if ((st = cuda_queries_describe(e, err, err_size))) {
        cuda_executor_free_host(e);
        return st;
    }
    *out = e;
    return VH_OK;
}

/* Say what sharing the host's memory means for this executor: its budget is system RAM, the
 * hand-off is in place, and (when it holds only part of the model, a CPU stage holding the rest)
 * that the CPU stage draws on the same memory bandwidth (doc/jetson.md has the arithmetic). */
static void log_shared_memory(const vh_executor *e, uint64_t total, size_t free_bytes, size_t total_bytes)
{
    const vh_executor_params *p = &e->params;
    const int integrated = vhc_device_integrated(e->device);
    vh_backend_log(p, VH_LOG_INFO, "cuda: %s: the GPU shares the host's memory; the memory budget (%s) and the "
                   "%.3f GB taken here count against system RAM (%.3f GB free of %.3f GB); hidden rows cross "
                   "stages in mapped host memory, in place", integrated ? "integrated GPU" : "VH_CUDA_INTEGRATED=1 "
                   "on a discrete GPU (mapped memory over PCIe: a test of the path, slow)",
                   p->memory_budget ? "set" : "none: the free memory", total / 1e9, free_bytes / 1e9,
                   total_bytes / 1e9);
    if (p->n_blocks < p->model->n_blocks)
        vh_backend_log(p, VH_LOG_INFO, "cuda: blocks %u..%u of %u here: a CPU stage beside this GPU reads its weights "
                       "over the same memory bus, so a split adds CPU compute, not bandwidth (doc/jetson.md)",
                       p->first_block, p->first_block + p->n_blocks - 1, p->model->n_blocks);
}

vh_status cuda_executor_create(const vh_executor_params *params, vh_executor **out, char *err, size_t err_size)
{
    vh_executor *e;
    vh_status st = cuda_executor_describe(params, &e, err, err_size);
    if (st) return st;
    e->profile = vhc_profile_from_env();
    /* events do not time inside graphs; the peer's copies change size every step */
    e->graphs_enabled =
        !vh_knob_is(VH_KNOB_CUDA_GRAPHS, "0") && !e->profile && !vh_knob_is(VH_KNOB_CUDA_KV_GATHER, "1");
    cudaError_t ce;
    if ((ce = cudaSetDevice(e->device)) || (ce = cudaStreamCreateWithFlags(&e->stream, cudaStreamNonBlocking)) ||
        /* VH_CUDA_SYNC=spin: the runtime's own wait (to measure what blocking costs) */
        (!vh_knob_is(VH_KNOB_CUDA_SYNC, "spin") &&
         (ce = cudaEventCreateWithFlags(&e->done, cudaEventBlockingSync | cudaEventDisableTiming)))) {
        st = cuda_fail(err, err_size, ce, "device setup");
        goto fail;
    }

    /* count, check against the budget and the card, then allocate and carve for real */
    cuda_arena count_w = {0}, count_x = {0};
    cuda_memory_plan_count(e, &count_w, &count_x);
    const uint64_t total = count_w.used + count_x.used + e->cache_bytes;
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    /* an integrated GPU's "device memory" is the system's RAM: cudaMemGetInfo counts it, and what
     * this executor takes the CPU side (the core, a CPU stage, the program) no longer has */
    e->shares_host_memory = vhc_shares_host_memory(e->device);
    if ((st = cuda_memory_plan_check(e, count_w.used, count_x.used, free_bytes, err, err_size))) goto fail;
    e->weights.size = count_w.used;
    e->work.size = count_x.used;
    if ((ce = cudaMalloc((void **)&e->weights.base, e->weights.size)) ||
        (ce = cudaMalloc((void **)&e->work.base, e->work.size)) ||
        (e->cache_bytes && ((ce = cudaMalloc((void **)&e->k_cache, e->cache_bytes / 2)) ||
                            (ce = cudaMalloc((void **)&e->v_cache, e->cache_bytes / 2))))) {
        st = cuda_fail(err, err_size, ce, "allocating device memory");
        goto fail;
    }
    cuda_memory_plan_weights(e, &e->weights);
    cuda_memory_plan_work(e, &e->work);
    void *workspace = cuda_memory_plan_workspace(e);
    if ((st = cuda_upload_weights(e, err, err_size)) || (st = allocate_host_mirrors(e, err, err_size)) ||
        (st = cuda_upload_rope_table(e, err, err_size)) ||
        (st = vhc_gemm_create(e->stream, workspace, CUDA_GEMM_WORKSPACE_BYTES, &e->gemm, err, err_size)))
        goto fail;
    struct cudaDeviceProp prop;
    vh_backend_log(params, VH_LOG_INFO, "cuda: blocks %u..%u on %s: weights %.3f GB, KV cache %.3f GB, activations "
                   "and workspace %.3f GB; graphs %s%s", params->first_block, params->first_block + params->n_blocks - 1,
                   cudaGetDeviceProperties(&prop, e->device) == cudaSuccess ? prop.name : "a GPU", count_w.used / 1e9,
                   e->cache_bytes / 1e9, count_x.used / 1e9, e->graphs_enabled ? "on" : "off",
                   e->profile ? ", profiling" : "");
    if (e->shares_host_memory) log_shared_memory(e, total, free_bytes, total_bytes);
    *out = e;
    return VH_OK;
fail:
    cuda_executor_destroy(e);
    return st;
}

void cuda_executor_destroy(vh_executor *e)
{
    if (!e) return;
    if (e->stream) cudaStreamSynchronize(e->stream);
    char who[64];
    snprintf(who, sizeof who, "blocks %u..%u", e->params.first_block, e->params.first_block + e->params.n_blocks - 1);
    vhc_profile_destroy(e->profile, who, &e->params);
    cuda_graphs_destroy(e);
    vhc_gemm_destroy(e->gemm);
    cudaFree(e->weights.base);
    cudaFree(e->work.base);
    cudaFree(e->k_cache);
    cudaFree(e->v_cache);
    cudaFreeHost(e->vit.pixels_host);
    cudaFreeHost(e->llm.rows_host);
    cudaFreeHost(e->llm.last_rows_host);
    cudaFreeHost(e->llm.tokens_host);
    cudaFreeHost(e->llm.tiles_host);
    cudaFreeHost(e->llm.x_out_host);
    cudaFreeHost(e->head.rows_host);
    free(e->head.embed_src);
    free(e->head.embed_rows);
    free(e->head.embed_slot);
    if (e->done) cudaEventDestroy(e->done);
    if (e->stream) cudaStreamDestroy(e->stream);
    cuda_executor_free_host(e);
}
