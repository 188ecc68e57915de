/*
 * The families the library knows: adding one is a folder lib/family/<name>/ and a line here.
 */
#include "family/family.h"

#include <stdio.h>
#include <string.h>

extern const vh_family vh_family_minddrive;
extern const vh_family vh_family_openvla;
extern const vh_family vh_family_orion;

static const vh_family *const families[] = {
    &vh_family_openvla,
    &vh_family_orion,
    &vh_family_minddrive,
};

#define N_FAMILIES (sizeof families / sizeof families[0])

const vh_family *vh_family_find(const char *model_type)
{
    for (size_t i = 0; model_type && i < N_FAMILIES; i++)
        if (strcmp(families[i]->model_type, model_type) == 0) return families[i];
    return NULL;
}

void vh_family_known_types(char *list, size_t size)
{
    size_t used = 0;
    list[0] = '\0';
    for (size_t i = 0; i < N_FAMILIES && used < size; i++)
        used += (size_t)snprintf(list + used, size - used, i ? ", '%s'" : "'%s'", families[i]->model_type);
}
