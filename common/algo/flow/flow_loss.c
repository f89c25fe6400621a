/* flow_loss.c — FlowIPO and FlowSAR losses with dL/dv_θ (common/algo/flow/flow.h).
 *
 * FlowIPO walks the (N, D) arrays once. FlowSAR needs a chunk's energies
 * before its gradient, so it works in blocks of chunks: sums, then scalar
 * math, then a second pass over the block's floats while they are still in
 * L1. NaN/Inf is detected from the
 * per-chunk sums (any non-finite input makes them non-finite) and only then
 * located by a scan, so the common path pays no extra pass. */
#include "common/algo/flow/flow.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rlrt/error.h"
#include "common/core/finite.h"


int rl_flow_ipo_loss(const float *v_theta, const float *target,
                     const float *mask, int64_t n, int64_t d, int64_t mk,
                     float *grad_v, rl_flow_ipo_metrics *metrics)
{
    static const char fn[] = "rl_flow_ipo_loss";
    int rc;
    if (n < 0 || d <= 0)
        return rl_error_set(RL_ESHAPE, "%s: need n >= 0 and d > 0, got n=%lld d=%lld", fn,
                            (long long)n, (long long)d);
    if (!v_theta || !target)
        return rl_error_set(RL_EINVAL, "%s: v_theta and target must not be NULL", fn);
    if (mask && (mk <= 0 || d % mk != 0))
        return rl_error_set(RL_ESHAPE, "%s: mask columns mk=%lld must divide D=%lld", fn,
                            (long long)mk, (long long)d);
    if (!mask)
        mk = 1;
    const int64_t seg = d / mk;
    if ((rc = rl__first_nonfinite(fn, "mask", mask, 0, n * mk)))
        return rc;

    double msum = 0.0;
    if (mask)
        for (int64_t k = 0; k < n * mk; k++)
            msum += mask[k];
    else
        msum = (double)n;
    msum *= (double)seg;
    const double scale = msum > 0.0 ? 2.0 / msum : 0.0;

    double lsum = 0.0, all = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float *v = v_theta + i * d, *tg = target + i * d;
        double row = 0.0, rowm = 0.0;
        for (int64_t c = 0; c < mk; c++) {
            const double m = mask ? mask[i * mk + c] : 1.0;
            double acc = 0.0;
            for (int64_t j = c * seg; j < (c + 1) * seg; j++) {
                const double diff = (double)v[j] - tg[j];
                acc += diff * diff;
                if (grad_v)
                    grad_v[i * d + j] = (float)(scale * m * diff);
            }
            row += acc;
            rowm += m * acc;
        }
        if (!isfinite(row)) {
            const rl__named_array in[] = {{"v_theta", v_theta}, {"target", target}};
            return rl__row_overflow(fn, "squared error of chunk", i, i * d, d, in, 2);
        }
        all += row;
        lsum += rowm;
    }
    if (metrics) {
        metrics->loss = msum > 0.0 ? lsum / msum : 0.0;
        metrics->velocity_mse = n > 0 ? all / ((double)n * (double)d) : NAN;
    }
    return 0;
}

rl_flow_sar_config rl_flow_sar_config_default(void)
{
    rl_flow_sar_config c;
    memset(&c, 0, sizeof c);
    c.beta = 1.0;
    c.variant = RL_FLOW_SAR_MSE_BRANCH;
    c.energy = RL_FLOW_SAR_ENERGY_MSE;
    c.kl_coeff = 0.5;
    c.energy_mean = 0;
    return c;
}

/* The two per-chunk kernels are the whole cost of the FlowSAR loss. The
 * portable versions are written for the vectoriser (omp simd lets it reorder
 * the double sums); on x86-64 an AVX2+FMA version with masked tails is used
 * when the CPU has it, so a 70-float chunk costs no scalar remainder loop. */

/* Σr², Σr·δ, Σδ² over one chunk, r = v_old − u, δ = v_θ − v_old (double). */
static void s_sar_sums(const float *restrict vt, const float *restrict vo,
                       const float *restrict u, int64_t d, double *srr_out,
                       double *srd_out, double *sdd_out)
{
    double srr = 0.0, srd = 0.0, sdd = 0.0;
#pragma omp simd reduction(+ : srr, srd, sdd)
    for (int64_t j = 0; j < d; j++) {
        const double r = (double)vo[j] - (double)u[j];
        const double dl = (double)vt[j] - (double)vo[j];
        srr += r * r;
        srd += r * dl;
        sdd += dl * dl;
    }
    *srr_out = srr;
    *srd_out = srd;
    *sdd_out = sdd;
}

/* g = a·(v_old − u) + c·(v_θ − v_old) over one chunk. */
static void s_sar_grad(const float *restrict vt, const float *restrict vo,
                       const float *restrict u, int64_t d, float a, float c,
                       float *restrict g)
{
#pragma omp simd
    for (int64_t j = 0; j < d; j++)
        g[j] = a * (vo[j] - u[j]) + c * (vt[j] - vo[j]);
}

/* Chunks per block in rl_flow_sar_loss. */
#define S_BLOCK 16

/* Build with -DRLRT_NO_X86_SIMD to compile only the portable kernels. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(RLRT_NO_X86_SIMD)
#include <immintrin.h>
#define S_HAVE_AVX2_PATH 1

__attribute__((target("avx2,fma"))) static inline __m256i s_tail_mask(int64_t rem)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)rem),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Four floats at p as doubles (vcvtps2pd from memory: cheaper than an
 * 8-wide load plus lane extracts). */
#define S_LD4(p) _mm256_cvtps_pd(_mm_loadu_ps(p))
#define S_LD4M(p, m) _mm256_cvtps_pd(_mm_maskload_ps((p), (m)))

/* acc += r², rδ, δ² for two groups of four (lo, hi), all in double so the
 * differences are exact, as in the portable kernel. */
__attribute__((target("avx2,fma"))) static inline void
s_acc8(__m256d o0, __m256d o1, __m256d u0, __m256d u1, __m256d t0, __m256d t1,
       __m256d acc[6])
{
    const __m256d r0 = _mm256_sub_pd(o0, u0), r1 = _mm256_sub_pd(o1, u1);
    const __m256d d0 = _mm256_sub_pd(t0, o0), d1 = _mm256_sub_pd(t1, o1);
    acc[0] = _mm256_fmadd_pd(r0, r0, acc[0]);
    acc[1] = _mm256_fmadd_pd(r1, r1, acc[1]);
    acc[2] = _mm256_fmadd_pd(r0, d0, acc[2]);
    acc[3] = _mm256_fmadd_pd(r1, d1, acc[3]);
    acc[4] = _mm256_fmadd_pd(d0, d0, acc[4]);
    acc[5] = _mm256_fmadd_pd(d1, d1, acc[5]);
}

/* Σr², Σrδ, Σδ² of the chunks [i0, i1) into srr/srd/sdd[i − i0], each
 * reduced from four double lanes; masked chunks get zeros. */
__attribute__((target("avx2,fma"))) static void
s_sar_block_sums_avx2(const float *v_theta, const float *v_old, const float *u,
                      const float *mask, int64_t d, int64_t i0, int64_t i1,
                      double *srr, double *srd, double *sdd)
{
    const int64_t full = d & ~(int64_t)7;
    const __m256i tail = s_tail_mask(d - full);
    const __m128i tl = _mm256_castsi256_si128(tail), th = _mm256_extracti128_si256(tail, 1);
    for (int64_t i = i0; i < i1; i++) {
        if (mask && mask[i] == 0.0f) {
            srr[i - i0] = srd[i - i0] = sdd[i - i0] = 0.0;
            continue;
        }
        const float *vt = v_theta + i * d, *vo = v_old + i * d, *uu = u + i * d;
        __m256d acc[6];
        for (int k = 0; k < 6; k++)
            acc[k] = _mm256_setzero_pd();
        for (int64_t j = 0; j < full; j += 8)
            s_acc8(S_LD4(vo + j), S_LD4(vo + j + 4), S_LD4(uu + j), S_LD4(uu + j + 4),
                   S_LD4(vt + j), S_LD4(vt + j + 4), acc);
        if (full < d) /* masked lanes load 0 and add 0 to every sum */
            s_acc8(S_LD4M(vo + full, tl), S_LD4M(vo + full + 4, th), S_LD4M(uu + full, tl),
                   S_LD4M(uu + full + 4, th), S_LD4M(vt + full, tl), S_LD4M(vt + full + 4, th),
                   acc);
        /* Reduce the three sums together: lanes (rr, rd, dd, ·). */
        const __m256d a = _mm256_add_pd(acc[0], acc[1]);
        const __m256d b = _mm256_add_pd(acc[2], acc[3]);
        const __m256d c = _mm256_add_pd(acc[4], acc[5]);
        const __m256d ab = _mm256_hadd_pd(a, b);  /* a0+a1, b0+b1, a2+a3, b2+b3 */
        const __m256d cc = _mm256_hadd_pd(c, c);  /* c0+c1, c0+c1, c2+c3, c2+c3 */
        const __m128d lo = _mm_add_pd(_mm256_castpd256_pd128(ab), _mm256_extractf128_pd(ab, 1));
        const __m128d hi = _mm_add_pd(_mm256_castpd256_pd128(cc), _mm256_extractf128_pd(cc, 1));
        _mm_store_sd(&srr[i - i0], lo);
        _mm_storeh_pd(&srd[i - i0], lo);
        _mm_store_sd(&sdd[i - i0], hi);
    }
}

/* g = a_i·(v_old − u) + c_i·(v_θ − v_old) for the chunks [i0, i1); masked
 * chunks get 0. */
__attribute__((target("avx2,fma"))) static void
s_sar_block_grad_avx2(const float *v_theta, const float *v_old, const float *u,
                      const float *mask, int64_t d, int64_t i0, int64_t i1,
                      const float *a, const float *c, float *grad)
{
    const int64_t full = d & ~(int64_t)7;
    const __m256i tail = s_tail_mask(d - full);
    for (int64_t i = i0; i < i1; i++) {
        float *g = grad + i * d;
        if (mask && mask[i] == 0.0f) {
            memset(g, 0, (size_t)d * sizeof *g);
            continue;
        }
        const float *vt = v_theta + i * d, *vo = v_old + i * d, *uu = u + i * d;
        const __m256 va = _mm256_set1_ps(a[i - i0]), vc = _mm256_set1_ps(c[i - i0]);
        for (int64_t j = 0; j < full; j += 8) {
            const __m256 o = _mm256_loadu_ps(vo + j);
            const __m256 r = _mm256_sub_ps(o, _mm256_loadu_ps(uu + j));
            const __m256 dl = _mm256_sub_ps(_mm256_loadu_ps(vt + j), o);
            _mm256_storeu_ps(g + j, _mm256_fmadd_ps(va, r, _mm256_mul_ps(vc, dl)));
        }
        if (full < d) {
            const __m256 o = _mm256_maskload_ps(vo + full, tail);
            const __m256 r = _mm256_sub_ps(o, _mm256_maskload_ps(uu + full, tail));
            const __m256 dl = _mm256_sub_ps(_mm256_maskload_ps(vt + full, tail), o);
            _mm256_maskstore_ps(g + full, tail, _mm256_fmadd_ps(va, r, _mm256_mul_ps(vc, dl)));
        }
    }
}

/* RLRT_NO_SIMD=1 forces the portable kernels, so tests cover both. */
static int s_use_avx2(void)
{
    const char *off = getenv("RLRT_NO_SIMD");
    if (off && off[0] && off[0] != '0')
        return 0;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#else
#define S_HAVE_AVX2_PATH 0
#endif

int rl_flow_sar_loss(const float *v_theta, const float *v_old, const float *u,
                     const float *weights, const float *labels,
                     const float *flow_t, const float *mask, int64_t n,
                     int64_t d, const rl_flow_sar_config *cfg, float *grad_v,
                     rl_flow_sar_metrics *metrics)
{
    static const char fn[] = "rl_flow_sar_loss";
    int rc;
    if (n < 0 || d <= 0)
        return rl_error_set(RL_ESHAPE, "%s: need n >= 0 and d > 0, got n=%lld d=%lld", fn,
                            (long long)n, (long long)d);
    if (!v_theta || !v_old || !u || !weights || !labels || !cfg)
        return rl_error_set(RL_EINVAL,
                            "%s: v_theta, v_old, u, weights, labels and cfg must not be NULL", fn);
    if (cfg->variant != RL_FLOW_SAR_MSE_BRANCH && cfg->variant != RL_FLOW_SAR_SOFTPLUS_KL)
        return rl_error_set(RL_EINVAL, "%s: unknown loss variant %d", fn, (int)cfg->variant);
    if (cfg->energy != RL_FLOW_SAR_ENERGY_MSE && cfg->energy != RL_FLOW_SAR_ENERGY_SDE)
        return rl_error_set(RL_EINVAL, "%s: unknown energy type %d", fn, (int)cfg->energy);
    if (!isfinite(cfg->beta) || !isfinite(cfg->kl_coeff))
        return rl_error_set(RL_EINVAL, "%s: beta=%g and kl_coeff=%g must be finite", fn,
                            cfg->beta, cfg->kl_coeff);
    const int sde = cfg->energy == RL_FLOW_SAR_ENERGY_SDE;
    const int softplus = cfg->variant == RL_FLOW_SAR_SOFTPLUS_KL;
    if (sde && !flow_t)
        return rl_error_set(RL_EINVAL, "%s: the sde energy needs flow_t", fn);
    double inv_m, mean_den;
    if ((rc = rl__mask_inv_sum(fn, mask, n, &inv_m, &mean_den)))
        return rc;
    for (int64_t i = 0; i < n; i++) {
        if (mask && mask[i] == 0.0f)
            continue;
        if (!isfinite(weights[i]) || !isfinite(labels[i]) || (sde && !isfinite(flow_t[i]))) {
            const char *name = !isfinite(weights[i]) ? "weights"
                             : !isfinite(labels[i]) ? "labels" : "flow_t";
            const float val = !isfinite(weights[i]) ? weights[i]
                            : !isfinite(labels[i]) ? labels[i] : flow_t[i];
            return rl_error_set(RL_ENUMERIC, "%s: %s[%lld] is %g (not finite)", fn, name,
                                (long long)i, (double)val);
        }
        if (sde && !(flow_t[i] > 0.0f))
            return rl_error_set(RL_ERANGE,
                                "%s: flow_t[%lld]=%g: the sde energy 1/(2t) needs t > 0", fn,
                                (long long)i, (double)flow_t[i]);
    }
    const double beta = cfg->beta, lam = cfg->kl_coeff;
    const double sc = cfg->energy_mean ? 1.0 / (double)d : 1.0;
#if S_HAVE_AVX2_PATH
    const int avx2 = s_use_avx2();
#endif

    double s_loss = 0.0, s_ep = 0.0, s_en = 0.0, s_w = 0.0, s_con = 0.0, s_kl = 0.0,
           s_r = 0.0, s_sig = 0.0, s_flat = 0.0;
    /* Chunks go in blocks: all sums of a block, then its scalar math, then
     * its gradients. The block's rows (S_BLOCK·D floats per array) stay in
     * L1 between the passes, and independent chunks let the core overlap
     * one chunk's reduction latency with the next one's loads. */
    for (int64_t i0 = 0; i0 < n; i0 += S_BLOCK) {
        const int64_t i1 = i0 + S_BLOCK < n ? i0 + S_BLOCK : n;
        const int64_t nb = i1 - i0;
        /* Structure of arrays so the per-chunk scalar math vectorises. */
        double srr[S_BLOCK], srd[S_BLOCK], sdd[S_BLOCK];
        float fa[S_BLOCK], fc[S_BLOCK];
#if S_HAVE_AVX2_PATH
        if (avx2)
            s_sar_block_sums_avx2(v_theta, v_old, u, mask, d, i0, i1, srr, srd, sdd);
        else
#endif
            for (int64_t i = i0; i < i1; i++) {
                if (mask && mask[i] == 0.0f)
                    srr[i - i0] = srd[i - i0] = sdd[i - i0] = 0.0;
                else
                    s_sar_sums(v_theta + i * d, v_old + i * d, u + i * d, d, &srr[i - i0],
                               &srd[i - i0], &sdd[i - i0]);
            }
        /* Any NaN/Inf in a kept chunk makes its sums non-finite; 0·x keeps
         * that and nothing else. Masked chunks have zero sums. */
        double chk = 0.0;
#pragma omp simd reduction(+ : chk)
        for (int64_t b = 0; b < nb; b++)
            chk += (srr[b] + srd[b] + sdd[b]) * 0.0;
        if (!isfinite(chk)) {
            for (int64_t i = i0; i < i1; i++) {
                if (isfinite(srr[i - i0] + srd[i - i0] + sdd[i - i0]))
                    continue;
                const rl__named_array in[] = {{"v_theta", v_theta}, {"v_old", v_old}, {"u", u}};
                return rl__row_overflow(fn, "energy of chunk", i, i * d, d, in, 3);
            }
        }
        /* With r = v_old − u and δ = v_θ − v_old, v± − u = r ± β·δ, so
         * E± = k·(Σr² ± 2βΣrδ + β²Σδ²): E⁺ − E⁻ = 4kβΣrδ comes without
         * cancellation, and ∂/∂v_θ is a·r + c·δ with two scalars. */
        /* Per-chunk scalars with masked chunks neutralised (m = w = y = 0,
         * k finite: their weight, label and t are never read into a
         * result), so the loops below have no branches and vectorise. */
        double mv[S_BLOCK], kv[S_BLOCK], wv[S_BLOCK], yv[S_BLOCK];
        for (int64_t b = 0; b < nb; b++) {
            const int64_t i = i0 + b;
            const double m = mask ? (double)mask[i] : 1.0;
            const int keep = m != 0.0;
            mv[b] = m;
            kv[b] = sc * (sde && keep ? 0.5 / (double)flow_t[i] : 1.0);
            wv[b] = keep ? (double)weights[i] : 0.0;
            yv[b] = keep ? (double)labels[i] : 0.0;
        }
        if (softplus) {
            /* Scalar: exp and log are libm calls (their FMA versions beat a
             * vectorised polynomial at SSE2 width). */
            for (int64_t b = 0; b < nb; b++) {
                const double m = mv[b], k = kv[b], w = wv[b], y = yv[b];
                const double ep = k * (srr[b] + 2.0 * beta * srd[b] + beta * beta * sdd[b]);
                const double en = k * (srr[b] - 2.0 * beta * srd[b] + beta * beta * sdd[b]);
                const double z = 2.0 * y * k * beta * srd[b]; /* ½y(E⁺ − E⁻) */
                /* softplus(z) = max(z, 0) + log1p(e) and sigmoid share
                 * e = exp(−|z|) ∈ (0, 1]. log(1 + e) is much cheaper than
                 * log1p and, for e ≥ 1e-8, off by at most ~1e-16 absolute;
                 * below, log1p(e) = e to within e²/2. */
                const double e = exp(-fabs(z));
                const double l1p = e < 1e-8 ? e : log(1.0 + e);
                const double con = w * ((z > 0.0 ? z : 0.0) + l1p);
                const double kl = lam * sc * sdd[b];
                /* sigmoid = 1/(1 + e) for z ≥ 0, e/(1 + e) below (e ≤ 1),
                 * as a max so the random sign of z costs no branch. */
                const double one = (double)(z >= 0.0);
                const double sig = (e > one ? e : one) / (1.0 + e);
                s_loss += m * (con + kl);
                s_con += m * con;
                s_kl += m * kl;
                s_ep += m * ep;
                s_en += m * en;
                s_w += m * w;
                s_r += m * 0.5 * (1.0 + y);
                s_sig += m * sig;
                s_flat += m * (double)(sig < 0.05);
                fa[b] = (float)(2.0 * w * sig * y * k * beta * m * inv_m);
                fc[b] = (float)(2.0 * lam * sc * m * inv_m);
            }
        } else {
#pragma omp simd reduction(+ : s_loss, s_ep, s_en, s_w, s_r)
            for (int64_t b = 0; b < nb; b++) {
                const double m = mv[b], k = kv[b], w = wv[b];
                const double rr = 0.5 * (1.0 + yv[b]);
                const double ep = k * (srr[b] + 2.0 * beta * srd[b] + beta * beta * sdd[b]);
                const double en = k * (srr[b] - 2.0 * beta * srd[b] + beta * beta * sdd[b]);
                s_loss += m * w * (rr * ep + (1.0 - rr) * en);
                s_ep += m * ep;
                s_en += m * en;
                s_w += m * w;
                s_r += m * rr;
                /* R·∂E⁺ + (1−R)·∂E⁻ = 2kβ[(2R − 1)·r + β·δ] */
                fa[b] = (float)(2.0 * k * beta * w * (2.0 * rr - 1.0) * m * inv_m);
                fc[b] = (float)(2.0 * k * beta * beta * w * m * inv_m);
            }
        }
        if (!grad_v)
            continue;
#if S_HAVE_AVX2_PATH
        if (avx2) {
            s_sar_block_grad_avx2(v_theta, v_old, u, mask, d, i0, i1, fa, fc, grad_v);
            continue;
        }
#endif
        for (int64_t i = i0; i < i1; i++) {
            const int64_t o = i * d;
            if (mask && mask[i] == 0.0f)
                memset(grad_v + o, 0, (size_t)d * sizeof *grad_v);
            else
                s_sar_grad(v_theta + o, v_old + o, u + o, d, fa[i - i0], fc[i - i0], grad_v + o);
        }
    }
    if (metrics) {
        metrics->loss = s_loss * inv_m;
        metrics->e_pos = s_ep * mean_den;
        metrics->e_neg = s_en * mean_den;
        metrics->weight_mean = s_w * mean_den;
        metrics->energy_type = sde ? 1.0 : 0.0;
        metrics->loss_variant = softplus ? 1.0 : 0.0;
        metrics->contrastive = softplus ? s_con * mean_den : NAN;
        metrics->kl_penalty = softplus ? s_kl * mean_den : NAN;
        metrics->success_ratio = softplus ? NAN : s_r * mean_den;
        metrics->label_pos = s_r * mean_den;
        metrics->softplus_grad_scale = softplus ? s_sig * mean_den : NAN;
        metrics->softplus_flat = softplus ? s_flat * mean_den : NAN;
    }
    return 0;
}
