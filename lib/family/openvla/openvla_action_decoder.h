/*
 * OpenVLA's action de-tokenisation (OpenVLAForActionPrediction.predict_action), in float64 exactly
 * as numpy computes it:
 *   bins    = linspace(-1, 1, n_action_bins);  centres = (bins[:-1] + bins[1:]) / 2
 *   bin     = clip(vocab_unpadded - token - 1, 0, n_action_bins - 2)
 *   value   = mask ? 0.5 * (centres[bin] + 1) * (q99 - q01) + q01 : centres[bin]
 */
#ifndef VH_FAMILY_OPENVLA_ACTION_DECODER_H
#define VH_FAMILY_OPENVLA_ACTION_DECODER_H

#include "family/openvla/openvla_config.h"

typedef struct vh_action_decoder {
    uint32_t vocab_unpadded;           /* 32000 for OpenVLA: text vocab minus the padding */
    uint32_t n_centres;                /* n_action_bins - 1 */
    double *centres;                   /* [n_centres] */
    const vh_action_stats *stats;      /* q01, q99, mask and dim of the chosen dataset */
} vh_action_decoder;

vh_status vh_action_decoder_init(vh_action_decoder *d, uint32_t vocab_unpadded, uint32_t n_action_bins,
                                 const vh_action_stats *stats, vh_error *err);
void vh_action_decoder_free(vh_action_decoder *d);

/* tokens[stats->dim] -> values[stats->dim] */
void vh_action_decode(const vh_action_decoder *d, const int32_t *tokens, double *values);

#endif
