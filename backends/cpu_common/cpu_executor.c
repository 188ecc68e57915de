#include "cpu_executor.h"

#include "backend_error.h"
#include "backend_log.h"
#include "block_executor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* a * b * c zeroed floats, counting the bytes into *total; NULL (and no count) on overflow. The
 * pages are written now: calloc's lazily mapped zeros would fault on first use, inside a frame
 * (the KV cache's first write to each sequence slot cost a Llama-2-7B block ~2 ms a prefill). */
static float *alloc_floats(uint64_t a, uint64_t b, uint64_t c, uint64_t *total)
{
    uint64_t n;
    if (__builtin_mul_overflow(a, b, &n) || __builtin_mul_overflow(n, c, &n) || n > (SIZE_MAX / sizeof(float)))
        return NULL;
    if (n == 0) n = 1;
    float *p = malloc((size_t)n * sizeof(float));
    if (!p) return NULL;
    memset(p, 0, (size_t)n * sizeof(float));
    *total += n * sizeof(float);
    return p;
}

/* An LLM block whose q|k|v and gate|up the backend fuses: it offers fusing, and no LoRA adapter of
 * either set is kept apart (those add to q, k, v one by one, from the normed rows the fused GEMM
 * never writes out). Biases fuse: the q|k|v GEMM's epilogue adds them. */
static int fusable(const vh_executor *e, const cpu_block *cb)
{
    if (!e->ops->prepare_fused || !e->ops->linear_fused || !cb->variant->llm_layer) return 0;
    return cb->lora_sets == 0;
}

/* A fused block's q|k|v biases as one vector in the fused matrix's column order (a missing one
 * is zeros); NULL (no vector) for a block without biases. */
static vh_status stack_qkv_bias(vh_executor *e, cpu_block *cb, char *err, size_t err_size)
{
    const vh_llm_desc *l = &e->model->llm;
    const uint64_t q_dim = (uint64_t)l->n_heads * l->head_dim, kv_dim = (uint64_t)l->n_kv_heads * l->head_dim;
    if (!cb->vec[VH_TF_Q_B] && !cb->vec[VH_TF_K_B] && !cb->vec[VH_TF_V_B]) return VH_OK;
    cb->qkv_bias = alloc_floats(q_dim + 2 * kv_dim, 1, 1, &e->weight_bytes);
    if (!cb->qkv_bias)
        return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "%s: out of memory for biases", e->ops->backend);
    const uint64_t offset[3] = {0, q_dim, q_dim + kv_dim}, width[3] = {q_dim, kv_dim, kv_dim};
    for (int i = 0; i < 3; i++)
        if (cb->vec[VH_TF_Q_B + i])
            memcpy(cb->qkv_bias + offset[i], cb->vec[VH_TF_Q_B + i], sizeof(float) * width[i]);
    return VH_OK;
}

/* The block's tensors by role, its kind's entry and parameters; then its matrices as 2-D [out, in]
 * views (the patch embedding's [D, 3, P, P] convolution weight is a [D, 3 P P] matrix) prepared by
 * the backend, and its 1-D tensors in fp32. The descriptor was checked (vh_block_check). */
static vh_status prepare_block(vh_executor *e, cpu_block *cb, const vh_block_desc *d, char *err, size_t err_size)
{
    const int index = vh_block_variant_of(e->model, d);
    cb->desc = d;
    cb->variant = &vh_block_variants[index];
    cb->kind = &cpu_kinds[index];
    cb->state = d->state;
    vh_block_variant_read_params(e->model, d, &cb->info);
    if (cb->variant->is_planner) {
        const vh_planner_params *pp = &cb->info.plan;
        if (!vh_planner_params_valid(pp, e->model->llm.hidden))
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: planner of feature %u (the LLM's "
                                   "hidden size is %u), %u GRU layers of %u", e->ops->backend, pp->feature_dim,
                                   e->model->llm.hidden, pp->gru_layers, pp->gru_hidden);
    }
    if (cb->info.tower >= e->model->n_towers && cb->variant->in_tower)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: block of tower %u; the model has %u",
                               e->ops->backend, cb->info.tower, e->model->n_towers);
    if (cb->variant->has_state && d->state == VH_NO_STATE)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: a %s block without a state slot",
                               e->ops->backend, vh_block_kind_name(d->kind));
    for (uint32_t i = 0; i < d->n_tensors; i++) cb->t[d->tensors[i].role] = d->tensors[i];
    if (cb->variant->llm_layer) cb->lora_sets = vh_block_lora_sets_held(d);
    const int fuse = fusable(e, cb);
    for (uint32_t r = 0; r < CPU_MAX_ROLES; r++) {
        const vh_tensor_view *t = &cb->t[r];
        if (!t->data) continue;
        if ((cb->kind->matrix_roles >> r & 1u) && t->ndim >= 2) {
            cb->mat[r] = *t;
            cb->mat[r].ndim = 2;
            for (uint32_t k = 2; k < t->ndim; k++) cb->mat[r].shape[1] *= t->shape[k];
            const int in_fused = fuse && (r == VH_TF_Q_W || r == VH_TF_K_W || r == VH_TF_V_W || r == VH_TF_GATE_W ||
                                          r == VH_TF_UP_W);
            vh_status st = in_fused ? VH_OK : e->ops->prepare(e->linear, &cb->mat[r], &cb->prepared[r],
                                                              &e->weight_bytes, err, err_size);
            if (st) return st;
        }
        if (t->ndim != 1) continue;
        cb->vec[r] = alloc_floats((uint64_t)t->shape[0], 1, 1, &e->weight_bytes);
        if (!cb->vec[r]) return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "out of memory converting %s",
                                                t->name);
        vhk_convert_to_f32(t->data, t->dtype, cb->vec[r], t->shape[0]);
    }
    if (!fuse) return VH_OK;
    vh_status bias_st = stack_qkv_bias(e, cb, err, err_size);
    if (bias_st) return bias_st;
    const vh_tensor_view *qkv[3] = {&cb->mat[VH_TF_Q_W], &cb->mat[VH_TF_K_W], &cb->mat[VH_TF_V_W]};
    const vh_tensor_view *gate_up[2] = {&cb->mat[VH_TF_GATE_W], &cb->mat[VH_TF_UP_W]};
    vh_status st = e->ops->prepare_fused(e->linear, qkv, 3, CPU_FUSE_STACK, &cb->fused_qkv, &e->weight_bytes, err,
                                         err_size);
    if (!st) st = e->ops->prepare_fused(e->linear, gate_up, 2, CPU_FUSE_GATED, &cb->fused_gate_up, &e->weight_bytes,
                                        err, err_size);
    return st;
}

void cpu_linear(vh_executor *e, const cpu_block *b, int tensor, const float *x, int64_t x_stride, int64_t rows,
                const float *bias, float *y, int64_t y_stride)
{
    if (e->failed) return;
    const vh_tensor_view *w = &b->mat[tensor];
    e->failed = e->ops->linear(e->linear, x, x_stride, rows, w->shape[1], w, b->prepared[tensor], bias, y, y_stride,
                               e->failure, sizeof e->failure);
}

void cpu_linear_fused(vh_executor *e, const cpu_linear_call *call)
{
    if (e->failed) return;
    e->failed = e->ops->linear_fused(e->linear, call, e->failure, sizeof e->failure);
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* The largest LoRA rank of the LLM blocks held, either set (1 without adapters: a small buffer
 * anyway). */
static uint64_t max_lora_rank(const vh_executor *e)
{
    uint64_t r = 1;
    for (uint32_t i = 0; i < e->params.n_blocks; i++)
        for (uint32_t set = 0; e->blocks[i].variant->llm_layer && set < VH_BLOCK_VARIANT_LORA_SETS; set++)
            for (uint32_t proj = 0; proj < 4; proj++) {
                const vh_tensor_view *A = &e->blocks[i].t[vh_tf_lora_role(set, proj)];
                if (A->data && (uint64_t)A->shape[0] > r) r = (uint64_t)A->shape[0];
            }
    return r;
}

/* Whether some held LLM block runs fused (q|k|v in one buffer) or some unfused (q, k, v, up and
 * the normed rows apart): each path's buffers only where a block takes it. */
static int has_llm_block(const vh_executor *e, int fused)
{
    for (uint32_t i = 0; i < e->params.n_blocks; i++)
        if (e->blocks[i].variant->llm_layer && !e->blocks[i].fused_qkv == !fused) return 1;
    return 0;
}

/* Buffers for the block kinds this executor holds. */
static vh_status allocate_buffers(vh_executor *e, char *err, size_t err_size)
{
    const vh_executor_params *p = &e->params;
    const vh_model_desc *m = e->model;
    const vh_block_variant held = vh_block_variants_held(m, p->first_block, p->n_blocks);
    const int has_vit = held.in_tower, has_projector = held.projects, has_llm = held.uses_rows;
    for (uint32_t i = 0; i < p->n_blocks; i++) {
        if (e->blocks[i].variant->has_state) {
            if (e->n_layers_held == 0) e->first_state = e->blocks[i].state;
            e->n_layers_held++;
        }
    }
    uint64_t *w = &e->work_bytes;
    const uint64_t images = p->max_images ? p->max_images : 1;
    if (has_vit) {
        uint64_t T = 0, D = 0, H = 0, PP3 = 0, NP = 0;
        for (uint32_t t = 0; t < m->n_towers; t++) {
            const vh_vit_desc *v = &m->towers[t];
            uint64_t tokens = (uint64_t)v->n_prefix + v->n_patches;
            e->vit_tokens[t] = alloc_floats(images, tokens, v->embed_dim, w);
            if (!e->vit_tokens[t]) goto oom;
            T = max_u64(T, tokens);
            D = max_u64(D, v->embed_dim);
            H = max_u64(H, v->mlp_hidden);
            PP3 = max_u64(PP3, 3ull * v->patch_size * v->patch_size);
            NP = max_u64(NP, v->n_patches);
        }
        if (!(e->vit.patches = alloc_floats(NP, PP3, 1, w)) || !(e->vit.norm = alloc_floats(T, D, 1, w)) ||
            !(e->vit.qkv = alloc_floats(T, 3 * D, 1, w)) || !(e->vit.attn = alloc_floats(T, D, 1, w)) ||
            !(e->vit.proj = alloc_floats(T, D, 1, w)) || !(e->vit.mlp = alloc_floats(T, H, 1, w)))
            goto oom;
    }
    if (has_projector || has_llm) {
        e->patch_embeds = alloc_floats(images, m->n_image_tokens, m->llm.hidden, w);
        if (!e->patch_embeds) goto oom;
    }
    if (has_projector) {
        if (!(e->proj_in = alloc_floats(m->n_image_tokens, m->vision_dim, 1, w)) ||
            !(e->proj_hidden = alloc_floats(m->n_image_tokens, m->projector_hidden, 1, w)) ||
            !(e->proj_out = alloc_floats(m->n_image_tokens, m->llm.hidden, 1, w)))
            goto oom;
    }
    if (has_llm) {
        const vh_llm_desc *l = &m->llm;
        /* (the planners' scratch follows, once max_segments is known) */
        const uint64_t R = p->max_rows, q_dim = (uint64_t)l->n_heads * l->head_dim;
        const uint64_t kv_dim = (uint64_t)l->n_kv_heads * l->head_dim;
        e->max_segments = p->max_sequences > p->max_rows ? p->max_rows : p->max_sequences;
        if (e->max_segments == 0) e->max_segments = 1;
        llm_scratch *s = &e->llm;
        const int unfused = has_llm_block(e, 0), fused = has_llm_block(e, 1);
        if (!(s->x = alloc_floats(R, l->hidden, 1, w)) || !(s->attn = alloc_floats(R, q_dim, 1, w)) ||
            !(s->gate = alloc_floats(R, l->intermediate, 1, w)) ||
            (unfused && (!(s->norm = alloc_floats(R, l->hidden, 1, w)) || !(s->q = alloc_floats(R, q_dim, 1, w)) ||
                         !(s->k = alloc_floats(R, kv_dim, 1, w)) || !(s->v = alloc_floats(R, kv_dim, 1, w)) ||
                         !(s->up = alloc_floats(R, l->intermediate, 1, w)))) ||
            (fused && !(s->qkv = alloc_floats(R, q_dim + 2 * kv_dim, 1, w))) ||
            !(s->head_in = alloc_floats(e->max_segments, l->hidden, 1, w)) ||
            !(s->lora_a = alloc_floats(R, max_lora_rank(e), 1, w)) ||
            !(s->lora_b = alloc_floats(R, q_dim > l->hidden ? q_dim : l->hidden, 1, w)) ||
            !(s->logits = alloc_floats(e->max_segments, l->vocab, 1, w)))
            goto oom;
        s->positions = calloc(R ? R : 1, sizeof *s->positions);
        if (!s->positions) goto oom;
        if (e->n_layers_held) {
            uint64_t per_layer = (uint64_t)p->max_sequences * p->max_context;
            e->k_cache = alloc_floats(e->n_layers_held, per_layer, kv_dim, &e->cache_bytes);
            e->v_cache = alloc_floats(e->n_layers_held, per_layer, kv_dim, &e->cache_bytes);
            if (!e->k_cache || !e->v_cache) goto oom;
        }
    }
    const uint64_t frames = p->max_frames ? p->max_frames : 1;
    for (uint32_t i = 0; i < p->n_blocks; i++) {
        const vh_block_desc *d = e->blocks[i].desc;
        if (!e->blocks[i].variant->on_queries) continue;
        if (!e->query_data && !(e->query_data = calloc(m->n_slots, sizeof *e->query_data))) goto oom;
        for (uint32_t j = 0; j <= d->n_inputs; j++) {
            const uint32_t slot = j < d->n_inputs ? d->inputs[j] : d->output;
            if (m->slots[slot].kind != VH_SLOT_KIND_QUERIES || e->query_data[slot]) continue;
            const vh_query_set_desc qs = cpu_query_set(e, slot);
            if (!(e->query_data[slot] = alloc_floats(frames, qs.rows, qs.width, w))) goto oom;
        }
    }
    for (uint32_t i = 0; i < p->n_blocks; i++) {
        cpu_block *b = &e->blocks[i];
        if (b->kind->scratch_floats && !(b->scratch = alloc_floats(b->kind->scratch_floats(e, b), 1, 1, w))) goto oom;
    }
    return VH_OK;
oom:
    return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "%s: out of memory for activations and KV cache "
                "(%llu bytes allocated so far)", e->ops->backend, (unsigned long long)(e->work_bytes + e->cache_bytes));
}

vh_status cpu_executor_create(const vh_executor_params *params, const cpu_linear_ops *ops, vh_executor **out,
                              char *err, size_t err_size)
{
    *out = NULL;
    vh_executor_params known; /* the fields both sides know */
    vh_status st = vh_block_executor_read_params(ops->backend, params, &known, err, err_size);
    if (st) return st;
    params = &known;
    const vh_model_desc *m = params->model;
    if ((st = vh_block_executor_check_params(ops->backend, params, cpu_device_count(), err, err_size))) return st;
    /* (roles are below each kind's n_roles, all below CPU_MAX_ROLES) */
    if ((st = vh_block_executor_check_blocks(ops->backend, vh_block_variant_support, VH_N_BLOCK_VARIANTS, params,
                                               err, err_size))) return st;
    vh_executor *e = calloc(1, sizeof *e);
    if (!e) return vh_backend_fail(err, err_size, VH_ERR_OUT_OF_MEMORY, "%s: out of memory", ops->backend);
    e->params = *params;
    e->model = m;
    e->ops = ops;
    cpu_profile_init(&e->profile);
    st = VH_ERR_OUT_OF_MEMORY;
    e->pool = ops->create_pool(params->n_threads);
    if (!e->pool) {
        vh_backend_fail(err, err_size, st, "%s: cannot start %d threads", ops->backend, params->n_threads);
        goto fail;
    }
    int64_t max_in = 1;
    for (uint32_t i = 0; i < params->n_blocks; i++) {
        const vh_block_desc *d = &m->blocks[params->first_block + i];
        for (uint32_t t = 0; t < d->n_tensors; t++)
            if (d->tensors[t].data && d->tensors[t].ndim >= 2 && d->tensors[t].shape[1] > max_in)
                max_in = d->tensors[t].shape[1] * (d->tensors[t].ndim == 4 ? d->tensors[t].shape[2] * d->tensors[t].shape[3] : 1);
    }
    e->blocks = calloc(params->n_blocks, sizeof *e->blocks);
    if (!e->blocks) {
        vh_backend_fail(err, err_size, st, "%s: out of memory", ops->backend);
        goto fail;
    }
    if (!(e->linear = ops->create(e->pool, params, max_in, err, err_size))) {
        st = VH_ERR_BACKEND_FAILED;
        goto fail;
    }
    uint64_t total = 0, done = 0; /* progress: the bytes of the blocks' tensors */
    for (uint32_t i = 0; i < params->n_blocks; i++) total += vh_block_tensor_bytes(&m->blocks[params->first_block + i]);
    for (uint32_t i = 0; i < params->n_blocks; i++) {
        const vh_block_desc *d = &m->blocks[params->first_block + i];
        if ((st = prepare_block(e, &e->blocks[i], d, err, err_size))) goto fail;
        done += vh_block_tensor_bytes(d);
        if (vh_executor_progress(params, done, total)) {
            st = vh_backend_fail(err, err_size, VH_ERR_CANCELLED, "%s: cancelled after block %u of %u", ops->backend,
                                 i + 1, params->n_blocks);
            goto fail;
        }
    }
    if (ops->finish_load) ops->finish_load(e->linear);
    if ((st = allocate_buffers(e, err, err_size))) goto fail;
    vh_backend_log(params, VH_LOG_INFO, "%s: blocks %u..%u, %d threads", ops->backend, params->first_block,
                   params->first_block + params->n_blocks - 1, vh_thread_pool_size(e->pool));
    *out = e;
    return VH_OK;
fail:
    cpu_executor_destroy(e);
    return st;
}

void cpu_executor_destroy(vh_executor *e)
{
    if (!e) return;
    cpu_profile_report(&e->profile, &e->params, e->ops->backend);
    if (e->blocks) {
        for (uint32_t i = 0; i < e->params.n_blocks; i++) {
            free(e->blocks[i].scratch);
            for (uint32_t t = 0; t < CPU_MAX_ROLES; t++) {
                free(e->blocks[i].vec[t]);
                if (e->blocks[i].prepared[t]) e->ops->release(e->linear, e->blocks[i].prepared[t]);
            }
            if (e->blocks[i].fused_qkv) e->ops->release(e->linear, e->blocks[i].fused_qkv);
            if (e->blocks[i].fused_gate_up) e->ops->release(e->linear, e->blocks[i].fused_gate_up);
            free(e->blocks[i].qkv_bias);
        }
        free(e->blocks);
    }
    for (uint32_t t = 0; t < VH_MAX_TOWERS; t++) free(e->vit_tokens[t]);
    free(e->patch_embeds);
    free(e->vit.patches);
    free(e->vit.norm);
    free(e->vit.qkv);
    free(e->vit.attn);
    free(e->vit.proj);
    free(e->vit.mlp);
    free(e->proj_in);
    free(e->proj_hidden);
    free(e->proj_out);
    free(e->llm.x);
    free(e->llm.norm);
    free(e->llm.q);
    free(e->llm.k);
    free(e->llm.v);
    free(e->llm.attn);
    free(e->llm.gate);
    free(e->llm.up);
    free(e->llm.qkv);
    free(e->llm.positions);
    free(e->llm.head_in);
    free(e->llm.lora_a);
    free(e->llm.lora_b);
    free(e->llm.logits);
    free(e->k_cache);
    free(e->v_cache);
    for (uint32_t s = 0; e->query_data && s < e->model->n_slots; s++) free(e->query_data[s]);
    free(e->query_data);
    if (e->linear) e->ops->destroy(e->linear);
    vh_thread_pool_destroy(e->pool);
    free(e);
}

/* The rows' RoPE positions, for every run that holds LLM blocks: a stage that starts after the
 * embedding (the hybrid split) gets its rows' hidden states from the previous stage, not their
 * positions. */
void cpu_llm_positions(vh_executor *e, const vh_batch *batch)
{
    uint32_t row = 0;
    for (uint32_t s = 0; s < batch->n_segments; s++) {
        const vh_segment *seg = &batch->segments[s];
        for (uint32_t r = 0; r < seg->n_rows; r++, row++)
            e->llm.positions[row] = (int32_t)(seg->position + r) + seg->rope_delta;
    }
}

/* Every index and count a batch carries is checked here, so the block code can trust them. */
static vh_status validate_batch(const vh_executor *e, const vh_batch *b, int needs_images, int needs_rows,
                                char *err, size_t err_size)
{
    const vh_executor_params *p = &e->params;
    vh_status st;
    if (needs_images && (st = vh_block_executor_check_images(e->ops->backend, p, b, err, err_size))) return st;
    if (!needs_rows) return VH_OK;
    if (b->n_rows == 0 || b->n_rows > p->max_rows || !b->tokens || b->n_segments == 0 || !b->segments ||
        b->n_segments > e->max_segments)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: batch of %u rows in %u segments exceeds "
                    "the executor's limits (%u rows, %u segments)", e->ops->backend, b->n_rows, b->n_segments, p->max_rows,
                    e->max_segments);
    uint64_t rows = 0;
    for (uint32_t s = 0; s < b->n_segments; s++) {
        const vh_segment *seg = &b->segments[s];
        uint32_t image_rows = 0;
        if (seg->n_rows == 0 || seg->sequence >= p->max_sequences ||
            (uint64_t)seg->position + seg->n_rows > p->max_context || (int64_t)seg->position + seg->rope_delta < 0)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: segment %u (sequence %u, rows %u at "
                        "position %u) is outside the KV cache (%u sequences x %u positions)", e->ops->backend, s, seg->sequence,
                        seg->n_rows, seg->position, p->max_sequences, p->max_context);
        for (uint32_t r = 0; r < seg->n_rows; r++) {
            int32_t tok = b->tokens[rows + r];
            if (tok == VH_TOKEN_IMAGE) image_rows++;
            else if (tok < 0 || (uint32_t)tok >= e->model->llm.vocab)
                return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: token %d out of the vocabulary", e->ops->backend, tok);
        }
        const int own_embeds = (b->options & VH_BATCH_SEGMENT_EMBEDS) && seg->embeds;
        if (image_rows && !own_embeds &&
            (seg->image < 0 || (uint32_t)seg->image >= (p->max_images ? p->max_images : 1) ||
             image_rows > e->model->n_image_tokens))
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: segment %u has %u image rows for image "
                        "%d", e->ops->backend, s, image_rows, seg->image);
        rows += seg->n_rows;
    }
    if (rows != b->n_rows)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: segments cover %llu rows, batch has %u", e->ops->backend,
                    (unsigned long long)rows, b->n_rows);
    if ((b->options & VH_BATCH_HIDDEN_ROWS) && (b->n_hidden_rows > b->n_rows || !vh_batch_hidden_rows_valid(b)))
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: %u hidden rows asked of a batch of %u rows "
                               "(at most that many, each inside the batch)", e->ops->backend, b->n_hidden_rows,
                               b->n_rows);
    return VH_OK;
}

vh_status cpu_executor_run(vh_executor *e, const vh_batch *batch, uint32_t first_block, uint32_t n_blocks,
                           char *err, size_t err_size)
{
    const vh_executor_params *p = &e->params;
    vh_status st = vh_block_executor_check_run(e->ops->backend, p, batch, first_block, n_blocks, err, err_size);
    if (st) return st;
    const cpu_block *blocks = &e->blocks[first_block - p->first_block];
    vh_block_run_needs needs;
    if ((st = vh_block_executor_check_run_blocks(e->ops->backend, e->model, batch, first_block, n_blocks, &needs, err,
                                                 err_size)) ||
        (st = validate_batch(e, batch, needs.images, needs.rows, err, err_size)))
        return st;
    const int needs_rows = needs.rows;
    if (needs.queries &&
        (st = vh_block_executor_check_frames(e->ops->backend, p, batch, needs.gathers, err, err_size)))
        return st;
    /* the query sets the core fills, where a held block reads them */
    for (uint32_t s = 0; (batch->options & VH_BATCH_SLOT_INPUTS) && s < batch->n_slot_inputs; s++)
        if (batch->slot_inputs[s] && e->query_data && e->query_data[s]) {
            const vh_query_set_desc qs = cpu_query_set(e, s);
            memcpy(e->query_data[s], batch->slot_inputs[s], sizeof(float) * (size_t)batch->n_frames * qs.rows * qs.width);
        }

    e->failed = VH_OK;
    /* rows bound by bind_hidden: this run works in the core's memory */
    float *own_x = e->llm.x;
    const int bound = needs_rows && e->bound_x;
    if (bound) e->llm.x = e->bound_x;
    e->bound_x = NULL;
    if (needs_rows) cpu_llm_positions(e, batch);
    vh_thread_pool_enter(e->pool); /* this thread is the team's thread 0 for the pass */
    for (uint32_t i = 0; i < n_blocks && !e->failed; i++) {
        const cpu_block *b = &blocks[i];
        b->kind->run(e, b, batch);
    }
    vh_thread_pool_leave(e->pool);
    e->llm.x = own_x;
    if (e->failed) return vh_backend_fail(err, err_size, e->failed, "%s", e->failure);
    if (needs_rows) {
        e->last_rows = batch->n_rows;
        e->last_run_bound = bound;
    }
    return VH_OK;
}

vh_status cpu_read_slot(vh_executor *e, uint32_t slot, uint32_t image, float *dst, size_t n_floats, char *err,
                        size_t err_size)
{
    const vh_model_desc *m = e->model;
    const uint32_t max_images = e->params.max_images ? e->params.max_images : 1;
    if (dst && slot < m->n_slots && m->slots[slot].kind == VH_SLOT_KIND_QUERIES) {
        const uint32_t max_frames = e->params.max_frames ? e->params.max_frames : 1;
        if (!e->query_data || !e->query_data[slot] || image >= max_frames)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: read_slot: slot %u ('%s') frame %u: "
                                   "not a query set this executor holds (frames < %u)", e->ops->backend, slot,
                                   m->slots[slot].name ? m->slots[slot].name : "?", image, max_frames);
        const vh_query_set_desc qs = cpu_query_set(e, slot);
        if (n_floats != (size_t)qs.rows * qs.width)
            return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: read_slot: slot '%s' holds %u x %u "
                                   "floats a frame, %zu asked", e->ops->backend, m->slots[slot].name, qs.rows,
                                   qs.width, n_floats);
        memcpy(dst, cpu_query_rows(e, slot, image), sizeof(float) * n_floats);
        return VH_OK;
    }
    if (!dst || slot >= m->n_slots || m->slots[slot].kind != VH_SLOT_KIND_TOKENS ||
        m->slots[slot].tower >= m->n_towers || !e->vit_tokens[m->slots[slot].tower] || image >= max_images)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: read_slot: slot %u image %u is not a "
                               "tower's tokens this executor holds (images < %u)", e->ops->backend, slot, image,
                               max_images);
    const vh_vit_desc *v = &m->towers[m->slots[slot].tower];
    const size_t n = (size_t)(v->n_prefix + v->n_patches) * v->embed_dim;
    if (n_floats != n)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: read_slot: slot '%s' holds %zu floats "
                               "an image, %zu asked", e->ops->backend, m->slots[slot].name, n, n_floats);
    memcpy(dst, cpu_tower_tokens(e, m->slots[slot].tower, image), sizeof(float) * n);
    return VH_OK;
}

vh_status cpu_bind_hidden(vh_executor *e, float *rows, uint32_t n_rows, char *err, size_t err_size)
{
    vh_status st = vh_block_executor_check_hidden(e->ops->backend, "bind_hidden", e->llm.x != NULL, rows, n_rows,
                                                  e->params.max_rows, err, err_size);
    if (st) return st;
    e->bound_x = rows;
    return VH_OK;
}

/* Hidden states cross between stages once per pass: a prefill's rows are megabytes, so they are
 * copied by the whole pool (one thread's memcpy would take most of a millisecond). */
typedef struct copy_job {
    float *dst;
    const float *src;
} copy_job;

static void copy_range(void *ctx, int64_t begin, int64_t end, int thread_index)
{
    (void)thread_index;
    const copy_job *c = ctx;
    memcpy(c->dst + begin, c->src + begin, sizeof(float) * (size_t)(end - begin));
}

static void copy_rows(vh_executor *e, float *dst, const float *src, uint32_t n_rows)
{
    const int64_t n = (int64_t)n_rows * e->model->llm.hidden;
    copy_job c = {dst, src};
    if (n < 65536) copy_range(&c, 0, n, 0); /* a decode row: not worth waking the pool */
    else vh_parallel_for(e->pool, n, 16384, copy_range, &c);
}

vh_status cpu_read_hidden(vh_executor *e, float *dst, uint32_t n_rows, char *err, size_t err_size)
{
    vh_status st = vh_block_executor_check_hidden(e->ops->backend, "read_hidden", e->llm.x != NULL, dst, n_rows,
                                                  e->params.max_rows, err, err_size);
    if (st) return st;
    if (e->last_run_bound)
        return vh_backend_fail(err, err_size, VH_ERR_INVALID_ARGUMENT, "%s: read_hidden after a run on bound rows "
                               "(its output is in the bound memory)", e->ops->backend);
    copy_rows(e, dst, e->llm.x, n_rows);
    return VH_OK;
}

vh_status cpu_write_hidden(vh_executor *e, const float *src, uint32_t n_rows, char *err, size_t err_size)
{
    vh_status st = vh_block_executor_check_hidden(e->ops->backend, "write_hidden", e->llm.x != NULL, src, n_rows,
                                                  e->params.max_rows, err, err_size);
    if (st) return st;
    e->bound_x = NULL;
    copy_rows(e, e->llm.x, src, n_rows);
    return VH_OK;
}

vh_status cpu_memory(vh_executor *e, vh_memory_report *report)
{
    if (!e || !report || report->struct_size < sizeof *report) return VH_ERR_INVALID_ARGUMENT;
    report->weight_bytes = e->weight_bytes;
    report->cache_bytes = e->cache_bytes;
    report->work_bytes = e->work_bytes;
    return VH_OK;
}

uint32_t cpu_device_count(void)
{
    return 1;
}

static void read_cpu_model_name(char *buf, size_t size)
{
    snprintf(buf, size, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        char *colon = strchr(line, ':');
        if (!colon) break;
        colon += 1 + (colon[1] == ' ');
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(buf, size, "%s", colon);
        break;
    }
    fclose(f);
}

vh_status cpu_device_info(uint32_t device, vh_device_info *info)
{
    if (device != 0 || !info || info->struct_size < sizeof *info) return VH_ERR_INVALID_ARGUMENT;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    info->kind = VH_DEVICE_CPU;
    read_cpu_model_name(info->name, sizeof info->name);
    long pages = sysconf(_SC_PHYS_PAGES), avail = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) info->total_memory = (uint64_t)pages * (uint64_t)page;
    if (avail > 0 && page > 0) info->free_memory = (uint64_t)avail * (uint64_t)page;
    return VH_OK;
}
