/*
 * Attention for many query rows (ViT tokens, a prefill segment) on tensor cores: FlashAttention-2's
 * scheme with mma.sync m16n8k16 (bf16 operands, fp32 accumulation); no score matrix in memory.
 *
 * A block owns FA_ROWS query rows (FA_WARPS warps x 16) of one head. Key tiles of FA_KEYS keys are
 * staged in shared memory as they lie in global memory (16-byte stores; rows padded by 8 elements
 * against bank conflicts, the tiles sized by the head dim at launch); ldmatrix reads them as the
 * mma's B operand, K as is and V transposed (.trans), four 8x8 matrices an instruction. Per warp
 * and tile: S = Q K^T in registers (fp32), scaled by scale * log2(e) and masked; online softmax
 * per row in fp32 in base 2 (running max m, sum l, the accumulator rescaled by exp2(m_old - m_new),
 * FlashAttention-2's way: the same weights as exp of the natural scores, one multiply fewer each);
 * P rounded to bf16 becomes the A operand of O += P V. Head dims are padded to a multiple of 16
 * with zeros.
 *
 * Masks: query row i uses keys j < n_keys(i): n_keys_dense for every row (first_position < 0), or
 * first_position + i + 1 (causal: a prefill segment whose row 0 sits at first_position). A row with
 * n_keys <= 0 gets zeros.
 *
 * Precision against the fp32 kernel (cuda_kernels.cu): the same fp32 softmax, but P enters P V
 * rounded to bf16 (relative error <= 2^-9 per weight, as in FlashAttention), and the tensor cores'
 * fp32 sums run in their own order.
 */
#include <math.h>
#include <stdint.h>

#include "cuda_device.cuh"

#define FA_WARPS 4
#define FA_ROWS (16 * FA_WARPS)
#define FA_KEYS 64
static_assert(FA_ROWS == VHC_FLASH_TILE_ROWS, "a tile is one block's rows");
#define FA_PAD 8 /* elements added to each shared row: rows 16 bytes apart mod 128 -> no bank conflicts */

/* c (16x8 fp32) += a (16x16 bf16, row) . b (16x8 bf16, col) */
static __device__ __forceinline__ void mma_bf16(float *c, const unsigned *a, unsigned b0, unsigned b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ unsigned ld32(const unsigned short *p)
{
    return *(const unsigned *)p;
}

static __device__ __forceinline__ unsigned smem_addr(const void *p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

/* Four 8x8 bf16 matrices from shared memory: lane l gives the address of row l % 8 of matrix l / 8;
 * r[i] gets matrix i's fragment (row lane / 4, columns 2 (lane % 4), +1), transposed with .trans. */
static __device__ __forceinline__ void ldmatrix_x4(unsigned *r, const unsigned short *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row))
                 : "memory");
}

static __device__ __forceinline__ void ldmatrix_x4_trans(unsigned *r, const unsigned short *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_addr(row))
                 : "memory");
}

/* Two matrices (lanes 0..15 give the addresses; the others' are ignored but kept in range). */
static __device__ __forceinline__ void ldmatrix_x2(unsigned *r, const unsigned short *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_addr(row))
                 : "memory");
}

/* Shared memory of a block: K and V tiles of FA_KEYS rows of HDP + FA_PAD elements. */
#define FA_SMEM_BYTES(HDP) ((size_t)2 * FA_KEYS * ((HDP) + FA_PAD) * sizeof(unsigned short))

/* HDP: head_dim padded to a multiple of 16 (a compile-time constant per kernel). */
static __device__ __forceinline__ void fa_block(const vhc_bf16 *__restrict__ q, int64_t q_stride,
                                                const vhc_bf16 *__restrict__ k, const vhc_bf16 *__restrict__ v,
                                                int64_t kv_stride, vhc_bf16 *__restrict__ out, int64_t out_stride,
                                                int R, int group, int hd, float scale, int n_keys_dense,
                                                int first_position, int row_block, const int HDP)
{
    extern __shared__ __align__(16) unsigned short fa_smem[];
    const int LD = HDP + FA_PAD; /* a staged row: 16-byte multiples, rows 16 bytes apart mod 128 */
    unsigned short *ks = fa_smem, *vs = fa_smem + FA_KEYS * LD;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int gid = lane >> 2, tig = lane & 3;
    const float scale_log2 = scale * 1.44269504088896341f; /* exp(x scale) = exp2(x scale log2(e)) */
    const int h = blockIdx.y, kvh = h / group;
    const int r0 = row_block * FA_ROWS + warp * 16; /* this warp's first row */
    const vhc_bf16 *kh = k + (int64_t)kvh * hd, *vh = v + (int64_t)kvh * hd;

    /* rows gid and gid + 8 of the warp: their key limits */
    const int ra = r0 + gid, rb = r0 + gid + 8;
    const int na = ra >= R ? 0 : first_position < 0 ? n_keys_dense : first_position + ra + 1;
    const int nb = rb >= R ? 0 : first_position < 0 ? n_keys_dense : first_position + rb + 1;
    /* keys the block needs (its last row's limit) and keys that exist */
    const int last = min(R, (row_block + 1) * FA_ROWS) - 1;
    const int n_block = first_position < 0 ? n_keys_dense : first_position + last + 1;

    /* Q fragments (A operand): rows gid / gid + 8, columns kc * 16 + tig * 2 (+8) */
    unsigned qa[8][4];
#pragma unroll
    for (int kc = 0; kc < HDP / 16; kc++) {
#pragma unroll
        for (int part = 0; part < 4; part++) {
            const int row = (part & 1) ? rb : ra, col = kc * 16 + tig * 2 + ((part & 2) ? 8 : 0);
            qa[kc][part] = row < R && col < hd ? ld32(q + (int64_t)row * q_stride + (int64_t)h * hd + col) : 0u;
        }
    }

    float o[16][4];
#pragma unroll
    for (int dn = 0; dn < HDP / 8; dn++) o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0.0f;
    float ma = -INFINITY, mb = -INFINITY, la = 0.0f, lb = 0.0f;

    for (int t0 = 0; t0 < n_block; t0 += FA_KEYS) {
        __syncthreads(); /* the previous tile is consumed */
        /* stage keys t0 .. t0 + FA_KEYS - 1: 16-byte pieces, zeros beyond n_block or hd. A thread
         * has HDP / 16 pieces of K and of V; their loads are issued in groups of 4 before any store,
         * so the tile costs a few global-memory latencies, not one per piece. */
#pragma unroll
        for (int g = 0; g < HDP / 16; g += 4) {
            uint4 kr[4], vr[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                const int p = threadIdx.x + (g + u) * FA_WARPS * 32, j = p % FA_KEYS, c = p / FA_KEYS * 8;
                kr[u] = vr[u] = make_uint4(0, 0, 0, 0);
                if (g + u < HDP / 16 && t0 + j < n_block && c < hd) {
                    const int64_t off = (int64_t)(t0 + j) * kv_stride + c;
                    kr[u] = *(const uint4 *)(kh + off);
                    vr[u] = *(const uint4 *)(vh + off);
                }
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                if (g + u >= HDP / 16) break;
                const int p = threadIdx.x + (g + u) * FA_WARPS * 32, j = p % FA_KEYS, c = p / FA_KEYS * 8;
                *(uint4 *)&ks[j * LD + c] = kr[u];
                *(uint4 *)&vs[j * LD + c] = vr[u];
            }
        }
        __syncthreads();
        if (r0 >= R) continue; /* a warp past the last row only helps staging */

        /* S = Q K^T: 8 tiles of 8 keys; B fragments of two 16-column chunks an ldmatrix (matrices:
         * the tile's 8 keys at columns kc 16, kc 16 + 8, kc 16 + 16, kc 16 + 24) */
        float s[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
            const unsigned short *krow = &ks[(nt * 8 + (lane & 7)) * LD + (lane >> 3) * 8];
#pragma unroll
            for (int kc = 0; kc + 1 < HDP / 16; kc += 2) {
                unsigned b[4];
                ldmatrix_x4(b, krow + kc * 16);
                mma_bf16(s[nt], qa[kc], b[0], b[1]);
                mma_bf16(s[nt], qa[kc + 1], b[2], b[3]);
            }
            if ((HDP / 16) & 1) {
                unsigned b[2];
                ldmatrix_x2(b, &ks[(nt * 8 + (lane & 7)) * LD + ((lane >> 3) & 1) * 8 + (HDP / 16 - 1) * 16]);
                mma_bf16(s[nt], qa[HDP / 16 - 1], b[0], b[1]);
            }
        }
        /* scale, mask, row maxima (each row's 64 scores live in the 4 threads of a group) */
        float xa = -INFINITY, xb = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int j = t0 + nt * 8 + tig * 2 + (e & 1);
                const float sc = j < ((e & 2) ? nb : na) ? s[nt][e] * scale_log2 : -INFINITY;
                s[nt][e] = sc;
                if (e & 2) xb = fmaxf(xb, sc);
                else xa = fmaxf(xa, sc);
            }
        }
        xa = fmaxf(xa, __shfl_xor_sync(FULL_MASK, xa, 1));
        xa = fmaxf(xa, __shfl_xor_sync(FULL_MASK, xa, 2));
        xb = fmaxf(xb, __shfl_xor_sync(FULL_MASK, xb, 1));
        xb = fmaxf(xb, __shfl_xor_sync(FULL_MASK, xb, 2));
        const float mna = fmaxf(ma, xa), mnb = fmaxf(mb, xb);
        const float ua = mna == -INFINITY ? 0.0f : mna, ub = mnb == -INFINITY ? 0.0f : mnb; /* keep NaN out */
        const float ca = exp2f(ma - ua), cb = exp2f(mb - ub);
        ma = mna, mb = mnb;
        float sa = 0.0f, sb = 0.0f;
        unsigned pa[4][4]; /* P as A operand: 4 chunks of 16 keys */
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            const float p0 = exp2f(s[nt][0] - ua), p1 = exp2f(s[nt][1] - ua);
            const float p2 = exp2f(s[nt][2] - ub), p3 = exp2f(s[nt][3] - ub);
            sa += p0 + p1;
            sb += p2 + p3;
            pa[nt >> 1][(nt & 1) * 2 + 0] = pack_bf2(p0, p1);
            pa[nt >> 1][(nt & 1) * 2 + 1] = pack_bf2(p2, p3);
        }
        sa += __shfl_xor_sync(FULL_MASK, sa, 1);
        sa += __shfl_xor_sync(FULL_MASK, sa, 2);
        sb += __shfl_xor_sync(FULL_MASK, sb, 1);
        sb += __shfl_xor_sync(FULL_MASK, sb, 2);
        la = la * ca + sa;
        lb = lb * cb + sb;
        /* O = O * corr + P V; B fragments of V transposed, two 8-column groups an ldmatrix
         * (matrices: keys kc 16 and kc 16 + 8 at columns dn 8, then at dn 8 + 8) */
#pragma unroll
        for (int dn = 0; dn < HDP / 8; dn++) o[dn][0] *= ca, o[dn][1] *= ca, o[dn][2] *= cb, o[dn][3] *= cb;
#pragma unroll
        for (int kc = 0; kc < FA_KEYS / 16; kc++) {
            const unsigned short *vrow = &vs[(kc * 16 + (lane & 15)) * LD];
#pragma unroll
            for (int dn = 0; dn < HDP / 8; dn += 2) {
                unsigned b[4];
                ldmatrix_x4_trans(b, vrow + dn * 8 + (lane >> 4) * 8);
                mma_bf16(o[dn], pa[kc], b[0], b[1]);
                mma_bf16(o[dn + 1], pa[kc], b[2], b[3]);
            }
        }
    }
    if (r0 >= R) return;
#pragma unroll
    for (int dn = 0; dn < HDP / 8; dn++) {
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int row = (e & 2) ? rb : ra, col = dn * 8 + tig * 2 + (e & 1);
            const int n = (e & 2) ? nb : na;
            const float l = (e & 2) ? lb : la;
            if (row < R && col < hd) out[(int64_t)row * out_stride + (int64_t)h * hd + col] = f2bf(n > 0 ? o[dn][e] / l : 0.0f);
        }
    }
}

#define FA_PARAMS                                                                                                   \
    const vhc_bf16 *__restrict__ q, int64_t q_stride, const vhc_bf16 *__restrict__ k, const vhc_bf16 *__restrict__ v, \
        int64_t kv_stride, vhc_bf16 *__restrict__ out, int64_t out_stride, int R, int group, int hd, float scale,     \
        int n_keys_dense, int first_position, int64_t batch_stride /* elements between blockIdx.z's problems */
#define FA_TILES_PARAMS                                                                                             \
    const vhc_bf16 *__restrict__ q, int64_t q_stride, const vhc_bf16 *__restrict__ k, const vhc_bf16 *__restrict__ v, \
        int64_t kv_stride, vhc_bf16 *__restrict__ out, int64_t out_stride, const vhc_attention_tile *__restrict__ tiles, \
        int group, int hd, float scale
/* Blocks an SM is asked to hold: at most 128 registers a thread up to head dim 64 (four blocks). */
#define FA_MIN_BLOCKS(HDP) ((HDP) <= 64 ? 4 : 2)
#define FA_KERNEL(HDP)                                                                                              \
    __global__ void __launch_bounds__(FA_WARPS * 32, FA_MIN_BLOCKS(HDP)) k_flash_attention_##HDP(FA_PARAMS)        \
    {                                                                                                               \
        const int64_t z = (int64_t)blockIdx.z * batch_stride;                                                      \
        fa_block(q + z, q_stride, k + z, v + z, kv_stride, out + z, out_stride, R, group, hd, scale, n_keys_dense,  \
                 first_position, (int)blockIdx.x, HDP);                                                             \
    }                                                                                                               \
    __global__ void __launch_bounds__(FA_WARPS * 32, FA_MIN_BLOCKS(HDP))                                        \
        k_flash_attention_tiles_##HDP(FA_TILES_PARAMS)                                                              \
    {                                                                                                               \
        const vhc_attention_tile t = tiles[blockIdx.x];                                                             \
        fa_block(q + t.first_row * q_stride, q_stride, k + t.kv_base, v + t.kv_base, kv_stride,                     \
                 out + t.first_row * out_stride, out_stride, t.n_rows, group, hd, scale, 0, t.first_position, 0, HDP);  \
    }
FA_KERNEL(16)
FA_KERNEL(32)
FA_KERNEL(48)
FA_KERNEL(64)
FA_KERNEL(80)
FA_KERNEL(96)
FA_KERNEL(112)
FA_KERNEL(128)

extern "C" int vhc_flash_attention_supported(const vhc_bf16 *q, int64_t q_stride, const vhc_bf16 *k,
                                             const vhc_bf16 *v, int64_t kv_stride, int64_t out_stride, int n_heads,
                                             int n_kv_heads, int head_dim)
{
    return head_dim >= 8 && head_dim <= 128 && head_dim % 8 == 0 && n_heads > 0 && n_heads <= 65535 &&
           n_kv_heads > 0 && n_heads % n_kv_heads == 0 && ((uintptr_t)q & 3) == 0 && q_stride % 2 == 0 &&
           ((uintptr_t)k & 15) == 0 && ((uintptr_t)v & 15) == 0 && kv_stride % 8 == 0 && out_stride >= 0;
}

extern "C" void vhc_flash_attention_batch(cudaStream_t s, const vhc_bf16 *q, int64_t q_stride, const vhc_bf16 *k,
                                          const vhc_bf16 *v, int64_t kv_stride, vhc_bf16 *out, int64_t out_stride,
                                          int R, int n_heads, int n_kv_heads, int head_dim, float scale,
                                          int n_keys_dense, int first_position, int n_batch, int64_t batch_stride)
{
    static void (*const kernels[8])(FA_PARAMS) = {k_flash_attention_16, k_flash_attention_32, k_flash_attention_48,
                                                  k_flash_attention_64, k_flash_attention_80, k_flash_attention_96,
                                                  k_flash_attention_112, k_flash_attention_128};
    if (R <= 0 || n_batch <= 0 || n_batch > 65535 ||
        !vhc_flash_attention_supported(q, q_stride, k, v, kv_stride, out_stride, n_heads, n_kv_heads, head_dim) ||
        (n_batch > 1 && batch_stride % 8 != 0))
        return;
    dim3 grid((unsigned)((R + FA_ROWS - 1) / FA_ROWS), (unsigned)n_heads, (unsigned)n_batch);
    const int chunks = (head_dim + 15) / 16;
    kernels[chunks - 1]<<<grid, FA_WARPS * 32, FA_SMEM_BYTES(16 * chunks), s>>>(q, q_stride, k, v, kv_stride, out, out_stride, R,
                                                                    n_heads / n_kv_heads, head_dim, scale,
                                                                    n_keys_dense, first_position, batch_stride);
}

extern "C" void vhc_flash_attention(cudaStream_t s, const vhc_bf16 *q, int64_t q_stride, const vhc_bf16 *k,
                                    const vhc_bf16 *v, int64_t kv_stride, vhc_bf16 *out, int64_t out_stride, int R,
                                    int n_heads, int n_kv_heads, int head_dim, float scale, int n_keys_dense,
                                    int first_position)
{
    vhc_flash_attention_batch(s, q, q_stride, k, v, kv_stride, out, out_stride, R, n_heads, n_kv_heads, head_dim,
                              scale, n_keys_dense, first_position, 1, 0);
}

extern "C" void vhc_flash_attention_tiles(cudaStream_t s, const vhc_bf16 *q, int64_t q_stride, const vhc_bf16 *k,
                                          const vhc_bf16 *v, int64_t kv_stride, vhc_bf16 *out, int64_t out_stride,
                                          const vhc_attention_tile *tiles, int n_tiles, int n_heads, int n_kv_heads,
                                          int head_dim, float scale)
{
    static void (*const kernels[8])(FA_TILES_PARAMS) = {
        k_flash_attention_tiles_16, k_flash_attention_tiles_32, k_flash_attention_tiles_48,
        k_flash_attention_tiles_64, k_flash_attention_tiles_80, k_flash_attention_tiles_96,
        k_flash_attention_tiles_112, k_flash_attention_tiles_128};
    if (n_tiles <= 0 ||
        !vhc_flash_attention_supported(q, q_stride, k, v, kv_stride, out_stride, n_heads, n_kv_heads, head_dim))
        return;
    dim3 grid((unsigned)n_tiles, (unsigned)n_heads, 1);
    const int chunks = (head_dim + 15) / 16;
    kernels[chunks - 1]<<<grid, FA_WARPS * 32, FA_SMEM_BYTES(16 * chunks), s>>>(q, q_stride, k, v, kv_stride, out, out_stride,
                                                                    tiles, n_heads / n_kv_heads, head_dim, scale);
}
