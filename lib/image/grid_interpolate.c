#include "image/grid_interpolate.h"

#include <math.h>

/* UpSample.h: cubic_convolution1 for |x| <= 1, cubic_convolution2 for 1 < |x| < 2. */
static float conv1(float x, float a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
static float conv2(float x, float a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

/* The four source indices (clamped) and weights of output index i along a side. */
static void taps(int64_t i, int64_t in, int64_t out, int64_t index[4], float w[4])
{
    const float scale = (float)in / (float)out;
    const float real = scale * ((float)i + 0.5f) - 0.5f; /* not clamped at 0: cubic */
    const float fl = floorf(real);
    const float t = real - fl;
    const float a = -0.75f;
    w[0] = conv2(t + 1.0f, a);
    w[1] = conv1(t, a);
    w[2] = conv1(1.0f - t, a);
    w[3] = conv2(1.0f - t + 1.0f, a);
    for (int k = 0; k < 4; k++) {
        int64_t j = (int64_t)fl - 1 + k;
        index[k] = j < 0 ? 0 : j > in - 1 ? in - 1 : j;
    }
}

void vh_grid_interpolate_bicubic(const float *src, int64_t in_h, int64_t in_w, int64_t channels, float *dst,
                                 int64_t out_h, int64_t out_w)
{
    for (int64_t y = 0; y < out_h; y++) {
        int64_t ry[4];
        float wy[4];
        taps(y, in_h, out_h, ry, wy);
        for (int64_t x = 0; x < out_w; x++) {
            int64_t rx[4];
            float wx[4];
            taps(x, in_w, out_w, rx, wx);
            float *o = dst + (y * out_w + x) * channels;
            for (int64_t c = 0; c < channels; c++) {
                float acc = 0.0f;
                for (int j = 0; j < 4; j++) {
                    const float *col = src + rx[j] * channels + c;
                    float t = col[ry[0] * in_w * channels] * wy[0];
                    for (int i = 1; i < 4; i++) t += col[ry[i] * in_w * channels] * wy[i];
                    acc = j == 0 ? t * wx[0] : acc + t * wx[j];
                }
                o[c] = acc;
            }
        }
    }
}
