#include "cuda_profile.h"

#include "backend_knobs.h"
#include "backend_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_MARKS 4096
#define MAX_ENTRIES 512

typedef struct profile_entry {
    const char *op;
    int rows;
    long calls;
    double ms, min_ms; /* the minimum: free of one-off costs (a GEMM shape's first call times its candidates) */
    double host_ms;    /* the host's time from this mark to the next: above the GPU's, the GPU waited on the host */
} profile_entry;

struct vhc_profile {
    cudaEvent_t events[MAX_MARKS];
    const char *ops[MAX_MARKS];
    int rows[MAX_MARKS];
    double host_at[MAX_MARKS];
    int n_marks, n_events_created, dropped;
    profile_entry entries[MAX_ENTRIES];
    int n_entries;
    long runs;
    double gpu_ms, host_ms, run_start_host_ms;
};

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int vhc_profile_requested(void)
{
    return vh_knob_is(VH_KNOB_CUDA_PROFILE, "1");
}

vhc_profile *vhc_profile_from_env(void)
{
    return vhc_profile_requested() ? calloc(1, sizeof(vhc_profile)) : NULL;
}

void vhc_profile_mark(vhc_profile *p, cudaStream_t s, const char *op, int rows)
{
    if (!p) return;
    if (p->n_marks == MAX_MARKS) {
        p->dropped++;
        return;
    }
    const int i = p->n_marks;
    if (i == p->n_events_created) {
        if (cudaEventCreate(&p->events[i]) != cudaSuccess) {
            cudaGetLastError();
            p->dropped++;
            return;
        }
        p->n_events_created++;
    }
    cudaEventRecord(p->events[i], s);
    p->ops[i] = op;
    p->rows[i] = rows;
    p->host_at[i] = now_ms();
    p->n_marks++;
}

void vhc_profile_run_begin(vhc_profile *p)
{
    if (!p) return;
    p->n_marks = 0;
    p->run_start_host_ms = now_ms();
}

void vhc_profile_run_close(vhc_profile *p, cudaStream_t s)
{
    vhc_profile_mark(p, s, NULL, 0);
}

static profile_entry *entry_for(vhc_profile *p, const char *op, int rows)
{
    for (int i = 0; i < p->n_entries; i++)
        if (p->entries[i].rows == rows && !strcmp(p->entries[i].op, op)) return &p->entries[i];
    if (p->n_entries == MAX_ENTRIES) return NULL;
    p->entries[p->n_entries] = (profile_entry){.op = op, .rows = rows};
    return &p->entries[p->n_entries++];
}

void vhc_profile_run_end(vhc_profile *p)
{
    if (!p) return;
    p->host_ms += now_ms() - p->run_start_host_ms;
    if (p->n_marks < 2) return;
    p->runs++;
    float span = 0.0f;
    if (cudaEventElapsedTime(&span, p->events[0], p->events[p->n_marks - 1]) == cudaSuccess) p->gpu_ms += span;
    for (int i = 0; i + 1 < p->n_marks; i++) {
        float ms = 0.0f;
        if (!p->ops[i] || cudaEventElapsedTime(&ms, p->events[i], p->events[i + 1]) != cudaSuccess) continue;
        profile_entry *en = entry_for(p, p->ops[i], p->rows[i]);
        if (!en) continue;
        if (!en->calls || ms < en->min_ms) en->min_ms = ms;
        en->calls++;
        en->ms += ms;
        en->host_ms += p->host_at[i + 1] - p->host_at[i];
    }
    cudaGetLastError();
}

static int by_time_desc(const void *a, const void *b)
{
    const double x = ((const profile_entry *)a)->ms, y = ((const profile_entry *)b)->ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

void vhc_profile_destroy(vhc_profile *p, const char *who, const vh_executor_params *log_to)
{
    if (!p) return;
    double total = 0.0;
    for (int i = 0; i < p->n_entries; i++) total += p->entries[i].ms;
    qsort(p->entries, (size_t)p->n_entries, sizeof p->entries[0], by_time_desc);
    vh_backend_log(log_to, VH_LOG_INFO, "cuda profile (%s): %ld runs, GPU span %.1f ms, host wall %.1f ms, marks "
                   "dropped %d", who, p->runs, p->gpu_ms, p->host_ms, p->dropped);
    vh_backend_log(log_to, VH_LOG_INFO, "  %-22s %6s %8s %10s %10s %10s %6s %10s", "operation", "rows", "calls",
                   "total ms", "mean us", "min us", "share", "host us");
    for (int i = 0; i < p->n_entries; i++) {
        const profile_entry *en = &p->entries[i];
        if (en->ms < 0.002 * total && i >= 40) break;
        vh_backend_log(log_to, VH_LOG_INFO, "  %-22s %6d %8ld %10.2f %10.1f %10.1f %5.1f%% %10.1f", en->op, en->rows,
                       en->calls, en->ms, 1e3 * en->ms / (double)en->calls, 1e3 * en->min_ms,
                       total > 0 ? 100.0 * en->ms / total : 0.0, 1e3 * en->host_ms / (double)en->calls);
    }
    for (int i = 0; i < p->n_events_created; i++) cudaEventDestroy(p->events[i]);
    free(p);
}
