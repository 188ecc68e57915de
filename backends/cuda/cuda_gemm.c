#include "cuda_gemm.h"

#include "backend_knobs.h"

#include <cublasLt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SHAPES 512     /* then the least recently used shape makes room */
#define MAX_CANDIDATES 8   /* algorithms asked of the heuristic */
#define TUNE_MIN_ROWS 64   /* fewer rows: the heuristic's first choice, untimed */
#define TUNE_MIN_GAIN 1.15 /* a timed candidate replaces the first choice only when this much faster */
#define TUNE_RUNS 3
#define TUNE_BUCKET_ROWS 64 /* row counts within one such bucket share a timing's verdict */
#define MAX_VERDICTS 256

/* One cached shape: everything cublasLtMatmul needs besides the pointers. */
typedef struct gemm_shape {
    int64_t M, N, K, lda, ldd;
    int accumulate, bias; /* vhc_linear_out's epilogue */
    uint32_t align;                    /* bytes every operand's address is a multiple of (<= 256) */
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a_layout, b_layout, d_layout;
    cublasLtMatmulAlgo_t algo;         /* the one used */
    cublasLtMatmulAlgo_t candidates[MAX_CANDIDATES];
    int n_candidates;
    int tuned;                         /* the candidates were timed, or there is nothing to time */
    uint64_t last_use;
} gemm_shape;

/* What timing chose for a family of shapes: the rank, in the heuristic's list, of the candidate
 * kept. Row counts of one bucket get the same lists from the heuristic in practice and the same
 * winner, so a new row count (a new prompt length, a packed pass of another size) reuses the
 * verdict instead of timing again in the middle of a frame; the session's warm-up fills these. */
typedef struct tune_verdict {
    int64_t N, K, bucket;
    int output; /* shape_output(): the heuristic lists other algorithms for other outputs */
    int rank;
} tune_verdict;

struct vhc_gemm {
    cublasLtHandle_t handle;
    cudaStream_t stream;
    void *workspace;
    size_t workspace_bytes;
    gemm_shape shapes[MAX_SHAPES];
    int n_shapes;
    uint64_t clock;
    cudaEvent_t tune_start, tune_end;
    tune_verdict verdicts[MAX_VERDICTS];
    int n_verdicts, next_verdict;     /* when full, replaced round robin */
    int use_gemv; /* few-row layers on vhc_gemv (VH_CUDA_GEMV=0: all on cuBLASLt, to compare) */
    int tuning;   /* VH_CUDA_GEMM_TUNE=0: the heuristic's first choice everywhere, to compare */
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
    g->use_gemv = !vh_knob_is(VH_KNOB_CUDA_GEMV, "0");
    g->tuning = !vh_knob_is(VH_KNOB_CUDA_GEMM_TUNE, "0") && cudaEventCreate(&g->tune_start) == cudaSuccess &&
                cudaEventCreate(&g->tune_end) == cudaSuccess;
    cudaGetLastError();
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
    if (g->tune_start) cudaEventDestroy(g->tune_start);
    if (g->tune_end) cudaEventDestroy(g->tune_end);
    cublasLtDestroy(g->handle);
    free(g);
}

static int shape_output(const gemm_shape *s) { return s->accumulate | s->bias << 1; }

static const tune_verdict *find_verdict(const vhc_gemm *g, const gemm_shape *s)
{
    for (int i = 0; i < g->n_verdicts; i++) {
        const tune_verdict *v = &g->verdicts[i];
        if (v->N == s->N && v->K == s->K && v->bucket == s->M / TUNE_BUCKET_ROWS && v->output == shape_output(s))
            return v;
    }
    return NULL;
}

static void remember_verdict(vhc_gemm *g, const gemm_shape *s, int rank)
{
    int slot = g->n_verdicts;
    if (g->n_verdicts < MAX_VERDICTS) {
        g->n_verdicts++;
    } else {
        slot = g->next_verdict;
        g->next_verdict = (slot + 1) % MAX_VERDICTS;
    }
    g->verdicts[slot] =
        (tune_verdict){.N = s->N, .K = s->K, .bucket = s->M / TUNE_BUCKET_ROWS, .output = shape_output(s), .rank = rank};
}

/* cuBLASLt is column-major. Row-major D[M,N] is column-major D^T [N,M]; D^T = W . A^T, where W
 * (row-major [N,K]) is stored column-major as [K,N] and used transposed, and A (row-major [M,K]) is
 * stored column-major as [K,M] and used as is. */
static vh_status prepare_shape(vhc_gemm *g, gemm_shape *s, const float *bias, char *err, size_t err_size)
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
    if (s->bias) { /* the heuristic reads the pointer's alignment (in s->align too); each call sets its own */
        const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
        if ((st = cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue)) ||
            (st = cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias))) {
            snprintf(err, err_size, "cuda: cuBLASLt bias epilogue for %lldx%lldx%lld failed (%d)", (long long)s->M,
                     (long long)s->N, (long long)s->K, (int)st);
            return VH_ERR_BACKEND_FAILED;
        }
    }
    cublasLtMatmulPreference_t pref;
    if ((st = cublasLtMatmulPreferenceCreate(&pref))) {
        snprintf(err, err_size, "cuda: cublasLtMatmulPreferenceCreate failed (%d)", (int)st);
        return VH_ERR_BACKEND_FAILED;
    }
    size_t ws = g->workspace_bytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    /* the heuristic assumes 256-byte aligned operands unless told */
    const cublasLtMatmulPreferenceAttributes_t align_attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++) cublasLtMatmulPreferenceSetAttribute(pref, align_attrs[i], &s->align, sizeof s->align);
    cublasLtMatmulHeuristicResult_t results[MAX_CANDIDATES];
    int found = 0;
    st = cublasLtMatmulAlgoGetHeuristic(g->handle, s->desc, s->a_layout, s->b_layout, s->d_layout, s->d_layout, pref,
                                        MAX_CANDIDATES, results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < found; i++)
        if (results[i].state == CUBLAS_STATUS_SUCCESS) s->candidates[s->n_candidates++] = results[i].algo;
    if (st != CUBLAS_STATUS_SUCCESS || s->n_candidates == 0) {
        snprintf(err, err_size, "cuda: cuBLASLt has no algorithm for %lldx%lldx%lld bf16 (%d)", (long long)s->M,
                 (long long)s->N, (long long)s->K, (int)st);
        return VH_ERR_BACKEND_FAILED;
    }
    s->algo = s->candidates[0];
    /* timing runs write D: an accumulating shape is timed on a scratch of D's size (tune_shape) */
    s->tuned = !g->tuning || s->n_candidates < 2 || s->M < TUNE_MIN_ROWS;
    const tune_verdict *v = s->tuned ? NULL : find_verdict(g, s);
    if (v && v->rank < s->n_candidates) {
        s->algo = s->candidates[v->rank];
        s->tuned = 1;
    }
    return VH_OK;
}

/* The heuristic ranks algorithms by a model; for some shapes (the ViT's 256-row GEMMs, the
 * projector) its first choice is several times slower than another it lists. Time each candidate
 * once, on the call's own operands, outside graph capture, and keep the fastest if it is clearly
 * faster (noise must not flip the choice, which would change results' last bits between runs). */
static void tune_shape(vhc_gemm *g, gemm_shape *s, const vhc_bf16 *A, const vhc_bf16 *W, float *D)
{
    enum cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(g->stream, &capturing) != cudaSuccess || capturing != cudaStreamCaptureStatusNone) {
        cudaGetLastError();
        return; /* the next call outside a capture times it */
    }
    const float alpha = 1.0f, beta = s->accumulate ? 1.0f : 0.0f;
    float best_ms = 0.0f, first_ms = 0.0f;
    int best = 0;
    for (int c = 0; c < s->n_candidates; c++) {
        cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
        for (int run = 0; run <= TUNE_RUNS && st == CUBLAS_STATUS_SUCCESS; run++) { /* run 0 warms up */
            if (run == 1) cudaEventRecord(g->tune_start, g->stream);
            st = cublasLtMatmul(g->handle, s->desc, &alpha, W, s->a_layout, A, s->b_layout, &beta, D, s->d_layout, D,
                                s->d_layout, &s->candidates[c], g->workspace, g->workspace_bytes, g->stream);
        }
        float ms = 0.0f;
        if (st != CUBLAS_STATUS_SUCCESS || cudaEventRecord(g->tune_end, g->stream) != cudaSuccess ||
            cudaEventSynchronize(g->tune_end) != cudaSuccess ||
            cudaEventElapsedTime(&ms, g->tune_start, g->tune_end) != cudaSuccess) {
            cudaGetLastError();
            if (c == 0) break; /* the first choice itself failed to time: keep it */
            continue;
        }
        if (c == 0) first_ms = best_ms = ms;
        else if (ms < best_ms) best_ms = ms, best = c;
    }
    const int rank = best > 0 && best_ms * TUNE_MIN_GAIN < first_ms ? best : 0;
    s->algo = s->candidates[rank];
    s->tuned = 1;
    remember_verdict(g, s, rank);
}

/* The largest power of two up to 256 that divides the three operands' addresses. Arena buffers are
 * 256-byte aligned; a LoRA delta adds into columns at an offset of the fused q|k|v output, and
 * row ranges of a packed batch start inside buffers. */
static uint32_t operand_alignment(const void *A, const void *W, const void *D, const void *bias)
{
    const uintptr_t bits = (uintptr_t)A | (uintptr_t)W | (uintptr_t)D | (uintptr_t)bias | 256u;
    return (uint32_t)(bits & (~bits + 1));
}

static gemm_shape *find_shape(vhc_gemm *g, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldd, int accumulate,
                              const float *bias_ptr, uint32_t align, char *err, size_t err_size)
{
    const int bias = bias_ptr != NULL;
    g->clock++;
    int oldest = 0;
    for (int i = 0; i < g->n_shapes; i++) {
        gemm_shape *s = &g->shapes[i];
        if (s->M == M && s->N == N && s->K == K && s->lda == lda && s->ldd == ldd && s->accumulate == accumulate &&
            s->bias == bias && s->align == align) {
            s->last_use = g->clock;
            return s;
        }
        if (s->last_use < g->shapes[oldest].last_use) oldest = i;
    }
    /* packed passes see many row counts: when full, the least recently used shape makes room */
    gemm_shape *s = &g->shapes[g->n_shapes < MAX_SHAPES ? g->n_shapes : oldest];
    if (g->n_shapes == MAX_SHAPES) release_shape(s);
    *s = (gemm_shape){.M = M, .N = N, .K = K, .lda = lda, .ldd = ldd, .accumulate = accumulate, .bias = bias,
                      .align = align, .last_use = g->clock};
    if (prepare_shape(g, s, bias_ptr, err, err_size) != VH_OK) {
        release_shape(s);
        if (g->n_shapes == MAX_SHAPES) *s = g->shapes[--g->n_shapes]; /* keep the table dense */
        return NULL;
    }
    if (g->n_shapes < MAX_SHAPES) g->n_shapes++;
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
    const vhc_linear_out out = {.D = D, .ldd = ldd, .accumulate = accumulate};
    return vhc_linear_to(g, A, lda, M, K, W, N, &out, err, err_size);
}

vh_status vhc_linear_to(vhc_gemm *g, const vhc_bf16 *A, int64_t lda, int64_t M, int64_t K, const vhc_bf16 *W,
                        int64_t N, const vhc_linear_out *out, char *err, size_t err_size)
{
    if (M == 0) return VH_OK;
    const int accumulate = out->accumulate != 0, bias = out->bias != NULL;
    gemm_shape *s = find_shape(g, M, N, K, lda, out->ldd, accumulate, out->bias,
                               operand_alignment(A, W, out->D, out->bias), err, err_size);
    if (!s) return VH_ERR_BACKEND_FAILED;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    if (bias) st = cublasLtMatmulDescSetAttribute(s->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &out->bias,
                                                  sizeof out->bias);
    if (st == CUBLAS_STATUS_SUCCESS && !s->tuned) {
        if (!accumulate) tune_shape(g, s, A, W, out->D);
        else if (out->tune_scratch) tune_shape(g, s, A, W, out->tune_scratch);
        else s->tuned = 1; /* nowhere to time it: the first choice */
    }
    const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmul(g->handle, s->desc, &alpha, W, s->a_layout, A, s->b_layout, &beta, out->D, s->d_layout,
                            out->D, s->d_layout, &s->algo, g->workspace, g->workspace_bytes, g->stream);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, err_size, "cuda: cublasLtMatmul %lldx%lldx%lld failed (%d)", (long long)M, (long long)N,
                 (long long)K, (int)st);
        return VH_ERR_BACKEND_FAILED;
    }
    return VH_OK;
}
