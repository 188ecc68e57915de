#include "family/driving/driving_noise.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void vh_driving_seeded_noise(uint64_t seed, uint64_t sequence, float *noise, uint32_t n)
{
    uint64_t state = seed ^ (sequence * 0xd1b54a32d192ed03ull);
    for (uint32_t i = 0; i < n; i += 2) {
        /* two uniforms in (0, 1], then Box-Muller */
        const double u1 = ((splitmix64(&state) >> 11) + 1) * 0x1.0p-53, u2 = (splitmix64(&state) >> 11) * 0x1.0p-53;
        const double r = sqrt(-2.0 * log(u1));
        noise[i] = (float)(r * cos(2 * M_PI * u2));
        if (i + 1 < n) noise[i + 1] = (float)(r * sin(2 * M_PI * u2));
    }
}
