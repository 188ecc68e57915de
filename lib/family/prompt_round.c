/*
 * A round of a frame's prompt as a family reports it (family.h's prompt_rounds).
 */
#include "family/family.h"

#include <stdlib.h>
#include <string.h>

vh_status vh_family_prompt_round_set(vh_family_prompt_round *round, const char *name, const int32_t *ids,
                                     size_t n_ids, int64_t image_position, uint32_t n_image_rows, vh_error *err)
{
    memset(round, 0, sizeof *round);
    if (!(round->ids = malloc(sizeof *round->ids * (n_ids ? n_ids : 1))))
        return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (prompt)");
    if (n_ids) memcpy(round->ids, ids, sizeof *ids * n_ids);
    round->name = name;
    round->n_ids = n_ids;
    round->image_position = image_position;
    round->n_image_rows = n_image_rows;
    return VH_OK;
}

void vh_family_prompt_rounds_free(vh_family_prompt_round *rounds, uint32_t n_rounds)
{
    for (uint32_t i = 0; rounds && i < n_rounds; i++) {
        free(rounds[i].ids);
        memset(&rounds[i], 0, sizeof rounds[i]);
    }
}
