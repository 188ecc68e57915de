/*
 * The VH_* environment variables a backend reads, all of them: developer and benchmark switches
 * (a measured alternative path, a profile), never needed to run a model. backend_knobs.c is the
 * only backend file that calls getenv; each plugin links its own copy (a static helper).
 */
#ifndef VH_BACKEND_KNOBS_H
#define VH_BACKEND_KNOBS_H

typedef enum vh_knob {
    VH_KNOB_CPU_PIN,
    VH_KNOB_CPU_PIN_CALLER,
    VH_KNOB_CPU_PROFILE,
    VH_KNOB_CPU_AMX_GEMM,
    VH_KNOB_BF16_KERNEL,
    VH_KNOB_BF16_A_LAYOUT,
    VH_KNOB_BF16_PREFETCH,
    VH_KNOB_BF16_NBLOCK,
    VH_KNOB_BF16_KBLOCK_KB,
    VH_KNOB_BF16_DECODE_KSTEPS,
    VH_KNOB_AMX_MIN_ROWS,
    VH_KNOB_CUDA_GEMM_TUNE,
    VH_KNOB_CUDA_GEMV,
    VH_KNOB_CUDA_GRAPHS,
    VH_KNOB_CUDA_INTEGRATED,
    VH_KNOB_CUDA_KV_GATHER,
    VH_KNOB_CUDA_PROFILE,
    VH_KNOB_CUDA_SYNC,
    VH_N_KNOBS
} vh_knob;

/* A knob's variable and what it does (the table doc/knobs.md describes). */
typedef struct vh_knob_info {
    const char *name;
    const char *meaning;
} vh_knob_info;

extern const vh_knob_info vh_knob_table[VH_N_KNOBS];

/* The knob's value as the environment holds it now, or NULL where it is unset. */
const char *vh_knob_value(vh_knob knob);

/* Whether the knob is set to exactly `value`. */
int vh_knob_is(vh_knob knob, const char *value);

#endif
