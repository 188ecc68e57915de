#include "family/model_load.h"

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
    vh_model_release(m);
}
