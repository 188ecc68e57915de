#include "model/model.h"

#include <stdlib.h>
#include <string.h>

void vh_model_release(vh_model *m)
{
    if (!m) return;
    free(m->blocks);
    free(m->block_data);
    vh_checkpoint_close(m->checkpoint);
    free(m);
}

vh_status vh_model_alloc_blocks(vh_model *m, uint32_t n_blocks, vh_error *err)
{
    m->blocks = calloc(n_blocks, sizeof *m->blocks);
    m->block_data = calloc(n_blocks, sizeof *m->block_data);
    if (!m->blocks || !m->block_data) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (%u blocks)", n_blocks);
    m->desc.struct_size = sizeof m->desc;
    m->desc.blocks = m->blocks;
    m->desc.n_blocks = n_blocks;
    return VH_OK;
}

vh_model_block *vh_model_begin_block(vh_model *m, uint32_t index, uint32_t kind, uint32_t input_slot,
                                     uint32_t output_slot, uint32_t state_slot)
{
    vh_block_desc *d = &m->blocks[index];
    vh_model_block *b = &m->block_data[index];
    *d = (vh_block_desc){.struct_size = sizeof *d, .kind = kind, .params = &b->params.none,
                         .input_slot = input_slot, .output_slot = output_slot, .state_slot = state_slot};
    memset(b, 0, sizeof *b);
    b->params.none.struct_size = kind == VH_BLOCK_VIT_EMBED || kind == VH_BLOCK_VIT ? sizeof(vh_vit_params)
                                 : kind == VH_BLOCK_LLM ? sizeof(vh_llm_params)
                                 : kind == VH_BLOCK_VAE_GRU_PLANNER ? sizeof(vh_planner_params)
                                                                    : sizeof(vh_block_params);
    return b;
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
