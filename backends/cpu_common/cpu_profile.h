/*
 * Where a CPU executor's LLM blocks spend their time, by operation: VH_CPU_PROFILE=1 sums each
 * operation's wall time over the executor's life and logs the table (info level, through the
 * session's log callback) when it is destroyed (benchmarks: "a profile that shows where the time
 * goes"). Off, it costs one branch.
 */
#ifndef VH_CPU_PROFILE_H
#define VH_CPU_PROFILE_H

#include <stdint.h>
#include <time.h>

#include "vlahybrid/backend.h"

typedef enum cpu_profile_op {
    CPU_PROF_QKV, CPU_PROF_ROPE, CPU_PROF_ATTENTION, CPU_PROF_O, CPU_PROF_GATE_UP, CPU_PROF_DOWN, CPU_PROF_N
} cpu_profile_op;

/* Blocks of many rows (a prefill) and of few (decode steps) are counted apart. */
#define CPU_PROFILE_FEW_ROWS 16

typedef struct cpu_profile {
    int on;
    int cls;                           /* the current block's class: 0 many rows, 1 few */
    int64_t last_ns;
    int64_t ns[2][CPU_PROF_N];
    uint64_t blocks[2], rows[2];       /* LLM blocks run, and their rows */
} cpu_profile;

static inline int64_t cpu_profile_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Start timing a block. */
static inline void cpu_profile_begin(cpu_profile *p, uint64_t rows)
{
    if (!p->on) return;
    p->cls = rows <= CPU_PROFILE_FEW_ROWS;
    p->blocks[p->cls]++;
    p->rows[p->cls] += rows;
    p->last_ns = cpu_profile_now();
}

/* The time since the last mark goes to `op`. */
static inline void cpu_profile_mark(cpu_profile *p, cpu_profile_op op)
{
    if (!p->on) return;
    const int64_t now = cpu_profile_now();
    p->ns[p->cls][op] += now - p->last_ns;
    p->last_ns = now;
}

void cpu_profile_init(cpu_profile *p);
/* Log the table to log_to's callback (backend: the plugin's name) if profiling was on and anything ran. */
void cpu_profile_report(const cpu_profile *p, const vh_executor_params *log_to, const char *backend);

#endif
