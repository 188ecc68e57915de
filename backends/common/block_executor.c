#include "block_executor.h"

#include "backend_error.h"
#include "block_variants.h"

vh_status vh_block_executor_read_params(const char *backend, const vh_executor_params *params,
                                        vh_executor_params *known, char *err, size_t err_size)
{
    if (!vh_executor_params_read(params, known) || !params->model ||
        params->model->struct_size < sizeof(vh_model_desc) || params->model->struct_size > 65536 ||
        !vh_struct_tail_zero(params->model, params->model->struct_size, sizeof(vh_model_desc)))
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: executor parameters or model "
                               "description of a size this plugin does not know (ABI %d.%d)", backend,
                               VH_BACKEND_ABI_MAJOR, VH_BACKEND_ABI_MINOR);
    return VH_OK;
}

/* The graph around block `index` is one this executor runs: slots and states it names exist, a
 * tower's block reads and writes that tower's slots, the MLP chain reads every tower in order, a
 * decoder layer owns a KV cache. */
static vh_status check_wiring(const char *backend, const vh_model_desc *m, const vh_block_desc *d, uint32_t index,
                              const vh_block_variant *v, char *err, size_t err_size)
{
    const uint32_t tower = m->slots[d->inputs[0]].tower;
    int ok = 1;
    if (v->in_tower) ok = tower < m->n_towers && m->slots[d->output].tower == tower && d->n_inputs == 1;
    if (v->projects) {
        ok = d->n_inputs == m->n_towers;
        for (uint32_t i = 0; ok && i < d->n_inputs; i++) ok = m->slots[d->inputs[i]].tower == i;
    }
    if (!ok)
        return vh_backend_fail(err, err_size, VH_ERR_UNSUPPORTED, "%s: block %u (%s) reads slot '%s' and writes "
                               "'%s': not the slots of one tower (or, for the chain, every tower in order)", backend,
                               index, vh_block_kind_name(d->kind), m->slots[d->inputs[0]].name ? m->slots[d->inputs[0]].name : "?",
                               m->slots[d->output].name ? m->slots[d->output].name : "?");
    if (v->has_state != (d->state != VH_NO_STATE) ||
        (v->has_state && (d->state >= m->n_states || m->states[d->state].kind != VH_STATE_KV_CACHE)))
        return vh_backend_fail(err, err_size, VH_ERR_UNSUPPORTED, "%s: block %u (%s) %s", backend, index,
                               vh_block_kind_name(d->kind), v->has_state ? "owns no KV cache state"
                                                                         : "owns a state it does not keep");
    return VH_OK;
}

/* A 2-D RoPE layer's geometry: grid tokens only (no prefix), heads of a multiple of 4 channels (two
 * axes of pairs), a window within the grid, a position scale. */
static vh_status check_rope_2d(const char *backend, const vh_model_desc *m, const vh_block_desc *d, uint32_t index,
                               char *err, size_t err_size)
{
    const vh_transformer_params *p = (const vh_transformer_params *)d->params;
    const vh_vit_desc *t = &m->towers[m->slots[d->inputs[0]].tower];
    const int windowed = p->attention == VH_ATTN_WINDOWED;
    if (t->n_prefix || t->head_dim % 4 || !p->rope_grid || t->grid * t->grid != t->n_patches ||
        (windowed && (p->window == 0 || p->window > t->grid)))
        return vh_backend_fail(err, err_size, VH_ERR_UNSUPPORTED, "%s: block %u (TRANSFORMER, layer %u): 2-D RoPE "
                               "needs grid tokens only (prefix %u), heads of a multiple of 4 channels (%u), a "
                               "position grid (%u) and a window within the %u x %u grid (%u)", backend, index,
                               p->layer, t->n_prefix, t->head_dim, p->rope_grid, t->grid, t->grid,
                               windowed ? p->window : t->grid);
    return VH_OK;
}

/* A decoder layer's LoRA pairs: both matrices or neither, 2-D, ranks that agree (the layer code
 * multiplies through both). */
static vh_status check_lora_pairs(const char *backend, const vh_block_desc *d, char *err, size_t err_size)
{
    for (uint32_t set = 0; set < VH_BLOCK_VARIANT_LORA_SETS; set++)
        for (uint32_t proj = 0; proj < 4; proj++) {
            const uint32_t a = vh_tf_lora_role(set, proj);
            const vh_tensor_view *A = vh_block_tensor(d, a), *B = vh_block_tensor(d, a + 1);
            if (!A != !B || (A && (A->ndim != 2 || B->ndim != 2 || A->shape[0] != B->shape[1])))
                return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: LoRA role %u (set %u) without "
                                       "its pair, or ranks that differ", backend, a, set);
        }
    return VH_OK;
}

vh_status vh_block_executor_check_blocks(const char *backend, const vh_kind_support *kinds, uint32_t n_kinds,
                                         const vh_executor_params *params, char *err, size_t err_size)
{
    const vh_model_desc *m = params->model;
    if (m && (m->n_slots == 0 || !m->slots || (m->n_states && !m->states) || m->n_towers > VH_MAX_TOWERS))
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: the model has %u slots, %u states, %u "
                               "towers", backend, m->n_slots, m->n_states, m->n_towers);
    for (uint32_t i = 0; m && i < params->n_blocks && params->first_block + i < m->n_blocks; i++) {
        const uint32_t index = params->first_block + i;
        if (!vh_block_check(backend, kinds, n_kinds, m, index, err, err_size)) return VH_ERR_UNSUPPORTED;
        const vh_block_desc *d = &m->blocks[index];
        const vh_block_variant *v = &vh_block_variants[vh_block_variant_of(m, d)];
        vh_status st = check_wiring(backend, m, d, index, v, err, err_size);
        if (st) return st;
        if (!vh_block_variant_tensors_present(v, d, index, backend, err, err_size)) return VH_ERR_UNSUPPORTED;
        if (v->rope_2d && (st = check_rope_2d(backend, m, d, index, err, err_size))) return st;
        if (v->on_queries && !vh_block_variant_query_shapes_valid(m, d, index, backend, err, err_size))
            return VH_ERR_UNSUPPORTED;
        if (v->llm_layer && (st = check_lora_pairs(backend, d, err, err_size))) return st;
    }
    return VH_OK;
}

vh_status vh_block_executor_check_params(const char *backend, const vh_executor_params *params, uint32_t n_devices,
                                         char *err, size_t err_size)
{
    const vh_model_desc *m = params->model;
    if (!m || params->n_blocks == 0 || params->first_block >= m->n_blocks ||
        params->n_blocks > m->n_blocks - params->first_block || params->max_rows == 0 ||
        params->max_sequences == 0 || params->max_context == 0 || params->device >= n_devices)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: invalid executor parameters", backend);
    return VH_OK;
}

vh_status vh_block_executor_check_run(const char *backend, const vh_executor_params *p, const vh_batch *batch,
                                      uint32_t first_block, uint32_t n_blocks, char *err, size_t err_size)
{
    if (!batch || n_blocks == 0 || first_block < p->first_block || first_block - p->first_block > p->n_blocks ||
        n_blocks > p->n_blocks - (first_block - p->first_block))
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: blocks [%u, %u) are not all in this "
                               "executor's [%u, %u)", backend, first_block, first_block + n_blocks, p->first_block,
                               p->first_block + p->n_blocks);
    if (!vh_batch_options_check(backend, VH_BLOCK_VARIANT_BATCH_OPTIONS, batch, err, err_size))
        return VH_ERR_UNSUPPORTED;
    char why[160];
    if (!vh_batch_segment_arrays_valid(batch, why, sizeof why))
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: %s", backend, why);
    return VH_OK;
}

vh_status vh_block_executor_check_images(const char *backend, const vh_executor_params *p, const vh_batch *b,
                                         char *err, size_t err_size)
{
    if (b->n_images == 0 || b->n_images > (p->max_images ? p->max_images : 1) || !b->pixels)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: batch has %u images (max %u)", backend,
                               b->n_images, p->max_images);
    for (uint32_t i = 0; i < b->n_images * p->model->n_towers; i++)
        if (!b->pixels[i])
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: pixels[%u] is NULL", backend, i);
    return VH_OK;
}

vh_status vh_block_executor_check_head(const char *backend, const vh_batch *batch, int has_lm_weight, char *err,
                                       size_t err_size)
{
    if (!batch->out_tokens && !(batch->options & VH_BATCH_HIDDEN_ROWS))
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: the head needs out_tokens or hidden "
                               "rows", backend);
    if (batch->out_tokens && !has_lm_weight)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: tokens asked of a head without an LM "
                               "weight", backend);
    return VH_OK;
}

vh_status vh_block_executor_check_adapters(const char *backend, const vh_batch *batch, uint32_t lora_sets,
                                           uint32_t layer, uint32_t block_index, char *err, size_t err_size)
{
    if (!(batch->options & VH_BATCH_SEGMENT_ADAPTERS)) return VH_OK;
    for (uint32_t s = 0; s < batch->n_segments; s++) {
        const uint32_t set = batch->segment_adapters[s];
        if (set != 0 && !(lora_sets >> set & 1u))
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: segment %u asks for LoRA set %u, "
                                   "which LLM layer %u (block %u) does not hold", backend, s, set, layer,
                                   block_index);
    }
    return VH_OK;
}

uint32_t vh_block_lora_sets_held(const vh_block_desc *d)
{
    uint32_t held = 0;
    for (uint32_t set = 0; set < VH_BLOCK_VARIANT_LORA_SETS; set++)
        for (uint32_t proj = 0; proj < 4; proj++)
            if (vh_block_tensor(d, vh_tf_lora_role(set, proj))) held |= 1u << set;
    return held;
}

vh_status vh_block_executor_check_run_blocks(const char *backend, const vh_model_desc *m, const vh_batch *batch,
                                             uint32_t first_block, uint32_t n_blocks, vh_block_run_needs *needs,
                                             char *err, size_t err_size)
{
    *needs = (vh_block_run_needs){0};
    for (uint32_t i = 0; i < n_blocks; i++) {
        const vh_block_desc *d = &m->blocks[first_block + i];
        const int k = vh_block_variant_of(m, d);
        if (k < 0) continue; /* not the executor's: check_run refused it already */
        const vh_block_variant *v = &vh_block_variants[k];
        needs->images |= v->uses_images;
        needs->pixels |= v->uses_pixels;
        needs->rows |= v->uses_rows;
        needs->queries |= v->on_queries;
        if (v->gathers) { /* the images a frame's query set gathers */
            const vh_query_set_desc *q = &m->query_sets[m->slots[d->output].tower];
            const int per = (int)(q->rows / m->towers[m->slots[d->inputs[0]].tower].n_patches);
            if (per > needs->gathers) needs->gathers = per;
        }
        vh_status st = VH_OK;
        if (v->is_head) {
            needs->head = 1;
            needs->head_block = i;
            st = vh_block_executor_check_head(backend, batch, vh_block_tensor(d, VH_READOUT_VOCAB) != NULL, err,
                                              err_size);
        }
        if (v->is_planner) {
            needs->planner = 1;
            if (!vh_planner_batch_valid((const vh_planner_params *)d->params, batch))
                st = vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: a planner block needs the batch's "
                                     "plan noise and outputs (VH_BATCH_PLAN, strides that hold them) and each "
                                     "segment's feature among its hidden rows", backend);
        }
        if (v->llm_layer && (batch->options & VH_BATCH_SEGMENT_ADAPTERS))
            st = vh_block_executor_check_adapters(backend, batch, vh_block_lora_sets_held(d),
                                                  ((const vh_transformer_params *)d->params)->layer,
                                                  first_block + i, err, err_size);
        if (st) return st;
    }
    return VH_OK;
}

vh_status vh_block_executor_check_hidden(const char *backend, const char *what, int has_rows, const void *rows,
                                         uint32_t n_rows, uint32_t max_rows, char *err, size_t err_size)
{
    if (!has_rows || !rows || n_rows == 0 || n_rows > max_rows)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: %s of %u rows (max %u)", backend, what,
                               n_rows, max_rows);
    return VH_OK;
}

vh_status vh_block_executor_check_frames(const char *backend, const vh_executor_params *p, const vh_batch *b,
                                         int gathers, char *err, size_t err_size)
{
    const uint32_t max_frames = p->max_frames ? p->max_frames : 1, max_images = p->max_images ? p->max_images : 1;
    if (b->n_frames == 0 || b->n_frames > max_frames)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: batch of %u frames (1 .. %u) for blocks "
                               "on query sets", backend, b->n_frames, max_frames);
    if (gathers > 0 && (uint32_t)gathers > max_images / b->n_frames)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: %u frames of %d images' tokens (at most %u "
                               "images)", backend, b->n_frames, gathers, max_images);
    if (!(b->options & VH_BATCH_SLOT_INPUTS)) return VH_OK;
    const vh_model_desc *m = p->model;
    if (!b->slot_inputs || b->n_slot_inputs > m->n_slots)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: VH_BATCH_SLOT_INPUTS with %u slot inputs "
                               "for %u slots", backend, b->n_slot_inputs, m->n_slots);
    for (uint32_t s = 0; s < b->n_slot_inputs; s++)
        if (b->slot_inputs[s] && m->slots[s].kind != VH_SLOT_KIND_QUERIES)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: an input for slot %u ('%s'), a %s "
                                   "slot: only query sets are filled by the core", backend, s,
                                   m->slots[s].name ? m->slots[s].name : "?", vh_slot_kind_name(m->slots[s].kind));
    return VH_OK;
}
