/* e^x on 16 lanes for x <= 0 (softmax weights, the SiLU gate's e^-|g|), AVX-512 F: x = n ln2 + r,
 * |r| <= ln2 / 2 (Cody-Waite: ln2 = 0.693359375 + LN2_LO, so n * 0.693359375 is exact), e^r by
 * its degree-7 Taylor polynomial (truncation < 6e-9), 2^n in the exponent bits; x < -87.3 (e^x
 * below 2^-126) gives 0. Within a few ulp of expf. Internal to cpu_amx. */
#ifndef VH_CPU_AMX_AVX512_EXP_H
#define VH_CPU_AMX_AVX512_EXP_H

#include <immintrin.h>

__attribute__((target("avx512f"), always_inline)) static inline __m512 avx512_exp_nonpositive(__m512 x)
{
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440054690583e-4f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GE_OQ);
    const __m512i e = _mm512_max_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(-126));
    const __m512 two_n = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(127)), 23));
    return _mm512_maskz_mul_ps(keep, p, two_n);
}

#endif
