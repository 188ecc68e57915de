/* cpu_amx's AVX-512 attention for many query rows (avx512_attention.c says how). */
#ifndef VH_CPU_AMX_AVX512_ATTENTION_H
#define VH_CPU_AMX_AVX512_ATTENTION_H

#include <stdint.h>

#include "cpu_kernels.h"

/* Fewer query rows than this go to the portable kernel (a decode step: its time is reading the
 * cache, which the transpose would only add to). */
#define AVX512_ATTENTION_MIN_ROWS 16

typedef struct avx512_attention avx512_attention;

/* Scratch for the transposed keys of up to max_keys keys of kv_dim floats. NULL: out of memory. */
avx512_attention *avx512_attention_create(int64_t max_keys, int64_t kv_dim);
void avx512_attention_destroy(avx512_attention *a);
/* Whether this kernel takes the call (enough rows, keys within the scratch). */
int avx512_attention_fits(const avx512_attention *a, const vhk_attention_args *args);
/* vhk_attention's contract (cpu_kernels.h) on the pool; the CPU must have AVX-512 F. */
void avx512_attention_run(avx512_attention *a, vh_thread_pool *pool, const vhk_attention_args *args);

#endif
