/* vh-bench's sweeps (bench_sweep.h). */
#include "bench_sweep.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json_line.h"
#include "stage_options.h"

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

vh_bench_summary vh_bench_summarise(double *v, int n)
{
    vh_bench_summary s = {0};
    if (n <= 0) return s;
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    for (int i = 0; i < n; i++) s.mean += v[i] / n;
    s.p50 = v[(int)((n - 1) * 0.50 + 0.5)];
    s.p95 = v[(int)((n - 1) * 0.95 + 0.5)];
    s.max = v[n - 1];
    return s;
}

/* The median of n values (sorted in place); NAN for none. */
static double median(double *v, int n)
{
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, compare_doubles);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void vh_bench_sweep_init(vh_bench_sweep *sweep)
{
    memset(sweep, 0, sizeof *sweep);
    sweep->rounds = 1;
}

int vh_bench_sweep_parse(const char *tool, const char *flag, const char *value, vh_bench_sweep *sweep)
{
    int *count;
    if (!strcmp(flag, "--split")) count = &sweep->n_splits;
    else if (!strcmp(flag, "--mode")) count = &sweep->n_modes;
    else if (!strcmp(flag, "--frames-in-flight")) count = &sweep->n_in_flight;
    else return 0;
    *count = 0; /* a repeated option replaces the earlier list */
    const char *p = value;
    for (;;) {
        const char *comma = strchr(p, ',');
        const size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char item[64];
        if (len == 0 || len >= sizeof item) {
            fprintf(stderr, "%s: %s: an empty or overlong item in \"%s\"\n", tool, flag, value);
            return -1;
        }
        if (*count == VH_BENCH_MAX_LIST) {
            fprintf(stderr, "%s: %s lists at most %d values\n", tool, flag, VH_BENCH_MAX_LIST);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = 0;
        /* each item is checked as the single option would be */
        vh_session_params one;
        vh_session_params_init(&one);
        if (vh_parse_stage_option(tool, flag, item, &one) != 1) return -1;
        if (flag[2] == 's') sweep->splits[*count] = one.llm_split;
        else if (flag[2] == 'm') sweep->modes[*count] = one.execution_mode;
        else sweep->in_flight[*count] = one.frames_in_flight;
        ++*count;
        if (!comma) break;
        p = comma + 1;
    }
    return 1;
}

int vh_bench_sweep_configs(const vh_bench_sweep *sweep, vh_bench_config *configs)
{
    const int ns = sweep->n_splits ? sweep->n_splits : 1, nm = sweep->n_modes ? sweep->n_modes : 1;
    const int nf = sweep->n_in_flight ? sweep->n_in_flight : 1;
    if (ns * nm * nf > VH_BENCH_MAX_CONFIGS) {
        fprintf(stderr, "vh-bench: the lists make %d combinations; at most %d\n", ns * nm * nf, VH_BENCH_MAX_CONFIGS);
        return -1;
    }
    int n = 0;
    for (int s = 0; s < ns; s++)
        for (int m = 0; m < nm; m++)
            for (int f = 0; f < nf; f++)
                configs[n++] = (vh_bench_config){
                    .llm_split = sweep->n_splits ? sweep->splits[s] : -1,
                    .has_mode = sweep->n_modes > 0,
                    .mode = sweep->n_modes ? sweep->modes[m] : VH_EXECUTION_PIPELINE,
                    .frames_in_flight = sweep->n_in_flight ? sweep->in_flight[f] : 0,
                };
    return n;
}

void vh_bench_table_init(vh_bench_table *t, const vh_bench_config *configs, int n_configs, int rounds)
{
    memset(t, 0, sizeof *t);
    if (n_configs <= 0 || rounds <= 0) return;
    t->samples = calloc((size_t)n_configs * rounds, sizeof *t->samples);
    t->have = calloc((size_t)n_configs * rounds, 1);
    if (!t->samples || !t->have) {
        free(t->samples);
        free(t->have);
        t->samples = NULL;
        t->have = NULL;
        return; /* the table stays empty; the runs are still printed as they go */
    }
    t->configs = configs;
    t->n_configs = n_configs;
    t->rounds = rounds;
}

void vh_bench_table_add(vh_bench_table *t, int config, int round, vh_bench_sample sample)
{
    if (!t->samples || config < 0 || config >= t->n_configs || round < 1 || round > t->rounds) return;
    t->samples[(size_t)config * t->rounds + round - 1] = sample;
    t->have[(size_t)config * t->rounds + round - 1] = 1;
}

/* The configuration a row's ratio is taken against: same split and frames in flight, the first
 * mode of the list; -1 when the row is that one or there is no mode list. */
static int reference_of(const vh_bench_table *t, int c)
{
    const vh_bench_config *me = &t->configs[c];
    if (!me->has_mode) return -1;
    for (int i = 0; i < t->n_configs; i++) {
        const vh_bench_config *o = &t->configs[i];
        if (o->llm_split == me->llm_split && o->frames_in_flight == me->frames_in_flight)
            return i == c || o->mode == me->mode ? -1 : i; /* the first with this split and in-flight count */
    }
    return -1;
}

typedef struct row {
    int runs, failures, split, n_stages;
    uint32_t in_flight;
    double fps, fps_min, fps_max, e2e, stage0, stage1, passes, overlap, rss, ratio;
    int ratio_rounds;
} row;

static const char *mode_name(vh_execution_mode m)
{
    return m == VH_EXECUTION_SERIAL ? "serial" : m == VH_EXECUTION_PACKED ? "packed" : "pipeline";
}

static row row_of(const vh_bench_table *t, int c)
{
    row r = {.fps = NAN, .ratio = NAN, .fps_min = INFINITY, .fps_max = -INFINITY, .split = -1};
    double fps[t->rounds], e2e[t->rounds], s0[t->rounds], s1[t->rounds], passes[t->rounds], ov[t->rounds],
        rss[t->rounds], ratio[t->rounds];
    const int ref = reference_of(t, c);
    for (int k = 0; k < t->rounds; k++) {
        if (!t->have[(size_t)c * t->rounds + k]) continue;
        const vh_bench_sample *s = &t->samples[(size_t)c * t->rounds + k];
        fps[r.runs] = s->fps;
        e2e[r.runs] = s->e2e_p50_ms;
        s0[r.runs] = s->stage_ms[0];
        s1[r.runs] = s->stage_ms[1];
        passes[r.runs] = s->passes;
        ov[r.runs] = s->overlap;
        rss[r.runs] = s->rss_mb;
        r.failures += s->failures;
        r.split = s->llm_split;
        r.in_flight = s->frames_in_flight;
        r.n_stages = s->n_stages;
        if (s->fps < r.fps_min) r.fps_min = s->fps;
        if (s->fps > r.fps_max) r.fps_max = s->fps;
        r.runs++;
        if (ref >= 0 && t->have[(size_t)ref * t->rounds + k] && t->samples[(size_t)ref * t->rounds + k].fps > 0)
            ratio[r.ratio_rounds++] = s->fps / t->samples[(size_t)ref * t->rounds + k].fps;
    }
    r.fps = median(fps, r.runs);
    r.e2e = median(e2e, r.runs);
    r.stage0 = median(s0, r.runs);
    r.stage1 = median(s1, r.runs);
    r.passes = median(passes, r.runs);
    r.overlap = median(ov, r.runs);
    r.rss = median(rss, r.runs);
    r.ratio = median(ratio, r.ratio_rounds);
    return r;
}

void vh_bench_table_print(const vh_bench_table *t, FILE *out)
{
    if (!t->samples) return;
    fprintf(out, "medians over %d round(s); actions/s min-max across them; ratio: actions/s against the first "
                 "mode listed at the same split and frames in flight, the median of the ratios within a round\n",
            t->rounds);
    fprintf(out, "%5s %-8s %6s %4s %10s %17s %9s %9s %9s %7s %7s %8s %7s\n", "split", "mode", "flight", "runs",
            "actions/s", "min-max", "e2e p50", "stage0 ms", "stage1 ms", "passes", "overlap", "RSS MB", "ratio");
    for (int c = 0; c < t->n_configs; c++) {
        row r = row_of(t, c);
        if (!r.runs) continue;
        char ratio[32] = "";
        if (r.ratio_rounds) snprintf(ratio, sizeof ratio, "%.3f", r.ratio);
        fprintf(out, "%5d %-8s %6u %4d %10.3f %8.3f-%-8.3f %9.1f %9.1f %9.1f %7.2f %7.3f %8.0f %7s%s\n", r.split,
                t->configs[c].has_mode ? mode_name(t->configs[c].mode) : "default", r.in_flight, r.runs, r.fps,
                r.fps_min, r.fps_max, r.e2e, r.stage0, r.n_stages > 1 ? r.stage1 : 0.0, r.passes, r.overlap, r.rss,
                ratio, r.failures ? "  (failures)" : "");
    }
    fflush(out);
}

void vh_bench_table_print_json(const vh_bench_table *t, FILE *out)
{
    if (!t->samples) return;
    json_t *rows = json_array();
    for (int c = 0; c < t->n_configs; c++) {
        row r = row_of(t, c);
        if (!r.runs) continue;
        json_t *j = json_pack("{s:i, s:s, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "llm_split",
                              r.split, "mode", t->configs[c].has_mode ? mode_name(t->configs[c].mode) : "default",
                              "frames_in_flight", (int)r.in_flight, "runs", r.runs, "failures", r.failures,
                              "frames_per_s", r.fps, "frames_per_s_min", r.fps_min, "frames_per_s_max", r.fps_max,
                              "end_to_end_p50_ms", r.e2e, "stage0_busy_ms", r.stage0, "stage1_busy_ms",
                              r.n_stages > 1 ? r.stage1 : 0.0, "last_stage_passes", r.passes, "overlap_efficiency",
                              r.overlap, "rss_mb", r.rss);
        if (j && r.ratio_rounds) json_object_set_new(j, "ratio_to_first_mode", json_real(r.ratio));
        if (j) json_array_append_new(rows, j);
    }
    json_t *top = json_pack("{s:o, s:i}", "sweep", rows, "rounds", t->rounds);
    if (!top || vh_json_print_line(out, top)) fprintf(out, "{}\n");
    fflush(out);
    json_decref(top);
}

void vh_bench_table_free(vh_bench_table *t)
{
    free(t->samples);
    free(t->have);
    memset(t, 0, sizeof *t);
}
