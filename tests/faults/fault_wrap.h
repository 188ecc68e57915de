/* Fault injection for the core (linked with -Wl,--wrap=... into tests/faults' test only): every
 * allocation and file operation the core's objects make goes through a wrapper that, when armed,
 * either records its call site or makes the first call from one chosen call site fail. */
#ifndef VH_FAULT_WRAP_H
#define VH_FAULT_WRAP_H

#include <stddef.h>

typedef enum fault_mode { FAULT_OFF, FAULT_COUNT, FAULT_FAIL } fault_mode;

#define FAULT_MAX_SITES 4096

/* COUNT: record each distinct (function, call site) in first-seen order. FAIL: the first call from
 * site `site` (an index of the last COUNT run's list) fails, everything else passes. */
void fault_arm(fault_mode mode, int site);
void fault_disarm(void);
int fault_site_count(void);
const char *fault_site_function(int site); /* "malloc", "fopen", ... */
int fault_fired(void);
const char *fault_site_object(int site);   /* the file holding the call site */                     /* whether the chosen site was reached in FAIL mode */

#endif
