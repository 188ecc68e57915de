/* vh-bench's sweeps: the lists --split, --mode and --frames-in-flight take, the configurations they
 * make, and the table of their runs over rounds (medians, spread, paired ratios). */
#ifndef VH_TOOLS_BENCH_SWEEP_H
#define VH_TOOLS_BENCH_SWEEP_H

#include <stdint.h>
#include <stdio.h>

#include "vlahybrid/vlahybrid.h"

#define VH_BENCH_MAX_LIST 16    /* values a swept option may list */
#define VH_BENCH_MAX_CONFIGS 64 /* combinations a sweep may make */

typedef struct vh_bench_summary { double mean, p50, p95, max; } vh_bench_summary;

/* Mean and nearest-rank p50 / p95 / max of n values (sorted in place). */
vh_bench_summary vh_bench_summarise(double *values, int n);

typedef struct vh_bench_sweep {
    int32_t splits[VH_BENCH_MAX_LIST];    /* --split; none: the session's choice */
    vh_execution_mode modes[VH_BENCH_MAX_LIST];
    uint32_t in_flight[VH_BENCH_MAX_LIST]; /* --frames-in-flight */
    int n_splits, n_modes, n_in_flight;
    int rounds;                           /* --rounds, default 1 */
} vh_bench_sweep;

/* One combination; the session's default where the option was not given. */
typedef struct vh_bench_config {
    int32_t llm_split;          /* -1: not given */
    int has_mode;
    vh_execution_mode mode;
    uint32_t frames_in_flight;  /* 0: not given */
} vh_bench_config;

void vh_bench_sweep_init(vh_bench_sweep *sweep);

/* 1: `flag` is a swept option and the comma-separated `value` was taken; 0: not one; -1: a bad
 * value or too many (a message on stderr, prefixed with `tool`). */
int vh_bench_sweep_parse(const char *tool, const char *flag, const char *value, vh_bench_sweep *sweep);

/* The combinations, splits outermost, then modes, then frames in flight, into
 * configs[VH_BENCH_MAX_CONFIGS]; returns how many, or -1 (and says why) when they are too many. */
int vh_bench_sweep_configs(const vh_bench_sweep *sweep, vh_bench_config *configs);

/* What the table keeps of one run. */
typedef struct vh_bench_sample {
    double fps, e2e_p50_ms, stage_ms[2], passes, overlap, rss_mb;
    int failures, n_stages, llm_split;
    uint32_t frames_in_flight;
} vh_bench_sample;

typedef struct vh_bench_table {
    const vh_bench_config *configs;
    int n_configs, rounds;
    vh_bench_sample *samples; /* [config][round] */
    unsigned char *have;      /* [config][round]: a sample is there */
} vh_bench_table;

void vh_bench_table_init(vh_bench_table *table, const vh_bench_config *configs, int n_configs, int rounds);
void vh_bench_table_add(vh_bench_table *table, int config, int round, vh_bench_sample sample);
/* A row per configuration: medians over its rounds, the actions/s spread, and its ratio to the
 * first listed mode at the same split and frames in flight (median of the ratios within a round). */
void vh_bench_table_print(const vh_bench_table *table, FILE *out);
/* The same rows as one JSON line {"sweep": [...]}. */
void vh_bench_table_print_json(const vh_bench_table *table, FILE *out);
void vh_bench_table_free(vh_bench_table *table);

#endif
