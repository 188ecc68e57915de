#include "vlahybrid/vlahybrid.h"

#define STR_(x) #x
#define STR(x) STR_(x)

unsigned vh_version_number(void)
{
    return VH_VERSION_NUMBER;
}

const char *vh_version(void)
{
    return STR(VH_VERSION_MAJOR) "." STR(VH_VERSION_MINOR) "." STR(VH_VERSION_PATCH);
}
