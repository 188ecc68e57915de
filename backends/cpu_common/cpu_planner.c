/*
 * VH_BLOCK_VAE_GRU_PLANNER on the CPU, for every segment of the batch at once (rows = segments,
 * or segments x steps), in fp32, as Orion's planner (mmcv/models/detectors/orion.py,
 * distribution_forward / future_states_predict / the ego_fut_decoder loop; the modules of
 * mmcv/models/utils/distributions.py):
 *
 *   f        = the segment's feature: the head's normed hidden row        [F]
 *   e        = enc3(relu(enc2(relu(enc1(f)))))                             [F/2]
 *   mu, ls   = dist(e) split in two; ls clamped                            [L], [L]
 *   z        = mu + exp(ls) * eps                                          [L]
 *   h_l(0)   = f[l G .. (l + 1) G), layer l of the GRU
 *   y_t      = the last layer's output at step t, every step's input z     [steps, G]
 *   g_t      = mlp3(relu(mlp2(relu(mlp1(y_t)))))                           [steps, F]
 *   preds[m][t] = dec3(relu(dec2(relu(dec1([f, g_t])))))[2m .. 2m + 2)      [M, steps, 2]
 * With VH_BATCH_SEGMENT_PLANS only the segments marked are planned (packed into the first rows of
 * the scratch); the others' noise is not read and their plan rows are not written.
 * The linear layers go through the backend's linear ops (its weights' own form); the pointwise
 * steps and the GRU's gates are plain loops over a few thousand floats.
 */
#include <math.h>
#include <string.h>

#include "cpu_executor.h"

static void relu(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
}

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The scratch one planner block needs for up to S segments (floats). */
uint64_t cpu_planner_scratch_floats(const vh_executor *e, const cpu_block *b)
{
    const vh_planner_params *p = &b->info.plan;
    const uint64_t S = e->max_segments, F = p->feature_dim, G = p->gru_hidden, L = p->latent_dim,
                   T = p->n_steps, M = p->n_modes;
    return S /* the segments planned (VH_BATCH_SEGMENT_PLANS), as uint32_t */
           + S * (2 * F + 2 * F + F / 2 + 2 * L + L) /* encoder, distribution, z */
           + S * p->gru_layers * G + 2 * S * 3 * G /* GRU state, gates */
           + S * T * (G + 2 * G + 4 * G + F + 2 * F + 2 * F + 2 * F + 2 * M); /* steps */
}

void cpu_planner(vh_executor *e, const cpu_block *b, const vh_batch *batch)
{
    const vh_planner_params *p = &b->info.plan;
    const int64_t F = p->feature_dim, G = p->gru_hidden, L = p->latent_dim, T = p->n_steps, M = p->n_modes,
                  per_segment = batch->n_hidden_rows / batch->n_segments;
    /* the segments planned, packed: plan row s below is batch segment planned[s] */
    uint32_t *planned = (uint32_t *)b->scratch;
    int64_t S = 0;
    for (uint32_t g = 0; g < batch->n_segments; g++)
        if (vh_batch_plans_segment(batch, g)) planned[S++] = g;
    if (S == 0) return;
    float *w = b->scratch + e->max_segments;
    float *f = w;              w += S * 2 * F;     /* the features, then reused below */
    float *e1 = w;             w += S * 2 * F;
    float *e3 = w;             w += S * F / 2;
    float *dist = w;           w += S * 2 * L;
    float *z = w;              w += S * L;
    float *h = w;              w += S * p->gru_layers * G; /* [layer][segment][G] */
    float *gi = w;             w += S * 3 * G;
    float *gh = w;             w += S * 3 * G;
    float *y = w;              w += S * T * G;     /* [segment][step][G] */
    float *m1 = w;             w += S * T * 2 * G;
    float *m2 = w;             w += S * T * 4 * G;
    float *g = w;              w += S * T * F;
    float *st = w;             w += S * T * 2 * F; /* [f, g_t] */
    float *d1 = w;             w += S * T * 2 * F;
    float *d2 = w;             w += S * T * 2 * F;
    float *out = w;                                /* [segment][step][2M] */

    for (int64_t s = 0; s < S; s++)
        memcpy(f + s * F, batch->out_hidden + (size_t)(planned[s] * per_segment + p->feature_row) * F,
               sizeof(float) * F);

    /* the latent: mu + exp(log_sigma) * eps */
    cpu_linear(e, b, VH_PLAN_ENC1_W, f, F, S, b->vec[VH_PLAN_ENC1_B], e1, 2 * F);
    relu(e1, S * 2 * F);
    cpu_linear(e, b, VH_PLAN_ENC2_W, e1, 2 * F, S, b->vec[VH_PLAN_ENC2_B], st, 2 * F);
    relu(st, S * 2 * F);
    cpu_linear(e, b, VH_PLAN_ENC3_W, st, 2 * F, S, b->vec[VH_PLAN_ENC3_B], e3, F / 2);
    cpu_linear(e, b, VH_PLAN_DIST_W, e3, F / 2, S, b->vec[VH_PLAN_DIST_B], dist, 2 * L);
    if (e->failed) return;
    for (int64_t s = 0; s < S; s++) {
        const float *eps = batch->plan_noise + (size_t)planned[s] * batch->plan_noise_stride + p->noise_offset;
        float *mu = dist + s * 2 * L, *ls = mu + L;
        float *plan = batch->out_plan + (size_t)planned[s] * batch->plan_out_stride + p->out_offset + M * T * 2;
        for (int64_t i = 0; i < L; i++) {
            ls[i] = fminf(fmaxf(ls[i], p->min_log_sigma), p->max_log_sigma);
            z[s * L + i] = mu[i] + expf(ls[i]) * eps[i];
            plan[i] = mu[i];
            plan[L + i] = ls[i];
        }
    }

    /* the GRU: every step's input is z; layer l starts from the feature's l-th slice */
    for (uint32_t l = 0; l < p->gru_layers; l++)
        for (int64_t s = 0; s < S; s++) memcpy(h + (l * S + s) * G, f + s * F + l * G, sizeof(float) * G);
    for (int64_t t = 0; t < T; t++) {
        const float *x = z;
        int64_t x_dim = L;
        for (uint32_t l = 0; l < p->gru_layers; l++) {
            const int role = VH_PLAN_GRU0 + 4 * (int)l;
            float *hl = h + (int64_t)l * S * G;
            cpu_linear(e, b, role + 0, x, x_dim, S, b->vec[role + 2], gi, 3 * G);
            cpu_linear(e, b, role + 1, hl, G, S, b->vec[role + 3], gh, 3 * G);
            if (e->failed) return;
            for (int64_t s = 0; s < S; s++) {
                const float *a = gi + s * 3 * G, *c = gh + s * 3 * G;
                float *hs = hl + s * G;
                for (int64_t k = 0; k < G; k++) {
                    const float r = sigmoid(a[k] + c[k]), u = sigmoid(a[G + k] + c[G + k]);
                    const float n = tanhf(a[2 * G + k] + r * c[2 * G + k]);
                    hs[k] = (1.0f - u) * n + u * hs[k];
                }
            }
            x = hl;
            x_dim = G;
        }
        for (int64_t s = 0; s < S; s++) memcpy(y + (s * T + t) * G, x + s * G, sizeof(float) * G);
    }

    /* every step: its state, then [f, g_t] decoded to each mode's offset */
    const int64_t R = S * T;
    cpu_linear(e, b, VH_PLAN_MLP1_W, y, G, R, b->vec[VH_PLAN_MLP1_B], m1, 2 * G);
    relu(m1, R * 2 * G);
    cpu_linear(e, b, VH_PLAN_MLP2_W, m1, 2 * G, R, b->vec[VH_PLAN_MLP2_B], m2, 4 * G);
    relu(m2, R * 4 * G);
    cpu_linear(e, b, VH_PLAN_MLP3_W, m2, 4 * G, R, b->vec[VH_PLAN_MLP3_B], g, F);
    if (e->failed) return;
    for (int64_t s = 0; s < S; s++)
        for (int64_t t = 0; t < T; t++) {
            memcpy(st + (s * T + t) * 2 * F, f + s * F, sizeof(float) * F);
            memcpy(st + (s * T + t) * 2 * F + F, g + (s * T + t) * F, sizeof(float) * F);
        }
    cpu_linear(e, b, VH_PLAN_DEC1_W, st, 2 * F, R, b->vec[VH_PLAN_DEC1_B], d1, 2 * F);
    relu(d1, R * 2 * F);
    cpu_linear(e, b, VH_PLAN_DEC2_W, d1, 2 * F, R, b->vec[VH_PLAN_DEC2_B], d2, 2 * F);
    relu(d2, R * 2 * F);
    cpu_linear(e, b, VH_PLAN_DEC3_W, d2, 2 * F, R, b->vec[VH_PLAN_DEC3_B], out, 2 * M);
    if (e->failed) return;
    for (int64_t s = 0; s < S; s++) {
        float *preds = batch->out_plan + (size_t)planned[s] * batch->plan_out_stride + p->out_offset;
        for (int64_t m = 0; m < M; m++)
            for (int64_t t = 0; t < T; t++) {
                preds[(m * T + t) * 2 + 0] = out[(s * T + t) * 2 * M + 2 * m + 0];
                preds[(m * T + t) * 2 + 1] = out[(s * T + t) * 2 * M + 2 * m + 1];
            }
    }
}
