/* Greedy decoding's argmax over logits, with torch.argmax's tie and NaN rules. */
#include "cpu_kernels.h"

int32_t vhk_argmax(const float *x, int64_t n)
{
    if (n <= 0) return -1;
    int64_t best = 0;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] != x[i]) return (int32_t)i;  /* NaN: torch treats it as the maximum */
        if (x[i] > x[best]) best = i;
    }
    return (int32_t)best;
}
