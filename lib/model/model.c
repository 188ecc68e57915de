#include "model/model.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "family/family.h"
#include "util/file_read.h"

#define MAX_CONFIG_BYTES (64u << 20)

/* config.json's model_type, which names the family. */
static vh_status find_family(const char *text, size_t len, const char *path, const vh_family **family, vh_error *err)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return vh_error_set(err, VH_ERR_BAD_MODEL, "%s: not valid JSON (line %d: %s)", path, jerr.line, jerr.text);
    vh_status st = VH_OK;
    const json_t *type = json_object_get(root, "model_type");
    if (!json_is_object(root)) {
        st = vh_error_set(err, VH_ERR_BAD_MODEL, "%s: the file is not a JSON object", path);
    } else if (!json_is_string(type)) {
        st = vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: model_type is %s; it names the model family", path,
                          type ? "not a string" : "missing");
    } else if (!(*family = vh_family_find(json_string_value(type)))) {
        char known[256];
        vh_family_known_types(known, sizeof known);
        st = vh_error_set(err, VH_ERR_UNSUPPORTED, "%s: model_type is '%s'; the model types supported are %s", path,
                          json_string_value(type), known);
    }
    json_decref(root);
    return st;
}

static vh_status load(const char *dir, vh_model *m, vh_error *err)
{
    struct stat st_dir;
    if (stat(dir, &st_dir) != 0)
        return vh_error_set(err, VH_ERR_IO, "model folder %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st_dir.st_mode))
        return vh_error_set(err, VH_ERR_IO, "model path %s is not a folder (give the checkpoint folder)", dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text = NULL;
    size_t len = 0;
    vh_status st = vh_read_text_file(path, MAX_CONFIG_BYTES, &text, &len, err);
    const vh_family *family = NULL;
    if (!st) st = find_family(text, len, path, &family, err);
    if (!st) {
        m->family = family;
        st = family->load(m, dir, text, len, path, err);
    }
    free(text);
    return st;
}

vh_status vh_model_load(const char *dir, vh_model **model, vh_error *err)
{
    *model = NULL;
    vh_model *m = calloc(1, sizeof *m);
    if (!m) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory");
    vh_status st = load(dir, m, err);
    if (st) {
        vh_model_free(m);
        return st;
    }
    *model = m;
    return VH_OK;
}

void vh_model_free(vh_model *m)
{
    if (!m) return;
    if (m->family) m->family->unload(m);
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
