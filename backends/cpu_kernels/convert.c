/* Weight dtype -> fp32 conversion, and embedding-row gathers built on it. */
#include <string.h>

#include "kernels_internal.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define VHK_X86 1
#endif
#if defined(__aarch64__)
#include <arm_neon.h>
#endif

/* Portable conversion; the vector variants use it for their tails. */
static void convert_generic(const void *src, vh_dtype dtype, float *dst, int64_t n)
{
    if (dtype == VH_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float));
    } else if (dtype == VH_DTYPE_BF16) {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = vh_bf16_to_f32(s[i]);
    } else {
        const uint16_t *s = src;
        for (int64_t i = 0; i < n; i++) dst[i] = vh_f16_to_f32(s[i]);
    }
}

#ifdef VHK_X86
__attribute__((target("avx512f")))
static void convert_avx512(const void *src, vh_dtype dtype, float *dst, int64_t n)
{
    if (dtype == VH_DTYPE_F32) {
        convert_generic(src, dtype, dst, n);
        return;
    }
    const uint16_t *s = src;
    int64_t i = 0;
    if (dtype == VH_DTYPE_BF16) {
        for (; i + 16 <= n; i += 16) {
            __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i)));
            _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)));
        }
    } else {
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
    }
    convert_generic(s + i, dtype, dst + i, n - i);
}

__attribute__((target("avx2,fma,f16c")))
static void convert_avx2(const void *src, vh_dtype dtype, float *dst, int64_t n)
{
    if (dtype == VH_DTYPE_F32) {
        convert_generic(src, dtype, dst, n);
        return;
    }
    const uint16_t *s = src;
    int64_t i = 0;
    if (dtype == VH_DTYPE_BF16) {
        for (; i + 8 <= n; i += 8) {
            __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
            _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(h, 16)));
        }
    } else {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    }
    convert_generic(s + i, dtype, dst + i, n - i);
}
#endif

#if defined(__aarch64__)
/* bf16: widen each 16-bit value into the high half of a 32-bit lane (ushll #16); f16: fcvtl,
 * for every half value (subnormals, infinities), NaN staying NaN (signalling ones quieted), as
 * F16C does. */
static void convert_neon(const void *src, vh_dtype dtype, float *dst, int64_t n)
{
    if (dtype == VH_DTYPE_F32) {
        convert_generic(src, dtype, dst, n);
        return;
    }
    const uint16_t *s = src;
    int64_t i = 0;
    if (dtype == VH_DTYPE_BF16) {
        for (; i + 8 <= n; i += 8) {
            uint16x8_t h = vld1q_u16(s + i);
            vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)));
            vst1q_f32(dst + i + 4, vreinterpretq_f32_u32(vshll_high_n_u16(h, 16)));
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(s + i));
            vst1q_f32(dst + i, vcvt_f32_f16(vget_low_f16(h)));
            vst1q_f32(dst + i + 4, vcvt_high_f32_f16(h));
        }
    }
    convert_generic(s + i, dtype, dst + i, n - i);
}
#endif

void vhk_convert_to_f32_isa(vhk_isa isa, const void *src, vh_dtype dtype, float *dst, int64_t n)
{
    if (n <= 0) return;
#ifdef VHK_X86
    if (isa == VHK_ISA_AVX512) { convert_avx512(src, dtype, dst, n); return; }
    if (isa == VHK_ISA_AVX2) { convert_avx2(src, dtype, dst, n); return; }
#elif defined(__aarch64__)
    if (isa == VHK_ISA_NEON) { convert_neon(src, dtype, dst, n); return; }
#else
    (void)isa;
#endif
    convert_generic(src, dtype, dst, n);
}

void vhk_convert_to_f32(const void *src, vh_dtype dtype, float *dst, int64_t n)
{
    vhk_convert_to_f32_isa(vhk_isa_detect(), src, dtype, dst, n);
}

void vhk_embed_rows(const vh_tensor_view *table, const int32_t *ids, int64_t n, float *out)
{
    int64_t vocab = table->shape[0], dim = table->shape[1];
    int64_t row_bytes = dim * vhk_dtype_size(table->dtype);
    vhk_isa isa = vhk_isa_detect();
    for (int64_t i = 0; i < n; i++) {
        float *dst = out + i * dim;
        if (ids[i] < 0 || ids[i] >= vocab) {
            memset(dst, 0, (size_t)dim * sizeof(float));
            continue;
        }
        const char *row = (const char *)table->data + (int64_t)ids[i] * row_bytes;
        vhk_convert_to_f32_isa(isa, row, table->dtype, dst, dim);
    }
}
