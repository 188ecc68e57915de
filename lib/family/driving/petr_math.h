/*
 * The two small numeric helpers the driving front end's host code shares, as the released code
 * computes them: a 4 x 4 inverse (torch.inverse / np.linalg.inv: here Gauss-Jordan with partial
 * pivoting in float64, rounded by the caller) and mmcv's inverse_sigmoid.
 */
#ifndef VH_FAMILY_DRIVING_PETR_MATH_H
#define VH_FAMILY_DRIVING_PETR_MATH_H

#include <math.h>

/* inv = m^-1 in float64; 0 when m is singular. */
static inline int vh_mat4_invert(const float *m, double inv[16])
{
    double a[4][8];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 8; c++) a[r][c] = c < 4 ? m[r * 4 + c] : (c - 4 == r);
    for (int c = 0; c < 4; c++) {
        int pivot = c;
        for (int r = c + 1; r < 4; r++)
            if (fabs(a[r][c]) > fabs(a[pivot][c])) pivot = r;
        if (!(fabs(a[pivot][c]) > 1e-300)) return 0;
        for (int k = 0; k < 8; k++) {
            const double t = a[c][k];
            a[c][k] = a[pivot][k], a[pivot][k] = t;
        }
        const double d = a[c][c];
        for (int k = 0; k < 8; k++) a[c][k] /= d;
        for (int r = 0; r < 4; r++)
            if (r != c) {
                const double f = a[r][c];
                for (int k = 0; k < 8; k++) a[r][k] -= f * a[c][k];
            }
    }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) inv[r * 4 + c] = a[r][c + 4];
    return 1;
}

/* mmcv's inverse_sigmoid (eps 1e-5): log(clamp(x, eps) / clamp(1 - x, eps)) of x clamped to [0, 1]. */
static inline float vh_inverse_sigmoid(float x)
{
    const float eps = 1e-5f;
    x = x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x;
    const float x1 = x < eps ? eps : x, x2 = 1.0f - x < eps ? eps : 1.0f - x;
    return logf(x1 / x2);
}

#endif
