/* cuda_runtime.h — the host emulation's device side (`make CUDA=emu`; see
 * cuda_runtime_api.h and tests/cuda_emu/cuda_emu.cpp).
 *
 * Kernels are compiled as ordinary C++ by g++ after tests/cuda_emu/emu_cu.pl
 * rewrote each `k<<<grid, block, smem>>>(args)` into rl_emu_launch(...) and
 * each `extern __shared__ T name[]` into a pointer to the launch's dynamic
 * shared memory. A launch runs the grid's blocks one after another; each
 * block's threads are fibers (own stacks, a register switch) that yield only at __syncthreads and
 * warp shuffles, so a block's shared memory is a static array and the
 * built-ins (threadIdx, blockIdx, blockDim, gridDim) are globals the
 * scheduler sets before it resumes a thread. What it checks that a GPU would
 * only show as wrong numbers or a crash: the launch limits (block size,
 * grid, dynamic shared memory against the per-kernel attribute and an H100's
 * opt-in limit), a barrier or shuffle not reached by every thread that must
 * reach it, reads past a device allocation or the dynamic shared memory
 * (guard pages), uninitialised memory (allocations and shared memory start
 * as NaN bytes), and host code touching device memory. Races only in part:
 * the threads run in one fixed order between switch points, which
 * RL_CUDA_EMU_ORDER=reverse turns around (tests/run.sh runs test_nn_cuda
 * both ways); compute-sanitizer's racecheck on a GPU is the real check. Not
 * at all: timing, bank conflicts, what a GPU's memory model allows. */
#ifndef RL_CUDA_EMU_RUNTIME_H
#define RL_CUDA_EMU_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include <math.h>
#include <stdint.h>
#include <type_traits>

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
    unsigned x, y, z;
};
struct __attribute__((aligned(16))) float4 {
    float x, y, z, w;
};
struct __attribute__((aligned(8))) float2 {
    float x, y;
};
struct __attribute__((aligned(16))) uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

extern uint3 rl_emu_threadIdx, rl_emu_blockIdx;
extern dim3 rl_emu_blockDim, rl_emu_gridDim;
#define threadIdx rl_emu_threadIdx
#define blockIdx rl_emu_blockIdx
#define blockDim rl_emu_blockDim
#define gridDim rl_emu_gridDim
#define warpSize 32

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __fdividef(float a, float b) { return a / b; }

/* Not inline: a call the compiler cannot see through, so the built-ins are
 * read again after it (another thread ran in between). */
void __syncthreads(void);
float rl_emu_shfl_xor_f(unsigned mask, float v, int lane_mask);
double rl_emu_shfl_xor_d(unsigned mask, double v, int lane_mask);
int rl_emu_shfl_xor_i(unsigned mask, int v, int lane_mask);
static inline float __shfl_xor_sync(unsigned m, float v, int o) { return rl_emu_shfl_xor_f(m, v, o); }
static inline double __shfl_xor_sync(unsigned m, double v, int o) { return rl_emu_shfl_xor_d(m, v, o); }
static inline int __shfl_xor_sync(unsigned m, int v, int o) { return rl_emu_shfl_xor_i(m, v, o); }
void rl_emu_syncwarp(unsigned mask);
#define __syncwarp(...) rl_emu_syncwarp(0xffffffffu)
void *rl_emu_dyn_smem(void);

struct rl_emu_config {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};
static inline rl_emu_config rl_emu_cfg(dim3 g, dim3 b, size_t smem = 0, cudaStream_t s = 0)
{
    return rl_emu_config{g, b, smem, s};
}
void rl_emu_run(const char *name, const void *key, const rl_emu_config &c, void (*body)(void *),
                void *ctx);
template <typename F>
void rl_emu_launch(const char *name, const void *key, const rl_emu_config &c, F &&f)
{
    using G = typename std::remove_reference<F>::type;
    rl_emu_run(name, key, c, [](void *p) { (*(G *)p)(); }, (void *)&f);
}
template <typename K> const void *rl_emu_key(K k) { return (const void *)k; }

cudaError_t rl_emu_func_attr(const void *key, cudaFuncAttribute attr, int value);
template <typename K> cudaError_t cudaFuncSetAttribute(K k, cudaFuncAttribute attr, int value)
{
    return rl_emu_func_attr((const void *)k, attr, value);
}
#endif /* __cplusplus */
#endif
