/*
 * Loading a checkpoint folder through the family that claims it: config.json's model_type picks
 * the family in the table (family_table.c), which fills the generic model (lib/model/model.h).
 */
#ifndef VH_FAMILY_MODEL_LOAD_H
#define VH_FAMILY_MODEL_LOAD_H

#include "model/model.h"

/* Read dir/config.json, find the family that claims its model_type and let it load the folder.
 * On failure *model is NULL and err names the file and tensor. */
vh_status vh_model_load(const char *dir, vh_model **model, vh_error *err);
/* The family's part (its unload), then the generic model (vh_model_release). NULL-safe. */
void vh_model_free(vh_model *model);

#endif
