/*
 * Linear layers on cuBLASLt: bf16 operands, fp32 accumulation and output, row-major activations
 * against PyTorch-layout weights W[out, in]:
 *
 *     D[M, N] = A[M, K] . W[N, K]^T  (+ D when accumulating: a fused residual add)
 *
 * The matmul descriptor, layouts and algorithm are chosen once per shape and cached (the least
 * recently used of 512 shapes makes room), so the hot path is one cublasLtMatmul call, which CUDA
 * graphs can capture. The algorithm: cuBLASLt's heuristic lists up to 8; for shapes of >= 64 rows
 * that overwrite D, the first call outside a capture times each on its own operands and keeps the
 * fastest when it beats the first choice by 15% (VH_CUDA_GEMM_TUNE=0: the first choice, to compare). Layers of
 * at most VHC_GEMV_MAX_ROWS rows (decode steps) go to vhc_gemv instead, which streams the weights
 * faster (set VH_CUDA_GEMV=0 to run them on cuBLASLt too, for comparison).
 * Not thread-safe: one per executor (stream).
 */
#ifndef VH_CUDA_GEMM_H
#define VH_CUDA_GEMM_H

#include <stddef.h>

#include "cuda_kernels.h"
#include "vlahybrid/vlahybrid.h"

typedef struct vhc_gemm vhc_gemm;

/* workspace: device scratch cuBLASLt may use (owned by the caller, lives as long as the gemm). */
vh_status vhc_gemm_create(cudaStream_t stream, void *workspace, size_t workspace_bytes, vhc_gemm **out, char *err,
                          size_t err_size);
void vhc_gemm_destroy(vhc_gemm *g);

/* A: M rows of K bf16 values, lda elements apart; W: N x K bf16, contiguous; D: M rows of N fp32,
 * ldd apart. accumulate: D += result (instead of D = result). */
vh_status vhc_linear(vhc_gemm *g, const vhc_bf16 *A, int64_t lda, int64_t M, int64_t K, const vhc_bf16 *W, int64_t N,
                     float *D, int64_t ldd, int accumulate, char *err, size_t err_size);

/* vhc_linear with more done in cuBLASLt's epilogue (no kernel of its own), into fp32 D:
 *   accumulate: D += result, a residual add;
 *   bias:       N fp32 values added to every row, or NULL.
 * tune_scratch: where the algorithm search may write when accumulate is set (D's size and layout;
 * the search must not add its timing runs into D); NULL: an accumulating shape keeps the
 * heuristic's first choice. */
typedef struct vhc_linear_out {
    float *D;
    int64_t ldd;
    int accumulate;
    const float *bias;
    void *tune_scratch;
} vhc_linear_out;
vh_status vhc_linear_to(vhc_gemm *g, const vhc_bf16 *A, int64_t lda, int64_t M, int64_t K, const vhc_bf16 *W,
                        int64_t N, const vhc_linear_out *out, char *err, size_t err_size);

#endif
