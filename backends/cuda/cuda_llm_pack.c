/*
 * An LLM layer's weights in the layout its kernels read (cuda_executor.h, cuda_block): q|k|v and
 * gate|up each one matrix (one GEMM each), the q/k/v biases one vector, the LoRA pairs padded to
 * a rank of 8 (B pre-scaled), a set that adapts q, k and v with one rank packed as one pair.
 */
#include "cuda_llm_pack.h"

#include "cuda_memory_plan.h"

#include <string.h>

/* A LoRA rank rounded up to 8 (the padded pair's leading dimension). */
static int64_t lora_padded_rank(int64_t r) { return (r + 7) / 8 * 8; }

/* Whether LoRA set `set` of an LLM block adapts q, k and v with one rank (cuda_executor.h: then they
 * run as one pair over the fused q|k|v output). Their A are carved one after the other. */
static int qkv_lora_fusable(const cuda_block *b, uint32_t set)
{
    const vh_tensor_view *A[3];
    for (uint32_t p = 0; p < 3; p++)
        if (!(A[p] = &b->t[vh_tf_lora_role(set, p)])->data) return 0;
    return A[0]->shape[0] == A[1]->shape[0] && A[0]->shape[0] == A[2]->shape[0];
}

void cuda_llm_pack_plan(vh_executor *e, cuda_block *b, cuda_arena *a)
{
    const vh_llm_desc *l = &e->model->llm;
    size_t qkv_rows = (size_t)(l->n_heads + 2 * l->n_kv_heads) * l->head_dim;
    b->qkv_w = cuda_arena_take(a, qkv_rows * l->hidden * 2);
    b->gate_up_w = cuda_arena_take(a, (size_t)2 * l->intermediate * l->hidden * 2);
    if (b->t[VH_TF_Q_B].data || b->t[VH_TF_K_B].data || b->t[VH_TF_V_B].data)
        b->qkv_bias = cuda_arena_take(a, qkv_rows * 4);
    for (uint32_t set = 0; set < VH_BLOCK_VARIANT_LORA_SETS; set++) {
        const int fused = qkv_lora_fusable(b, set);
        vhc_bf16 *fused_a = NULL; /* [3 r8, Dl]: q's, k's and v's A, one after the other */
        if (fused) {
            const int64_t r8 = lora_padded_rank(b->t[vh_tf_lora_role(set, 0)].shape[0]);
            fused_a = cuda_arena_take(a, (size_t)3 * r8 * l->hidden * 2);
            b->qkv_lora_b[set] = cuda_arena_take(a, qkv_rows * 3 * r8 * 2);
        }
        for (uint32_t p = 0; p < 4; p++) {
            const vh_tensor_view *A = &b->t[vh_tf_lora_role(set, p)], *B = &b->t[vh_tf_lora_role(set, p) + 1];
            if (!A->data) continue;
            b->lora_ld[set][p] = lora_padded_rank(A->shape[0]);
            if (fused && p < 3) {
                b->lora_a[set][p] = fused_a ? fused_a + (size_t)p * b->lora_ld[set][p] * l->hidden : NULL;
                continue;
            }
            b->lora_a[set][p] = cuda_arena_take(a, (size_t)b->lora_ld[set][p] * A->shape[1] * 2);
            b->lora_b[set][p] = cuda_arena_take(a, (size_t)B->shape[0] * b->lora_ld[set][p] * 2);
        }
    }
}

/* The widest padded LoRA rank of the LLM blocks held, either set, three times a fused q|k|v set's
 * (the width of x A^T; 0: no LoRA). */
uint64_t cuda_llm_pack_max_lora_ld(const vh_executor *e)
{
    uint64_t r8 = 0;
    for (uint32_t i = 0; i < e->params.n_blocks; i++)
        for (uint32_t set = 0; e->blocks[i].variant->llm_layer && set < VH_BLOCK_VARIANT_LORA_SETS; set++)
            for (uint32_t p = 0; p < 4; p++) {
                const vh_tensor_view *A = &e->blocks[i].t[vh_tf_lora_role(set, p)];
                if (!A->data) continue;
                const uint64_t ld =
                    (uint64_t)lora_padded_rank(A->shape[0]) * (qkv_lora_fusable(&e->blocks[i], set) ? 3 : 1);
                if (ld > r8) r8 = ld;
            }
    return r8;
}

/* An LLM block's biases (stacked q | k | v, zeros for one it lacks) and LoRA pairs (A's padding
 * rows zero, B pre-scaled with its padding columns zero). */
static vh_status upload_extras(vh_executor *e, cuda_uploader *u, const cuda_block *b, char *err, size_t err_size)
{
    const vh_llm_desc *l = &e->model->llm;
    const size_t q_dim = (size_t)l->n_heads * l->head_dim, kv_dim = (size_t)l->n_kv_heads * l->head_dim;
    vh_status st;
    cudaError_t ce;
    if (b->qkv_bias) {
        if ((ce = cudaMemset(b->qkv_bias, 0, (q_dim + 2 * kv_dim) * 4))) return cuda_fail(err, err_size, ce, "biases");
        const size_t offset[3] = {0, q_dim, q_dim + kv_dim};
        for (int i = 0; i < 3; i++)
            if (b->t[VH_TF_Q_B + i].data &&
                (st = cuda_upload(u, &b->t[VH_TF_Q_B + i], 1, b->qkv_bias + offset[i], err, err_size)))
                return st;
    }
    for (uint32_t set = 0; set < VH_BLOCK_VARIANT_LORA_SETS; set++)
        for (uint32_t p = 0; p < 4; p++) {
            const vh_tensor_view *A = &b->t[vh_tf_lora_role(set, p)], *B = &b->t[vh_tf_lora_role(set, p) + 1];
            if (!A->data) continue;
            const int64_t r = A->shape[0], r8 = b->lora_ld[set][p], in = A->shape[1];
            if ((st = cuda_upload(u, A, 0, b->lora_a[set][p], err, err_size))) return st;
            if (r8 > r && (ce = cudaMemset(b->lora_a[set][p] + r * in, 0, (size_t)((r8 - r) * in) * 2)))
                return cuda_fail(err, err_size, ce, A->name);
            if (b->lora_b[set][p] &&
                (st = cuda_upload_padded_rows(u, B, B->shape[0], r, r8, b->info.lora_scale, b->lora_b[set][p], err,
                                              err_size)))
                return st;
        }
    /* a fused set's B, block-diagonal: q's rows read t's first r8 columns, k's the next, v's the last */
    for (uint32_t set = 0; set < VH_BLOCK_VARIANT_LORA_SETS; set++) {
        if (!b->qkv_lora_b[set]) continue;
        const int64_t r8 = b->lora_ld[set][0], rows[3] = {q_dim, kv_dim, kv_dim};
        int64_t row0 = 0;
        for (int p = 0; p < 3; p++) {
            const vh_tensor_view *B = &b->t[vh_tf_lora_role(set, (uint32_t)p) + 1];
            if ((st = cuda_upload_block_row(u, B, rows[p], B->shape[1], p * r8, 3 * r8, b->info.lora_scale,
                                            b->qkv_lora_b[set] + row0 * 3 * r8, err, err_size)))
                return st;
            row0 += rows[p];
        }
    }
    return VH_OK;
}

vh_status cuda_llm_pack_upload(vh_executor *e, cuda_uploader *u, const cuda_block *b, char *err, size_t err_size)
{
    const vh_llm_desc *l = &e->model->llm;
    const size_t q_bytes = (size_t)l->n_heads * l->head_dim * l->hidden * 2;
    const size_t kv_bytes = (size_t)l->n_kv_heads * l->head_dim * l->hidden * 2;
    const size_t f_bytes = (size_t)l->intermediate * l->hidden * 2;
    vh_status st;
    if ((st = cuda_upload(u, &b->t[VH_TF_Q_W], 0, b->qkv_w, err, err_size)) ||
        (st = cuda_upload(u, &b->t[VH_TF_K_W], 0, (char *)b->qkv_w + q_bytes, err, err_size)) ||
        (st = cuda_upload(u, &b->t[VH_TF_V_W], 0, (char *)b->qkv_w + q_bytes + kv_bytes, err, err_size)) ||
        (st = cuda_upload(u, &b->t[VH_TF_GATE_W], 0, b->gate_up_w, err, err_size)) ||
        (st = cuda_upload(u, &b->t[VH_TF_UP_W], 0, (char *)b->gate_up_w + f_bytes, err, err_size)))
        return st;
    return upload_extras(e, u, b, err, err_size);
}
