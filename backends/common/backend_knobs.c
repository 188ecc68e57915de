#include "backend_knobs.h"

#include <stdlib.h>
#include <string.h>

const vh_knob_info vh_knob_table[VH_N_KNOBS] = {
    [VH_KNOB_CPU_PIN] = {"VH_CPU_PIN", "0: CPU threads run unpinned (to measure what pinning gives)"},
    [VH_KNOB_CPU_PIN_CALLER] = {"VH_CPU_PIN_CALLER", "0: leave the calling thread where it is during a pass, not "
                                                     "held on its own core"},
    [VH_KNOB_CPU_PROFILE] = {"VH_CPU_PROFILE", "set, not 0: log where the CPU LLM blocks' time goes, at executor "
                                               "destroy (info level)"},
    [VH_KNOB_CPU_AMX_GEMM] = {"VH_CPU_AMX_GEMM", "onednn: cpu_amx's linear layers through oneDNN's bf16 matmul"},
    [VH_KNOB_BF16_KERNEL] = {"VH_BF16_KERNEL", "avx512 | amx: force the own bf16 GEMM's micro-kernel"},
    [VH_KNOB_BF16_A_LAYOUT] = {"VH_BF16_A_LAYOUT", "rows: the bf16 GEMM's activations in plain rows, not tiled"},
    [VH_KNOB_BF16_PREFETCH] = {"VH_BF16_PREFETCH", "0: the bf16 GEMM does not prefetch B"},
    [VH_KNOB_BF16_NBLOCK] = {"VH_BF16_NBLOCK", "panels an N block of the bf16 GEMM (default 8)"},
    [VH_KNOB_BF16_KBLOCK_KB] = {"VH_BF16_KBLOCK_KB", "KB of B a K block of the bf16 GEMM (default 512)"},
    [VH_KNOB_BF16_DECODE_KSTEPS] = {"VH_BF16_DECODE_KSTEPS", "K steps a decode-row call of the bf16 GEMM (default "
                                                             "all)"},
    [VH_KNOB_AMX_MIN_ROWS] = {"VH_AMX_MIN_ROWS", "fewest rows that take AMX tiles (bf16 GEMM, default 8) or "
                                                 "oneDNN (VH_CPU_AMX_GEMM=onednn, default 16)"},
    [VH_KNOB_CUDA_GEMM_TUNE] = {"VH_CUDA_GEMM_TUNE", "0: cuBLASLt's first heuristic, no timing of candidates"},
    [VH_KNOB_CUDA_GEMV] = {"VH_CUDA_GEMV", "0: few-row products through cuBLASLt, not the GEMV kernel"},
    [VH_KNOB_CUDA_GRAPHS] = {"VH_CUDA_GRAPHS", "0: no CUDA graphs (every kernel launched)"},
    [VH_KNOB_CUDA_INTEGRATED] = {"VH_CUDA_INTEGRATED", "1 | 0: treat the GPU as sharing the host's memory or not "
                                                       "(default: as the device says)"},
    [VH_KNOB_CUDA_KV_GATHER] = {"VH_CUDA_KV_GATHER", "1: a benchmark peer that copies each pass's keys and values "
                                                     "into one region before attention"},
    [VH_KNOB_CUDA_PROFILE] = {"VH_CUDA_PROFILE", "1: log each operation's GPU time at executor destroy (info "
                                                 "level); graphs off"},
    [VH_KNOB_CUDA_SYNC] = {"VH_CUDA_SYNC", "spin: wait for the GPU with the runtime's spinning wait, not a "
                                           "blocking event"},
};

const char *vh_knob_value(vh_knob knob)
{
    return knob < VH_N_KNOBS ? getenv(vh_knob_table[knob].name) : NULL;
}

int vh_knob_is(vh_knob knob, const char *value)
{
    const char *v = vh_knob_value(knob);
    return v && !strcmp(v, value);
}
