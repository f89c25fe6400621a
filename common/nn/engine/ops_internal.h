/* ops_internal.h — private helpers shared by the CPU kernels (not installed).
 *
 * RL_OMP_FOR runs the next for-loop on rl_nn_get_threads() OpenMP threads
 * with a static schedule, so the split of work (and hence every result) is a
 * pure function of the thread count. */
#ifndef RLRT_NN_OPS_INTERNAL_H
#define RLRT_NN_OPS_INTERNAL_H

#include "common/nn/engine/ops.h"

#define RL_PRAGMA(x) _Pragma(#x)
#define RL_OMP_FOR RL_PRAGMA(omp parallel for num_threads(rl_nn_get_threads()) schedule(guided))
/* Same, but on one thread when `cond` is false. */
#define RL_OMP_FOR_IF(cond) \
    RL_PRAGMA(omp parallel for if(cond) num_threads(rl_nn_get_threads()) schedule(guided))

/* Same, vectorising the loop body too. */
#define RL_OMP_FOR_SIMD_IF(cond) \
    RL_PRAGMA(omp parallel for simd if(parallel: cond) num_threads(rl_nn_get_threads()) schedule(guided))

/* Element counts below which a loop stays on one thread (thread start-up
 * costs more than the work). */
#define RL_PAR_MIN (1 << 20)

/* Multiply-adds (M·N·K) below which rl_sgemm runs one BLAS call on one
 * thread instead of splitting the product across the threads. */
#define RL_SGEMM_SPLIT_MIN 8.0e6

/* ---- vectorisable helpers ------------------------------------------------
 * RL_SIMD asks the compiler to vectorise the next loop (honoured at -O2
 * because the build uses -fopenmp); RL_SIMD_SUM(v) adds a sum reduction. */
#define RL_SIMD RL_PRAGMA(omp simd)
#define RL_SIMD_SUM(v) RL_PRAGMA(omp simd reduction(+ : v))

#include <stdint.h>
#include <string.h>

/* cond ? a : b without a branch: gcc -O2 keeps a float ?: as control flow
 * (NaN rules forbid min/max), which stops RL_SIMD loops from vectorising. */
static inline float rl_selectf(int cond, float a, float b)
{
    int32_t ai, bi, m = -(int32_t)(cond != 0);
    memcpy(&ai, &a, sizeof ai);
    memcpy(&bi, &b, sizeof bi);
    int32_t r = (ai & m) | (bi & ~m);
    float f;
    memcpy(&f, &r, sizeof f);
    return f;
}

/* exp(x), relative error < 1e-7 for -87.3 <= x <= 88.3 (x is clamped to that
 * range, so no inf/denormal surprises), NaN for NaN: x = n·ln2 + r with the
 * Cephes two-part ln2 and a degree-6 polynomial. Inline and branch-free so
 * RL_SIMD loops vectorise it (glibc's expf is a scalar call per element). */
static inline float rl_fast_expf(float x)
{
    const float x0 = x; /* the clamp below would turn a NaN into 88.3 */
    x = rl_selectf(x < 88.3f, x, 88.3f);
    x = rl_selectf(x > -87.3f, x, -87.3f);
    float t = x * 1.44269504088896341f + 12582912.0f; /* round-to-nearest via 1.5·2^23 */
    float n = t - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t e = ((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &e, sizeof s);
    return rl_selectf(x0 == x0, p * s, x0);
}

#endif
