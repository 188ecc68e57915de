#include "image/bilinear_resize.h"

#include <math.h>
#include <stdlib.h>

vh_bilinear_tap vh_bilinear_tap_of(int64_t d, int64_t in, int64_t out)
{
    const double scale = 1.0 / ((double)out / (double)in);
    float f = (float)((d + 0.5) * scale - 0.5);
    int64_t s = (int64_t)floorf(f);
    f -= (float)s;
    int single = 0;
    if (s < 0) s = 0, f = 0.0f;
    if (s + 1 >= in) {
        single = 1;
        if (s >= in - 1) s = in - 1, f = 0.0f;
    }
    return (vh_bilinear_tap){.first = s, .t = f, .single = single};
}

void vh_resize_bilinear_f32(const float *src, int64_t sw, int64_t sh, int64_t channels, float *dst, int64_t dw,
                            int64_t dh)
{
    /* the columns' taps, once (they do not depend on the row); without memory for them, per pixel */
    vh_bilinear_tap *cols = malloc(sizeof *cols * (size_t)(dw > 0 ? dw : 1));
    for (int64_t x = 0; cols && x < dw; x++) cols[x] = vh_bilinear_tap_of(x, sw, dw);
    for (int64_t y = 0; y < dh; y++) {
        const vh_bilinear_tap ty = vh_bilinear_tap_of(y, sh, dh);
        const int64_t sy = ty.first, sy1 = sy + 1 < sh ? sy + 1 : sy;
        const float b0 = 1.0f - ty.t, b1 = ty.t;
        const float *row0 = src + sy * sw * channels, *row1 = src + sy1 * sw * channels;
        for (int64_t x = 0; x < dw; x++) {
            const vh_bilinear_tap c = cols ? cols[x] : vh_bilinear_tap_of(x, sw, dw);
            const float a0 = 1.0f - c.t, a1 = c.t;
            const int64_t s0 = c.first * channels, s1 = (c.first + 1) * channels;
            for (int64_t k = 0; k < channels; k++) {
                const float h0 = c.single ? row0[s0 + k] : row0[s0 + k] * a0 + row0[s1 + k] * a1;
                const float h1 = c.single ? row1[s0 + k] : row1[s0 + k] * a0 + row1[s1 + k] * a1;
                dst[(y * dw + x) * channels + k] = h0 * b0 + h1 * b1;
            }
        }
    }
    free(cols);
}
