/*
 * VH_BLOCK_READOUT on the CPU: the final RMSNorm, then the LM head and greedy argmax over each
 * segment's last row, and/or the normed hidden state of the rows a batch asks for
 * (VH_BATCH_HIDDEN_ROWS).
 */
#include <string.h>

#include "cpu_executor.h"

/* Only each segment's last row needs logits: that is the next token of its request. Rows a batch
 * asks for (VH_BATCH_HIDDEN_ROWS) get their normed hidden state instead of, or beside, that. */
void cpu_llm_head(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const vh_llm_desc *l = &e->model->llm;
    llm_scratch *s = &e->llm;
    const int64_t Dl = l->hidden, V = l->vocab, S = batch->n_segments;
    if (batch->options & VH_BATCH_HIDDEN_ROWS)
        for (uint32_t i = 0; i < batch->n_hidden_rows; i++)
            vhk_rmsnorm(e->pool, s->x + (size_t)batch->hidden_rows[i] * Dl, batch->out_hidden + (size_t)i * Dl, 1, Dl,
                        b->vec[VH_READOUT_NORM], l->rms_eps);
    if (!batch->out_tokens) return;
    uint32_t row = 0;
    for (uint32_t g = 0; g < batch->n_segments; g++) {
        row += batch->segments[g].n_rows;
        memcpy(s->head_in + (size_t)g * Dl, s->x + (size_t)(row - 1) * Dl, sizeof(float) * Dl);
    }
    vhk_rmsnorm(e->pool, s->head_in, s->head_in, S, Dl, b->vec[VH_READOUT_NORM], l->rms_eps);
    cpu_linear(e, b, VH_READOUT_VOCAB, s->head_in, Dl, S, NULL, s->logits, V);
    for (uint32_t g = 0; g < batch->n_segments; g++) {
        const float *logits = s->logits + (size_t)g * V;
        batch->out_tokens[g] = vhk_argmax(logits, V);
        if (batch->out_logits) memcpy(batch->out_logits + (size_t)g * V, logits, sizeof(float) * V);
    }
}
