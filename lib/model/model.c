#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vh_model_release(vh_model *m)
{
    if (!m) return;
    free(m->blocks);
    free(m->block_data);
    free(m->states);
    free(m->state_names);
    vh_checkpoint_close(m->checkpoint);
    free(m);
}

vh_status vh_model_alloc_blocks(vh_model *m, uint32_t n_blocks, vh_error *err)
{
    m->blocks = calloc(n_blocks, sizeof *m->blocks);
    m->block_data = calloc(n_blocks, sizeof *m->block_data);
    m->states = calloc(n_blocks, sizeof *m->states);
    m->state_names = calloc(n_blocks, sizeof *m->state_names);
    if (!m->blocks || !m->block_data || !m->states || !m->state_names) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (%u blocks)", n_blocks);
    m->desc.struct_size = sizeof m->desc;
    m->desc.blocks = m->blocks;
    m->desc.n_blocks = n_blocks;
    m->desc.slots = m->slots;
    m->desc.states = m->states;
    return VH_OK;
}

uint32_t vh_model_slot(vh_model *m, const char *name, uint32_t kind, uint32_t tower)
{
    for (uint32_t i = 0; i < m->desc.n_slots; i++)
        if (strcmp(m->slots[i].name, name) == 0) return i;
    if (m->desc.n_slots == VH_MODEL_MAX_SLOTS) return VH_MODEL_MAX_SLOTS; /* a family bug: blocks refuse it */
    m->slots[m->desc.n_slots] = (vh_slot_desc){.name = name, .kind = kind, .tower = tower};
    return m->desc.n_slots++;
}

uint32_t vh_model_query_slot(vh_model *m, const char *name, uint32_t rows, uint32_t width)
{
    for (uint32_t i = 0; i < m->desc.n_slots; i++)
        if (strcmp(m->slots[i].name, name) == 0) {
            const vh_query_set_desc *q = &m->query_sets[m->slots[i].tower];
            return m->slots[i].kind == VH_SLOT_KIND_QUERIES && q->rows == rows && q->width == width ? i
                                                                                                   : VH_MODEL_MAX_SLOTS;
        }
    if (m->desc.n_slots == VH_MODEL_MAX_SLOTS) return VH_MODEL_MAX_SLOTS;
    const uint32_t set = m->desc.n_query_sets++;
    m->query_sets[set] = (vh_query_set_desc){rows, width};
    m->desc.query_sets = m->query_sets;
    m->slots[m->desc.n_slots] = (vh_slot_desc){.name = name, .kind = VH_SLOT_KIND_QUERIES, .tower = set};
    return m->desc.n_slots++;
}

uint32_t vh_model_kv_state(vh_model *m, const char *prefix, uint32_t layer)
{
    const uint32_t i = m->desc.n_states++;
    snprintf(m->state_names[i], sizeof m->state_names[i], "%s%u.kv", prefix, layer);
    m->states[i] = (vh_state_desc){.name = m->state_names[i], .kind = VH_STATE_KV_CACHE};
    return i;
}

vh_model_block *vh_model_begin_block(vh_model *m, uint32_t index, uint32_t kind, uint32_t input, uint32_t output,
                                     uint32_t state)
{
    vh_block_desc *d = &m->blocks[index];
    vh_model_block *b = &m->block_data[index];
    *d = (vh_block_desc){.struct_size = sizeof *d, .kind = kind, .params = &b->params.none, .n_inputs = 1,
                         .inputs = {input}, .output = output, .state = state};
    memset(b, 0, sizeof *b);
    b->params.none.struct_size = kind == VH_BLOCK_PATCH_EMBED ? sizeof(vh_patch_embed_params)
                                 : kind == VH_BLOCK_TRANSFORMER ? sizeof(vh_transformer_params)
                                 : kind == VH_BLOCK_MLP_CHAIN ? sizeof(vh_chain_params)
                                 : kind == VH_BLOCK_VAE_GRU_PLANNER ? sizeof(vh_planner_params)
                                 : kind == VH_BLOCK_MODULATED_NORM ? sizeof(vh_mln_params)
                                                                    : sizeof(vh_block_params);
    return b;
}

void vh_model_add_input(vh_model *m, uint32_t index, uint32_t slot)
{
    vh_block_desc *d = &m->blocks[index];
    if (d->n_inputs < VH_BLOCK_MAX_INPUTS) d->inputs[d->n_inputs++] = slot;
}

void vh_model_finish_blocks(vh_model *m)
{
    for (uint32_t i = 0; i < m->desc.n_blocks; i++) {
        vh_model_block *b = &m->block_data[i];
        uint32_t n = 0;
        for (uint32_t role = 0; role < VH_MODEL_MAX_ROLES; role++) {
            if (!b->by_role[role].data) continue;
            b->listed[n] = b->by_role[role];
            b->listed[n++].role = role;
        }
        m->blocks[i].tensors = b->listed;
        m->blocks[i].n_tensors = n;
    }
}
