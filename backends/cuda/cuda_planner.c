/*
 * VH_BLOCK_VAE_GRU_PLANNER on the GPU for every segment of the batch at once (the math is
 * cpu_planner.c's, and Orion's): the linear layers through cuBLASLt (bf16 weights and inputs, fp32
 * accumulation and output: vhc_linear; a few rows take the GEMV kernel), the biases, ReLUs, the
 * latent's sampling and the GRU's gates in cuda_planner_kernels.cu, in fp32. The features are the
 * head's normed hidden rows (head.hidden, this run's); the noise and the plans cross in
 * head.noise / head.plan (uploaded and copied out by executor_run).
 */
#include "backend_error.h"
#include "cuda_executor.h"

#define LINEAR(A, lda, rows, k, role, n, D)                                                                     \
    do {                                                                                                    \
        vh_status st_ = vhc_linear(e->gemm, (A), (lda), (rows), (k), b->mat[(role)], (n), (D), (n), 0, err,  \
                                   err_size);                                                               \
        if (st_) return st_;                                                                                \
    } while (0)

vh_status cuda_planner(vh_executor *e, const cuda_block *b, const vh_batch *batch, char *err, size_t err_size)
{
    const vh_planner_params *p = &b->info.plan;
    head_buffers *h = &e->head;
    const int S = (int)batch->n_segments, F = (int)p->feature_dim, G = (int)p->gru_hidden, L = (int)p->latent_dim,
              T = (int)p->n_steps, M = (int)p->n_modes, R = S * T;
    const int per_segment = (int)(batch->n_hidden_rows / batch->n_segments);
    cudaStream_t st = e->stream;
    VHC_MARK(e, "plan", S);
    /* each segment's feature: its hidden row feature_row */
    cudaError_t ce = cudaMemcpy2DAsync(h->f, sizeof(float) * F, h->hidden + (size_t)p->feature_row * F,
                                       sizeof(float) * F * per_segment, sizeof(float) * F, S, cudaMemcpyDeviceToDevice, st);
    if (ce == cudaSuccess)
        ce = cudaMemcpy2DAsync(h->f_bf16, sizeof(vhc_bf16) * F, h->hidden_bf16 + (size_t)p->feature_row * F,
                               sizeof(vhc_bf16) * F * per_segment, sizeof(vhc_bf16) * F, S, cudaMemcpyDeviceToDevice, st);
    if (ce != cudaSuccess)
        return vh_backend_fail(err, err_size, VH_ERR_BACKEND_FAILED, "cuda: planner features: %s", cudaGetErrorString(ce));

    /* the latent */
    LINEAR(h->f_bf16, F, S, F, VH_PLAN_ENC1_W, 2 * F, h->t1);
    vhc_bias_act(st, h->t1, b->vec[VH_PLAN_ENC1_B], NULL, h->b1, S, 2 * F, 1);
    LINEAR(h->b1, 2 * F, S, 2 * F, VH_PLAN_ENC2_W, 2 * F, h->t1);
    vhc_bias_act(st, h->t1, b->vec[VH_PLAN_ENC2_B], NULL, h->b2, S, 2 * F, 1);
    LINEAR(h->b2, 2 * F, S, 2 * F, VH_PLAN_ENC3_W, F / 2, h->t1);
    vhc_bias_act(st, h->t1, b->vec[VH_PLAN_ENC3_B], NULL, h->b1, S, F / 2, 0);
    LINEAR(h->b1, F / 2, S, F / 2, VH_PLAN_DIST_W, 2 * L, h->t2);
    vhc_plan_latent(st, h->t2, b->vec[VH_PLAN_DIST_B], h->noise, (int)batch->plan_noise_stride, (int)p->noise_offset,
                    h->plan, (int)batch->plan_out_stride, (int)(p->out_offset + 2 * M * T), h->z, S, L,
                    p->min_log_sigma, p->max_log_sigma);

    /* the GRU over the steps, every step's input z */
    vhc_gru_init(st, h->f, h->h, h->h_bf16, (int)p->gru_layers, S, G);
    for (int t = 0; t < T; t++) {
        const vhc_bf16 *x = h->z;
        int x_dim = L;
        for (uint32_t l = 0; l < p->gru_layers; l++) {
            const int role = VH_PLAN_GRU0 + 4 * (int)l;
            float *hl = h->h + (size_t)l * S * G;
            vhc_bf16 *hl_bf16 = h->h_bf16 + (size_t)l * S * G;
            LINEAR(x, x_dim, S, x_dim, role + 0, 3 * G, h->gi);
            LINEAR(hl_bf16, G, S, G, role + 1, 3 * G, h->gh);
            vhc_gru_update(st, h->gi, b->vec[role + 2], h->gh, b->vec[role + 3], hl, hl_bf16,
                           l + 1 == p->gru_layers ? h->y : NULL, S, G, T, t);
            x = hl_bf16;
            x_dim = G;
        }
    }

    /* every step's state, then [f, g_t] to each mode's offset */
    LINEAR(h->y, G, R, G, VH_PLAN_MLP1_W, 2 * G, h->t1);
    vhc_bias_act(st, h->t1, b->vec[VH_PLAN_MLP1_B], NULL, h->b1, R, 2 * G, 1);
    LINEAR(h->b1, 2 * G, R, 2 * G, VH_PLAN_MLP2_W, 4 * G, h->t1);
    vhc_bias_act(st, h->t1, b->vec[VH_PLAN_MLP2_B], NULL, h->b2, R, 4 * G, 1);
    LINEAR(h->b2, 4 * G, R, 4 * G, VH_PLAN_MLP3_W, F, h->t2);
    vhc_plan_concat(st, h->f, h->t2, b->vec[VH_PLAN_MLP3_B], h->b1, S, T, F);
    LINEAR(h->b1, 2 * F, R, 2 * F, VH_PLAN_DEC1_W, 2 * F, h->t1);
    vhc_bias_act(st, h->t1, b->vec[VH_PLAN_DEC1_B], NULL, h->b2, R, 2 * F, 1);
    LINEAR(h->b2, 2 * F, R, 2 * F, VH_PLAN_DEC2_W, 2 * F, h->t1);
    vhc_bias_act(st, h->t1, b->vec[VH_PLAN_DEC2_B], NULL, h->b1, R, 2 * F, 1);
    LINEAR(h->b1, 2 * F, R, 2 * F, VH_PLAN_DEC3_W, 2 * M, h->t2);
    vhc_plan_preds(st, h->t2, b->vec[VH_PLAN_DEC3_B], h->plan, (int)batch->plan_out_stride, (int)p->out_offset, S, T, M);
    return VH_OK;
}
