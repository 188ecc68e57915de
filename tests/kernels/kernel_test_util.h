/* Helpers shared by the kernel tests: a seeded generator and the tests' own (independent)
 * encoders and decoders for bf16 and f16. Nothing here calls the code under test. */
#ifndef VH_KERNEL_TEST_UTIL_H
#define VH_KERNEL_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FP32_EPS 1.1920928955078125e-07 /* 2^-23: one ulp at 1.0 */
#define FP32_U 5.9604644775390625e-08   /* 2^-24: unit roundoff */

typedef struct test_rng {
    uint64_t state;
} test_rng;

static inline test_rng test_rng_seed(uint64_t seed)
{
    test_rng r = {seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull};
    return r;
}

/* splitmix64 */
static inline uint64_t test_rng_u64(test_rng *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [-scale, scale), exactly representable in fp32. */
static inline float test_rng_float(test_rng *r, float scale)
{
    double u = (double)(test_rng_u64(r) >> 40) / 16777216.0; /* [0, 1) with 24 bits */
    return (float)((2.0 * u - 1.0) * scale);
}

static inline void test_fill(test_rng *r, float *x, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++) x[i] = test_rng_float(r, scale);
}

static inline void *test_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) abort();
    return p;
}

static inline float *test_alloc_floats(int64_t n)
{
    return test_alloc((size_t)n * sizeof(float));
}

static inline double *test_alloc_doubles(int64_t n)
{
    return test_alloc((size_t)n * sizeof(double));
}

/* bf16 bits -> value: the top half of an fp32. */
static inline double test_bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* fp32 -> bf16, round to nearest even (finite inputs). */
static inline uint16_t test_bf16_encode(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t lsb = (u >> 16) & 1u;
    return (uint16_t)((u + 0x7FFFu + lsb) >> 16);
}

/* IEEE half bits -> value, from the definition (NaN for NaN, +-inf for inf). */
static inline double test_f16_value(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
    double v;
    if (exp == 0x1F) v = man ? NAN : INFINITY;
    else if (exp == 0) v = ldexp((double)man, -24);
    else v = ldexp(1.0 + man / 1024.0, exp - 15);
    return sign ? -v : v;
}

/* Random finite half with magnitude in [2^(emin-15), 2^(emax-14)): random sign and mantissa. */
static inline uint16_t test_f16_random(test_rng *r, int emin, int emax)
{
    uint64_t b = test_rng_u64(r);
    int exp = emin + (int)((b >> 20) % (uint64_t)(emax - emin + 1));
    return (uint16_t)(((b & 1) << 15) | ((uint64_t)exp << 10) | ((b >> 4) & 0x3FF));
}

#endif
