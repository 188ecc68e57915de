/* bench_resize: milliseconds per vh_resize_bicubic_rgb8 call for camera-frame sizes, on one core.
 *
 *   ninja -C build bench/bench_resize && build/bench/bench_resize [iterations]
 *
 * Sources are seeded pseudo-random RGB8 (the cost does not depend on pixel values). Each case runs
 * with every code path this CPU has (vh_resize_code) and prints the best and the median time of
 * its calls and a checksum of its output, so code paths and builds can be compared for speed and
 * for identical results. Not installed, not run by `meson test`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "image/bicubic_resize.h"
#include "bench_clock.h"

/* Time `iterations` calls (after three warm-up calls) of one size with one code path. */
static int bench(uint32_t sw, uint32_t sh, uint32_t dw, uint32_t dh, vh_resize_code code,
                 const char *code_name, int iterations, double *times)
{
    size_t src_bytes = (size_t)sw * sh * 3, dst_bytes = (size_t)dw * dh * 3;
    uint8_t *src = malloc(src_bytes), *dst = malloc(dst_bytes);
    if (!src || !dst) {
        free(src);
        free(dst);
        return 1;
    }
    uint32_t state = 12345;
    for (size_t i = 0; i < src_bytes; i++) {
        state = state * 1664525u + 1013904223u;
        src[i] = (uint8_t)(state >> 24);
    }
    vh_error err = {0};
    for (int i = -3; i < iterations; i++) {
        double t0 = vh_bench_now_ms();
        if (vh_resize_bicubic_rgb8_code(src, sw, sh, 0, dst, dw, dh, code, &err) != VH_OK) {
            fprintf(stderr, "bench_resize: %s\n", err.message);
            free(src);
            free(dst);
            return 1;
        }
        if (i >= 0)
            times[i] = vh_bench_now_ms() - t0;
    }
    qsort(times, (size_t)iterations, sizeof *times, vh_bench_cmp_double);
    uint32_t sum = 2166136261u; /* FNV-1a of the output */
    for (size_t i = 0; i < dst_bytes; i++)
        sum = (sum ^ dst[i]) * 16777619u;
    printf("%4ux%-4u -> %4ux%-4u  %-8s  best %7.3f ms  median %7.3f ms  (%d calls)  output %08x\n",
           sw, sh, dw, dh, code_name, times[0], times[iterations / 2], iterations, sum);
    free(src);
    free(dst);
    return 0;
}

int main(int argc, char **argv)
{
    int iterations = argc > 1 ? atoi(argv[1]) : 200;
    if (iterations < 1)
        iterations = 1;
    static const struct { uint32_t sw, sh, dw, dh; } cases[] = {
        {640, 480, 224, 224},
        {1920, 1080, 224, 224},
        {224, 224, 640, 480}, /* enlarging, for completeness */
    };
    static const struct { vh_resize_code code; const char *name; } codes[] = {
        {VH_RESIZE_CODE_BEST, "best"},
        {VH_RESIZE_CODE_PORTABLE, "portable"},
        {VH_RESIZE_CODE_AVX2, "avx2"},
        {VH_RESIZE_CODE_NEON, "neon"},
    };
    double *times = malloc((size_t)iterations * sizeof *times);
    if (!times)
        return 1;
    int status = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0] && !status; c++)
        for (size_t v = 0; v < sizeof codes / sizeof codes[0] && !status; v++)
            if (vh_resize_code_available(codes[v].code))
                status = bench(cases[c].sw, cases[c].sh, cases[c].dw, cases[c].dh, codes[v].code,
                               codes[v].name, iterations, times);
    free(times);
    return status;
}
