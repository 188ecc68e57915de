#include "family/openvla/openvla_action_decoder.h"

#include <stdlib.h>

vh_status vh_action_decoder_init(vh_action_decoder *d, uint32_t vocab_unpadded, uint32_t n_action_bins,
                                 const vh_action_stats *stats, vh_error *err)
{
    d->vocab_unpadded = vocab_unpadded;
    d->stats = stats;
    d->n_centres = n_action_bins - 1;
    d->centres = malloc(sizeof *d->centres * d->n_centres);
    if (!d->centres) return vh_error_set(err, VH_ERR_OUT_OF_MEMORY, "out of memory (action bins)");

    /* numpy.linspace(-1, 1, n): i * step + start, step = (stop - start) / (n - 1), last = stop */
    const double start = -1.0, stop = 1.0, step = (stop - start) / (double)(n_action_bins - 1);
    double left = start;
    for (uint32_t i = 0; i < d->n_centres; i++) {
        double right = (i + 1 == n_action_bins - 1) ? stop : (double)(i + 1) * step + start;
        d->centres[i] = (left + right) / 2.0;
        left = right;
    }
    return VH_OK;
}

void vh_action_decoder_free(vh_action_decoder *d)
{
    free(d->centres);
    d->centres = NULL;
}

void vh_action_decode(const vh_action_decoder *d, const int32_t *tokens, double *values)
{
    const vh_action_stats *s = d->stats;
    for (uint32_t i = 0; i < s->dim; i++) {
        int64_t bin = (int64_t)d->vocab_unpadded - (int64_t)tokens[i] - 1;
        if (bin < 0) bin = 0;
        if (bin > (int64_t)d->n_centres - 1) bin = (int64_t)d->n_centres - 1;
        double normalised = d->centres[bin];
        values[i] = s->mask[i] ? 0.5 * (normalised + 1.0) * (s->q99[i] - s->q01[i]) + s->q01[i] : normalised;
    }
}
