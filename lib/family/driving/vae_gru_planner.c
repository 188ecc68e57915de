#include "family/driving/vae_gru_planner.h"

#include "model/tensor_lookup.h"

/* A linear layer's weight and bias: [out, in], [out]. */
static vh_status linear(const vh_checkpoint *ck, const char *prefix, vh_tensor_view *w, int role, int64_t out,
                        int64_t in, const char *name, vh_error *err)
{
    vh_status st = vh_tensor_takef(ck, &w[role], 0, VH_SHAPE(out, in), err, "%s%s.weight", prefix, name);
    return st ? st : vh_tensor_takef(ck, &w[role + 1], 0, VH_SHAPE(out), err, "%s%s.bias", prefix, name);
}

vh_status vh_take_vae_gru_planner(const vh_checkpoint *ck, const char *prefix, const vh_planner_params *p,
                                  vh_tensor_view *w, vh_error *err)
{
    const int64_t F = p->feature_dim, G = p->gru_hidden, L = p->latent_dim, M = p->n_modes;
    vh_status st;
    if ((st = linear(ck, prefix, w, VH_PLAN_ENC1_W, 2 * F, F, "present_distribution.encoder.conv1", err)) ||
        (st = linear(ck, prefix, w, VH_PLAN_ENC2_W, 2 * F, 2 * F, "present_distribution.encoder.conv2", err)) ||
        (st = linear(ck, prefix, w, VH_PLAN_ENC3_W, F / 2, 2 * F, "present_distribution.encoder.conv3", err)) ||
        (st = linear(ck, prefix, w, VH_PLAN_DIST_W, 2 * L, F / 2, "present_distribution.last_conv.1", err)))
        return st;
    for (uint32_t l = 0; l < p->gru_layers; l++) {
        const int r = VH_PLAN_GRU0 + 4 * (int)l;
        if ((st = vh_tensor_takef(ck, &w[r + 0], 0, VH_SHAPE(3 * G, l ? G : L), err,
                                  "%spredict_model.gru.weight_ih_l%u", prefix, l)) ||
            (st = vh_tensor_takef(ck, &w[r + 1], 0, VH_SHAPE(3 * G, G), err, "%spredict_model.gru.weight_hh_l%u",
                                  prefix, l)) ||
            (st = vh_tensor_takef(ck, &w[r + 2], 0, VH_SHAPE(3 * G), err, "%spredict_model.gru.bias_ih_l%u", prefix,
                                  l)) ||
            (st = vh_tensor_takef(ck, &w[r + 3], 0, VH_SHAPE(3 * G), err, "%spredict_model.gru.bias_hh_l%u", prefix,
                                  l)))
            return st;
    }
    if ((st = linear(ck, prefix, w, VH_PLAN_MLP1_W, 2 * G, G, "predict_model.linear1", err)) ||
        (st = linear(ck, prefix, w, VH_PLAN_MLP2_W, 4 * G, 2 * G, "predict_model.linear2", err)) ||
        (st = linear(ck, prefix, w, VH_PLAN_MLP3_W, F, 4 * G, "predict_model.linear3", err)) ||
        (st = linear(ck, prefix, w, VH_PLAN_DEC1_W, 2 * F, 2 * F, "ego_fut_decoder.0", err)) ||
        (st = linear(ck, prefix, w, VH_PLAN_DEC2_W, 2 * F, 2 * F, "ego_fut_decoder.2", err)) ||
        (st = linear(ck, prefix, w, VH_PLAN_DEC3_W, 2 * M, 2 * F, "ego_fut_decoder.4", err)))
        return st;
    return VH_OK;
}
