/*
 * The planners' noise when a frame brings none (Orion's and MindDrive's VAE planners sample their
 * latent at inference: z = mu + exp(log_sigma) * eps). Drawn from the session's seed and the
 * frame's sequence, so a replayed run gives the same trajectories.
 */
#ifndef VH_FAMILY_DRIVING_NOISE_H
#define VH_FAMILY_DRIVING_NOISE_H

#include <stdint.h>

/* n standard normal floats: seed and sequence through SplitMix64, then Box-Muller. */
void vh_driving_seeded_noise(uint64_t seed, uint64_t sequence, float *noise, uint32_t n);

#endif
