#include "family/driving/planner_result.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* nan_to_num, as the agents apply to the trajectory */
static float finite_or_clamped(float v)
{
    return isnan(v) ? 0.0f : v > FLT_MAX ? FLT_MAX : v < -FLT_MAX ? -FLT_MAX : v;
}

void vh_driving_planner_result(vh_frame_result *out, const float *plan, uint32_t M, uint32_t T, uint32_t L,
                               uint32_t mode, const char *modes_name, const char *mu_name, const char *ls_name,
                               float *chosen)
{
    float *modes = vh_frame_result_add_extra(out, modes_name, M * T * 2);
    for (uint32_t m = 0; m < M; m++) {
        float x = 0, y = 0; /* the offsets summed step by step, in fp32 as torch's cumsum */
        for (uint32_t t = 0; t < T; t++) {
            x += plan[(m * T + t) * 2 + 0];
            y += plan[(m * T + t) * 2 + 1];
            if (modes) modes[(m * T + t) * 2 + 0] = x, modes[(m * T + t) * 2 + 1] = y;
            if (m == mode && chosen) chosen[2 * t + 0] = finite_or_clamped(x), chosen[2 * t + 1] = finite_or_clamped(y);
        }
    }
    float *mu = vh_frame_result_add_extra(out, mu_name, L), *ls = vh_frame_result_add_extra(out, ls_name, L);
    if (mu) memcpy(mu, plan + 2 * M * T, sizeof(float) * L);
    if (ls) memcpy(ls, plan + 2 * M * T + L, sizeof(float) * L);
}
