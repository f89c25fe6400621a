/* mma.h — the host emulation of CUDA's warp matrix functions (nvcuda::wmma)
 * for `make CUDA=emu`, the 16×16×16 shape with bf16 inputs and float32
 * accumulators that common/nn/engine/cuda's attention kernels use.
 *
 * On a GPU a fragment is spread over the warp's 32 lanes in an unspecified
 * layout. Here every lane holds the whole 16×16 tile (x[] in row-major
 * order, num_elements = 256) and mma_sync computes all of it in float32
 * (sequential fmaf over k; a GPU's order differs, the products of bf16
 * inputs are exact either way). So a kernel that touches fragments only
 * through fill/load/mma/store gets the GPU's results up to the order of
 * float32 sums. What a GPU requires and this checks (a message and abort(),
 * as a GPU's launch fails): load and store pointers 32-byte aligned, ldm a
 * multiple of 8 bf16 or 4 floats. What it models: store_matrix_sync writes
 * only this lane's share of the tile (element i of 256 when i % 32 is the
 * lane), as a GPU's lanes each write theirs, so a lane that reads the tile
 * back with plain loads before a __syncwarp() sees the other lanes'
 * elements unwritten in one of the two thread orders (RL_CUDA_EMU_ORDER).
 * A load is a warp collective as on a GPU, where the warp's lanes execute
 * it together: a switch point that all 32 lanes must reach (as a shuffle)
 * before any reads, so no lane's later store can reach another lane's load
 * of the same call. The other calls are not switch points. */
#ifndef RL_CUDA_EMU_MMA_H
#define RL_CUDA_EMU_MMA_H

#include "cuda_bf16.h"
#include "cuda_runtime.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulation has the 16x16x16 shape only");
    enum { num_elements = 256 };
    float x[256]; /* (row, col) at row * 16 + col, whatever the use */
};

[[noreturn]] inline void rl_emu_wmma_fail(const char *what, const void *p, unsigned ldm)
{
    fprintf(stderr, "cuda emulation: wmma %s: pointer %p, ldm %u (a GPU needs 32-byte aligned "
                    "tiles and ldm a multiple of 16 bytes)\n", what, p, ldm);
    abort();
}

inline unsigned rl_emu_lane(void)
{
    unsigned lin = threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
    return lin % 32;
}

inline float rl_emu_bf16_value(const __nv_bfloat16 &h)
{
    uint32_t u = (uint32_t)h.x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

template <typename Use, typename L>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, L> &a, const __nv_bfloat16 *p,
                             unsigned ldm)
{
    if (((uintptr_t)p & 31) || ldm % 8)
        rl_emu_wmma_fail("load (bf16)", p, ldm);
    rl_emu_syncwarp(0xffffffffu);
    const bool rows = std::is_same<L, row_major>::value;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            a.x[i * 16 + j] = rl_emu_bf16_value(rows ? p[(size_t)i * ldm + j] : p[(size_t)j * ldm + i]);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &c, const float *p, unsigned ldm,
                             layout_t l)
{
    if (((uintptr_t)p & 31) || ldm % 4)
        rl_emu_wmma_fail("load (float)", p, ldm);
    rl_emu_syncwarp(0xffffffffu);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            c.x[i * 16 + j] = l == mem_row_major ? p[(size_t)i * ldm + j] : p[(size_t)j * ldm + i];
}

inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &c, unsigned ldm,
                              layout_t l)
{
    if (((uintptr_t)p & 31) || ldm % 4)
        rl_emu_wmma_fail("store (float)", p, ldm);
    for (unsigned e = rl_emu_lane(); e < 256; e += 32) {
        unsigned i = e / 16, j = e % 16;
        (l == mem_row_major ? p[(size_t)i * ldm + j] : p[(size_t)j * ldm + i]) = c.x[e];
    }
}

template <typename Use, typename T, typename L>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, L> &f, float v)
{
    for (int e = 0; e < 256; e++)
        f.x[e] = v;
}

/* The 32 lanes of a warp multiply the same tiles: the first computes, the
 * others find its inputs (compared in full, not only by hash) in a small
 * table and copy the result. Only a speed-up of the emulation. */
struct rl_emu_mma_memo {
    float in[768], out[256];
    bool used;
};
inline rl_emu_mma_memo rl_emu_mma_table[256];

/* Fragments are the lane's own (its fiber's stack): under TSan the product
 * is not instrumented (the loads and stores of shared memory are). */
#ifdef __SANITIZE_THREAD__
#define RL_EMU_WMMA_LOCAL __attribute__((no_sanitize("thread")))
#else
#define RL_EMU_WMMA_LOCAL
#endif

template <typename LA, typename LB>
RL_EMU_WMMA_LOCAL inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c)
{
#ifndef __SANITIZE_THREAD__ /* under TSan every lane computes: the shared table would race */
    uint32_t hsh = 2166136261u;
    const float *part[3] = {a.x, b.x, c.x};
    for (int p = 0; p < 3; p++)
        for (int e = 0; e < 256; e += 4) {
            uint32_t w;
            memcpy(&w, &part[p][e], sizeof w);
            hsh = (hsh ^ w) * 16777619u;
        }
    rl_emu_mma_memo &m = rl_emu_mma_table[(hsh ^ (hsh >> 16)) & 255];
    if (m.used && memcmp(m.in, a.x, sizeof a.x) == 0 && memcmp(m.in + 256, b.x, sizeof b.x) == 0 &&
        memcmp(m.in + 512, c.x, sizeof c.x) == 0) {
        memcpy(d.x, m.out, sizeof m.out);
        return;
    }
    memcpy(m.in, a.x, sizeof a.x);
    memcpy(m.in + 256, b.x, sizeof b.x);
    memcpy(m.in + 512, c.x, sizeof c.x);
#endif
    float r[256];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = c.x[i * 16 + j];
            for (int k = 0; k < 16; k++)
                s = fmaf(a.x[i * 16 + k], b.x[k * 16 + j], s);
            r[i * 16 + j] = s;
        }
#ifndef __SANITIZE_THREAD__
    memcpy(m.out, r, sizeof r);
    m.used = true;
#endif
    memcpy(d.x, r, sizeof r);
}

} // namespace wmma
} // namespace nvcuda

#endif
