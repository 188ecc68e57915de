/* The heads' sin/cos encodings (positional_encoding.py: nerf_positional_encoding, pos2posemb1d). */
#include <math.h>

#include "family/driving/petr_memory.h"

#define PI 3.14159265358979323846

void vh_nerf_encode(const float *x, uint32_t n, float *out)
{
    for (int f = 0; f < 6; f++) {
        const float freq = (float)(1 << f);
        for (uint32_t i = 0; i < n; i++) out[(2 * f) * n + i] = sinf(x[i] * freq);
        for (uint32_t i = 0; i < n; i++) out[(2 * f + 1) * n + i] = cosf(x[i] * freq);
    }
}

void vh_pos2posemb1d(double p, uint32_t n_feats, float *out)
{
    const double a = p * (2.0 * PI);
    for (uint32_t i = 0; i < n_feats; i++) {
        /* dim_t in float32 as torch makes it: 10000 ** (2 * floor(i / 2) / n_feats) */
        const float e = (float)(2 * (i / 2)) / (float)n_feats;
        const double dim_t = (double)powf(10000.0f, e);
        out[i] = (float)((i & 1) ? cos(a / dim_t) : sin(a / dim_t));
    }
}
