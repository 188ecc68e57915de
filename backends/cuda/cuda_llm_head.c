/*
 * VH_BLOCK_LLM_HEAD on the GPU: logits = lm_head(rmsnorm(each segment's last row)); token =
 * argmax(logits). The normed hidden state of rows a batch asks for (VH_BATCH_HIDDEN_ROWS) is
 * computed on the host after the run (cuda_llm_head_hidden_rows): a few rows, in fp32.
 */
#include <math.h>
#include <string.h>

#include "cuda_executor.h"

vh_status cuda_llm_head(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    const vh_llm_desc *l = &e->model->llm;
    llm_buffers *s = &e->llm;
    const int S = (int)batch->n_segments, Dl = (int)l->hidden, V = (int)l->vocab;
    if (!batch->out_tokens) return VH_OK; /* hidden rows only: copied and normed around the run */
    VHC_MARK(e, "llm.head", S);
    vhc_rmsnorm_bf16(e->stream, s->x, b->vec[VH_LLM_HEAD_NORM], s->head_in, S, Dl, l->rms_eps, s->last_rows);
    vh_status st = vhc_linear(e->gemm, s->head_in, Dl, S, Dl, b->mat[VH_LLM_HEAD_LM], V, s->logits, V, 0, err, err_size);
    if (st) return st;
    vhc_argmax_rows(e->stream, s->logits, S, V, s->tokens);
    return VH_OK;
}

cudaError_t cuda_llm_head_copy_rows(vh_executor *e, const vh_batch *batch)
{
    const size_t row_bytes = sizeof(float) * e->model->llm.hidden;
    cudaError_t ce = cudaSuccess;
    for (uint32_t i = 0; i < batch->n_hidden_rows && ce == cudaSuccess; i++)
        ce = cudaMemcpyAsync((char *)e->llm.hidden_host + i * row_bytes,
                             (const char *)e->llm.x + batch->hidden_rows[i] * row_bytes, row_bytes,
                             cudaMemcpyDeviceToHost, e->stream);
    return ce;
}

/* LlamaRMSNorm in fp32: x * rsqrt(mean(x^2) + eps) * w (the mean summed in double). */
void cuda_llm_head_hidden_rows(vh_executor *e, const cuda_block *head, const vh_batch *batch)
{
    const vh_llm_desc *l = &e->model->llm;
    const vh_tensor_view *w = &head->t[VH_LLM_HEAD_NORM];
    for (uint32_t i = 0; i < batch->n_hidden_rows; i++) {
        const float *x = e->llm.hidden_host + (size_t)i * l->hidden;
        float *out = batch->out_hidden + (size_t)i * l->hidden;
        double sum = 0;
        for (uint32_t c = 0; c < l->hidden; c++) sum += (double)x[c] * x[c];
        const float scale = 1.0f / sqrtf((float)(sum / l->hidden) + l->rms_eps);
        for (uint32_t c = 0; c < l->hidden; c++) {
            const float wc = w->dtype == VH_DTYPE_F32 ? ((const float *)w->data)[c]
                             : w->dtype == VH_DTYPE_BF16 ? vh_bf16_to_f32(((const uint16_t *)w->data)[c])
                                                         : vh_f16_to_f32(((const uint16_t *)w->data)[c]);
            out[c] = wc * (x[c] * scale);
        }
    }
}
