/*
 * The weights of a tower layer with 2-D RoPE (EVA-02's) in the layout its GEMMs run fast on
 * (cuda_rope_tower_layer.c): q|k|v one [3 D, D] matrix (one GEMM), gate|up one [2 Fp, D] matrix
 * with each half's rows past F zero, and down as [D, Fp] with its columns past F zero, Fp = F
 * rounded up to 8. EVA-02-L's F = 2730: a weight of 2730-element rows is 4-byte aligned, and
 * cuBLASLt then takes kernels several times slower than on 16-byte rows (as the patch embedding's
 * 588 columns, cuda_kernels.h). The zero rows and columns add exact zeros.
 */
#include "cuda_memory_plan.h"
#include "cuda_rope_tower_pack.h"

int64_t cuda_rope_tower_padded_mlp(int64_t F) { return (F + 7) / 8 * 8; }

void cuda_rope_tower_pack_plan(vh_executor *e, cuda_block *b, cuda_arena *a)
{
    const vh_vit_desc *v = &e->model->towers[b->info.tower];
    const size_t D = v->embed_dim, Fp = (size_t)cuda_rope_tower_padded_mlp(v->mlp_hidden);
    b->qkv_w = cuda_arena_take(a, 3 * D * D * 2);
    b->gate_up_w = cuda_arena_take(a, 2 * Fp * D * 2);
    b->mat[VH_TF_DOWN_W] = cuda_arena_take(a, D * Fp * 2);
}

vh_status cuda_rope_tower_pack_upload(vh_executor *e, cuda_uploader *u, const cuda_block *b, char *err,
                                      size_t err_size)
{
    const vh_vit_desc *v = &e->model->towers[b->info.tower];
    const int64_t D = v->embed_dim, F = v->mlp_hidden, Fp = cuda_rope_tower_padded_mlp(F);
    const int roles[3] = {VH_TF_Q_W, VH_TF_K_W, VH_TF_V_W};
    vh_status st;
    for (int p = 0; p < 3; p++)
        if ((st = cuda_upload(u, &b->t[roles[p]], 0, b->qkv_w + (size_t)p * D * D, err, err_size))) return st;
    cudaError_t ce;
    if ((st = cuda_upload(u, &b->t[VH_TF_GATE_W], 0, b->gate_up_w, err, err_size)) ||
        (st = cuda_upload(u, &b->t[VH_TF_UP_W], 0, b->gate_up_w + (size_t)Fp * D, err, err_size)))
        return st;
    if (Fp > F && ((ce = cudaMemset(b->gate_up_w + (size_t)F * D, 0, (size_t)(Fp - F) * D * 2)) ||
                   (ce = cudaMemset(b->gate_up_w + (size_t)(Fp + F) * D, 0, (size_t)(Fp - F) * D * 2))))
        return cuda_fail(err, err_size, ce, "the gate|up padding");
    return cuda_upload_padded_rows(u, &b->t[VH_TF_DOWN_W], D, F, Fp, 1.0f, b->mat[VH_TF_DOWN_W], err, err_size);
}
