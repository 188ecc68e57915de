/*
 * VH_BLOCK_READOUT on the GPU: logits = lm_head(rmsnorm(each segment's last row)); token =
 * argmax(logits); and the normed hidden state of the rows a batch asks for (VH_BATCH_HIDDEN_ROWS),
 * in fp32, into head.hidden (copied out after the run, and read by the planners).
 */

#include "cuda_executor.h"

vh_status cuda_llm_head(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    const vh_llm_desc *l = &e->model->llm;
    llm_buffers *s = &e->llm;
    const int S = (int)batch->n_segments, Dl = (int)l->hidden, V = (int)l->vocab;
    if (batch->options & VH_BATCH_HIDDEN_ROWS) {
        VHC_MARK(e, "llm.hidden rows", (int)batch->n_hidden_rows);
        vhc_rmsnorm_rows_f32(e->stream, s->x, b->vec[VH_READOUT_NORM], e->head.rows, e->head.hidden,
                             e->head.hidden_bf16, (int)batch->n_hidden_rows, Dl, l->rms_eps);
    }
    if (!batch->out_tokens) return VH_OK;
    VHC_MARK(e, "llm.head", S);
    vhc_rmsnorm_bf16(e->stream, s->x, b->vec[VH_READOUT_NORM], s->head_in, S, Dl, l->rms_eps, s->last_rows);
    vh_status st = vhc_linear(e->gemm, s->head_in, Dl, S, Dl, b->mat[VH_READOUT_VOCAB], V, s->logits, V, 0, err, err_size);
    if (st) return st;
    vhc_argmax_rows(e->stream, s->logits, S, V, s->tokens);
    return VH_OK;
}

