#include "image/bilinear_resize.h"

#include <math.h>

/* OpenCV's tap of destination index d along a side of `in` source and `out` destination samples:
 * the first source index and the second's weight; a tap past an edge reads the edge alone. */
static void tap(int64_t d, int64_t in, int64_t out, int64_t *first, float *t, int *single)
{
    const double scale = 1.0 / ((double)out / (double)in);
    float f = (float)((d + 0.5) * scale - 0.5);
    int64_t s = (int64_t)floorf(f);
    f -= (float)s;
    *single = 0;
    if (s < 0) s = 0, f = 0.0f;
    if (s + 1 >= in) {
        *single = 1;
        if (s >= in - 1) s = in - 1, f = 0.0f;
    }
    *first = s;
    *t = f;
}

void vh_resize_bilinear_f32(const float *src, int64_t sw, int64_t sh, int64_t channels, float *dst, int64_t dw,
                            int64_t dh)
{
    for (int64_t y = 0; y < dh; y++) {
        int64_t sy;
        float ty;
        int y_single;
        tap(y, sh, dh, &sy, &ty, &y_single);
        const int64_t sy1 = sy + 1 < sh ? sy + 1 : sy;
        const float b0 = 1.0f - ty, b1 = ty;
        for (int64_t x = 0; x < dw; x++) {
            int64_t sx;
            float tx;
            int x_single;
            tap(x, sw, dw, &sx, &tx, &x_single);
            const float a0 = 1.0f - tx, a1 = tx;
            for (int64_t c = 0; c < channels; c++) {
                float h[2];
                const int64_t rows[2] = {sy, sy1};
                for (int r = 0; r < 2; r++) {
                    const float *row = src + rows[r] * sw * channels + c;
                    h[r] = x_single ? row[sx * channels] : row[sx * channels] * a0 + row[(sx + 1) * channels] * a1;
                }
                dst[(y * dw + x) * channels + c] = h[0] * b0 + h[1] * b1;
            }
        }
    }
}
