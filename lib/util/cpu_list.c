#include "util/cpu_list.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

static int read_cpu(const char **p, unsigned long *cpu)
{
    if (!isdigit((unsigned char)**p)) return 0;
    char *end;
    errno = 0;
    *cpu = strtoul(*p, &end, 10);
    *p = end;
    return errno == 0;
}

vh_status vh_cpu_list_parse(const char *text, cpu_set_t *set, vh_error *err)
{
    CPU_ZERO(set);
    const char *p = text;
    for (;;) {
        unsigned long first, last;
        while (*p == ' ') p++;
        if (!read_cpu(&p, &first)) break;
        last = first;
        if (*p == '-') {
            p++;
            if (!read_cpu(&p, &last) || last < first) break;
        }
        if (last >= CPU_SETSIZE)
            return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "cpu_affinity \"%s\": CPU %lu is past the %d this "
                                "build can address", text, last, CPU_SETSIZE);
        for (unsigned long c = first; c <= last; c++) CPU_SET(c, set);
        while (*p == ' ') p++;
        if (*p == '\0') return VH_OK; /* whether the system lets us run there shows when a thread starts */
        if (*p != ',') break;
        p++;
    }
    return vh_error_set(err, VH_ERR_INVALID_ARGUMENT, "cpu_affinity \"%s\" is not a CPU list like \"0-7,16\"", text);
}
