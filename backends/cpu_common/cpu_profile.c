#include "cpu_profile.h"

#include "backend_knobs.h"
#include "backend_log.h"

#include <stdlib.h>
#include <string.h>

void cpu_profile_init(cpu_profile *p)
{
    memset(p, 0, sizeof *p);
    const char *s = vh_knob_value(VH_KNOB_CPU_PROFILE);
    p->on = s && *s && strcmp(s, "0") != 0;
}

void cpu_profile_report(const cpu_profile *p, const vh_executor_params *log_to, const char *backend)
{
    static const char *names[CPU_PROF_N] = {"q|k|v (norm in)", "rope + kv write", "attention", "o (+ residual)",
                                            "gate|up (norm in, silu)", "down (+ residual)"};
    if (!p->on) return;
    for (int c = 0; c < 2; c++) {
        if (!p->blocks[c]) continue;
        int64_t total = 0;
        for (int i = 0; i < CPU_PROF_N; i++) total += p->ns[c][i];
        const double n = (double)p->blocks[c];
        vh_backend_log(log_to, VH_LOG_INFO, "%s profile, blocks of %s rows: %llu LLM blocks, %.1f rows a block, "
                       "%.3f ms a block", backend, c ? "<= 16" : "> 16", (unsigned long long)p->blocks[c],
                       (double)p->rows[c] / n, total / 1e6 / n);
        for (int i = 0; i < CPU_PROF_N; i++)
            if (p->ns[c][i])
                vh_backend_log(log_to, VH_LOG_INFO, "  %-26s %9.3f ms a block  %5.1f%%", names[i],
                               p->ns[c][i] / 1e6 / n, 100.0 * (double)p->ns[c][i] / (double)total);
    }
}
