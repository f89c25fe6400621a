/* ops_elem.h — the formulas of one element (or of the end of one row) that
 * a CPU kernel and its CUDA twin share, written once (not installed): the C
 * kernels (ops_cpu.c, ops_attn.c) inline them and nvcc compiles them for the
 * device as well (RL_HD). Each is the expression the kernels computed, in
 * the same order, so inlining it changes no result.
 *
 * Ownership: pure functions of their arguments; pointers are the caller's. */
#ifndef RLRT_NN_OPS_ELEM_H
#define RLRT_NN_OPS_ELEM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define RL_HD __host__ __device__
#else
#define RL_HD
#endif

/* Hyper-parameters are doubles, as in PyTorch (Python floats): 1 - beta2
 * must be formed in double before rounding to float32, or v drifts by
 * ~1e-5 relative from torch's. */
typedef struct rl_adamw_config {
    double beta1;        /* 0.9 */
    double beta2;        /* 0.999 */
    double eps;          /* 1e-8 */
    double weight_decay; /* 0.01 (PyTorch AdamW default) */
} rl_adamw_config;

/* AdamW's scalars of one step (rl_adamw_scalars_at): formed in
 * double and rounded once to float, as PyTorch does when a Python float
 * multiplies a float32 tensor. */
typedef struct rl_adamw_scalars {
    float decay;       /* 1 − lr·wd */
    int apply_decay;   /* wd != 0 */
    float b1, b2, one_b1, one_b2;
    float neg_step;    /* −lr / (1 − β1^t) */
    float bc2_sqrt;    /* sqrt(1 − β2^t) */
    float eps;
} rl_adamw_scalars;

/* The scalars of the update at step t (>= 1) with learning rate lr and
 * weight decay wd (the CPU and CUDA kernels' one source of them; host code). */
static inline rl_adamw_scalars rl_adamw_scalars_at(const rl_adamw_config *cfg, int64_t t, double lr,
                                                   double wd)
{
    const double bc1 = 1.0 - pow(cfg->beta1, (double)t);
    const double bc2 = 1.0 - pow(cfg->beta2, (double)t);
    rl_adamw_scalars s;
    s.decay = (float)(1.0 - lr * wd);
    s.apply_decay = wd != 0.0;
    s.b1 = (float)cfg->beta1;
    s.b2 = (float)cfg->beta2;
    s.one_b1 = (float)(1.0 - cfg->beta1);
    s.one_b2 = (float)(1.0 - cfg->beta2);
    s.neg_step = (float)(-(lr / bc1));
    s.bc2_sqrt = (float)sqrt(bc2);
    s.eps = (float)cfg->eps;
    return s;
}

/* One parameter's AdamW update: *p, *m, *v in place from its gradient g. */
RL_HD static inline void rl_adamw_elem(const rl_adamw_scalars *s, float *p, float g, float *m, float *v)
{
    float pi = *p;
    if (s->apply_decay)
        pi = pi * s->decay;
    float mi = *m * s->b1 + s->one_b1 * g;
    float vi = *v * s->b2 + s->one_b2 * g * g;
    float denom = sqrtf(vi) / s->bc2_sqrt + s->eps;
    *p = pi + s->neg_step * mi / denom; /* torch addcdiv: self + value*t1/t2 */
    *m = mi;
    *v = vi;
}

/* The end of row n of a log-prob forward over logits z (V), with m = max
 * of z·inv_temp, s = Σ e^(a−m) and sa = Σ e^(a−m)·(a−m) over a = z·inv_temp
 * (sums in double): lse, the entropy and the log-prob of target y (0 when
 * y < 0), each where its array is not NULL. */
RL_HD static inline void rl_logprob_row_end(int n, const float *z, int y, float inv_temp, float m,
                                            double s, double sa, float *logp, float *entropy, float *lse)
{
    double l = m + log(s);
    if (lse)
        lse[n] = (float)l;
    if (entropy)
        entropy[n] = (float)(log(s) - sa / s);
    if (logp)
        logp[n] = y >= 0 ? (float)((double)z[y] * inv_temp - l) : 0.0f;
}

/* dL/da_j of a log-prob row at a_j with lp = a_j − lse and p = e^lp, for
 * the gradients gl of the target's log-prob and ge of the entropy H:
 * d logp/da_j = δ_jy − p_j, dH/da_j = −p_j (lp + H); the δ_jy·gl term is the
 * caller's. */
RL_HD static inline float rl_logprob_grad(float gl, float ge, float lp, float p, float H)
{
    return -gl * p - ge * p * (lp + H);
}

/* Element (r, i) of the flow trunks' time embedding (rl_time_embed): the
 * pair [i] = sin(1000·t·f_i), [half + i] = cos(1000·t·f_i), f_i =
 * 10000^(−i/half), in double. */
RL_HD static inline void rl_time_embed_elem(float *e, float t, int i, int half)
{
    double f = exp(-log(10000.0) * (double)i / (double)half);
    double arg = 1000.0 * (double)t * f;
    e[i] = (float)sin(arg);
    e[half + i] = (float)cos(arg);
}

/* One standardised input (rl_standardize): (x − mu) / sd, clamped to ±clip
 * when clip > 0. */
RL_HD static inline float rl_standardize_elem(float x, float mu, float sd, float clip)
{
    float o = (x - mu) / sd;
    if (clip > 0)
        o = o > clip ? clip : o < -clip ? -clip : o;
    return o;
}

/* ---- bfloat16 (model.precision bf16) ------------------------------------
 * A bf16 value is the top 16 bits of a float32 (sign, 8 exponent bits, 7
 * mantissa bits), kept as its bits in a uint16_t. rl_bf16_round rounds to
 * nearest, ties to even, as torch's c10::BFloat16 does: subnormals round like
 * any other value (no flush to zero), a value past the largest finite bf16
 * becomes ±Inf, ±Inf stay, and every NaN becomes the quiet NaN 0x7FC0. */
RL_HD static inline uint32_t rl_f32_bits(float x)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
#endif
}

RL_HD static inline float rl_bits_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
#endif
}

RL_HD static inline uint16_t rl_bf16_round(float x)
{
    uint32_t u = rl_f32_bits(x);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
        return 0x7FC0;
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* The float32 a bf16 value is (exact). */
RL_HD static inline float rl_bf16_to_float(uint16_t h) { return rl_bits_f32((uint32_t)h << 16); }

#endif
