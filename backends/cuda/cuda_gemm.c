#include "cuda_gemm.h"

#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SHAPES 512

/* One cached shape: everything cublasLtMatmul needs besides the pointers. */
typedef struct gemm_shape {
    int64_t M, N, K, lda, ldd;
    int accumulate;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a_layout, b_layout, d_layout;
    cublasLtMatmulAlgo_t algo;
} gemm_shape;

struct vhc_gemm {
    cublasLtHandle_t handle;
    cudaStream_t stream;
    void *workspace;
    size_t workspace_bytes;
    gemm_shape shapes[MAX_SHAPES];
    int n_shapes;
    int use_gemv; /* few-row layers on vhc_gemv (VH_CUDA_GEMV=0: all on cuBLASLt, to compare) */
};

vh_status vhc_gemm_create(cudaStream_t stream, void *workspace, size_t workspace_bytes, vhc_gemm **out, char *err,
                          size_t err_size)
{
    *out = NULL;
    vhc_gemm *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, err_size, "cuda: out of host memory");
        return VH_ERR_OUT_OF_MEMORY;
    }
    cublasStatus_t st = cublasLtCreate(&g->handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, err_size, "cuda: cublasLtCreate failed (%d)", (int)st);
        free(g);
        return VH_ERR_BACKEND_FAILED;
    }
    g->stream = stream;
    const char *gemv = getenv("VH_CUDA_GEMV");
    g->use_gemv = !(gemv && !strcmp(gemv, "0"));
    g->workspace = workspace;
    g->workspace_bytes = workspace_bytes;
    *out = g;
    return VH_OK;
}

static void release_shape(gemm_shape *s)
{
    if (s->desc) cublasLtMatmulDescDestroy(s->desc);
    if (s->a_layout) cublasLtMatrixLayoutDestroy(s->a_layout);
    if (s->b_layout) cublasLtMatrixLayoutDestroy(s->b_layout);
    if (s->d_layout) cublasLtMatrixLayoutDestroy(s->d_layout);
    memset(s, 0, sizeof *s);
}

void vhc_gemm_destroy(vhc_gemm *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_shapes; i++) release_shape(&g->shapes[i]);
    cublasLtDestroy(g->handle);
    free(g);
}

/* cuBLASLt is column-major. Row-major D[M,N] is column-major D^T [N,M]; D^T = W . A^T, where W
 * (row-major [N,K]) is stored column-major as [K,N] and used transposed, and A (row-major [M,K]) is
 * stored column-major as [K,M] and used as is. */
static vh_status prepare_shape(vhc_gemm *g, gemm_shape *s, char *err, size_t err_size)
{
    cublasStatus_t st;
    const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
    if ((st = cublasLtMatmulDescCreate(&s->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) ||
        (st = cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t)) ||
        (st = cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n)) ||
        (st = cublasLtMatrixLayoutCreate(&s->a_layout, CUDA_R_16BF, (uint64_t)s->K, (uint64_t)s->N, s->K)) ||
        (st = cublasLtMatrixLayoutCreate(&s->b_layout, CUDA_R_16BF, (uint64_t)s->K, (uint64_t)s->M, s->lda)) ||
        (st = cublasLtMatrixLayoutCreate(&s->d_layout, CUDA_R_32F, (uint64_t)s->N, (uint64_t)s->M, s->ldd))) {
        snprintf(err, err_size, "cuda: cuBLASLt descriptor for %lldx%lldx%lld failed (%d)", (long long)s->M,
                 (long long)s->N, (long long)s->K, (int)st);
        return VH_ERR_BACKEND_FAILED;
    }
    cublasLtMatmulPreference_t pref;
    if ((st = cublasLtMatmulPreferenceCreate(&pref))) {
        snprintf(err, err_size, "cuda: cublasLtMatmulPreferenceCreate failed (%d)", (int)st);
        return VH_ERR_BACKEND_FAILED;
    }
    size_t ws = g->workspace_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    st = cublasLtMatmulAlgoGetHeuristic(g->handle, s->desc, s->a_layout, s->b_layout, s->d_layout, s->d_layout, pref, 1,
                                        &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
        snprintf(err, err_size, "cuda: cuBLASLt has no algorithm for %lldx%lldx%lld bf16 (%d)", (long long)s->M,
                 (long long)s->N, (long long)s->K, (int)st);
        return VH_ERR_BACKEND_FAILED;
    }
    s->algo = result.algo;
    return VH_OK;
}

static gemm_shape *find_shape(vhc_gemm *g, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldd, int accumulate,
                              char *err, size_t err_size)
{
    for (int i = 0; i < g->n_shapes; i++) {
        gemm_shape *s = &g->shapes[i];
        if (s->M == M && s->N == N && s->K == K && s->lda == lda && s->ldd == ldd && s->accumulate == accumulate)
            return s;
    }
    if (g->n_shapes == MAX_SHAPES) {
        snprintf(err, err_size, "cuda: more than %d GEMM shapes", MAX_SHAPES);
        return NULL;
    }
    gemm_shape *s = &g->shapes[g->n_shapes];
    *s = (gemm_shape){.M = M, .N = N, .K = K, .lda = lda, .ldd = ldd, .accumulate = accumulate};
    if (prepare_shape(g, s, err, err_size) != VH_OK) {
        release_shape(s);
        return NULL;
    }
    g->n_shapes++;
    return s;
}

vh_status vhc_linear(vhc_gemm *g, const vhc_bf16 *A, int64_t lda, int64_t M, int64_t K, const vhc_bf16 *W, int64_t N,
                     float *D, int64_t ldd, int accumulate, char *err, size_t err_size)
{
    if (M == 0) return VH_OK;
    if (g->use_gemv && vhc_gemv_supported(A, lda, M, K, W, N, D, ldd)) {
        vhc_gemv(g->stream, A, lda, M, K, W, N, D, ldd, accumulate);
        return VH_OK;
    }
    gemm_shape *s = find_shape(g, M, N, K, lda, ldd, accumulate, err, err_size);
    if (!s) return VH_ERR_BACKEND_FAILED;
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasStatus_t st = cublasLtMatmul(g->handle, s->desc, &alpha, W, s->a_layout, A, s->b_layout, &beta, D,
                                       s->d_layout, D, s->d_layout, &s->algo, g->workspace, g->workspace_bytes,
                                       g->stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, err_size, "cuda: cublasLtMatmul %lldx%lldx%lld failed (%d)", (long long)M, (long long)N,
                 (long long)K, (int)st);
        return VH_ERR_BACKEND_FAILED;
    }
    return VH_OK;
}
