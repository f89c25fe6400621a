/* flow_loss.c — FlowIPO and FlowSAR losses with dL/dv_θ (rlrt/algo/flow.h).
 *
 * Both losses walk the (N, D) arrays once per chunk; FlowSAR needs the
 * chunk's energies before its gradient, so it makes a second pass over the
 * same D floats while they are still in L1. NaN/Inf is detected from the
 * per-chunk sums (any non-finite input makes them non-finite) and only then
 * located by a scan, so the common path pays no extra pass. */
#include "rlrt/algo/flow.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "rlrt/error.h"

static int s_first_bad(const char *fn, const char *name, const float *arr,
                       int64_t off, int64_t len)
{
    for (int64_t j = 0; j < len; j++)
        if (!isfinite(arr[off + j]))
            return rl_error_set(RL_ENUMERIC, "%s: %s[%lld] is %g (not finite)", fn, name,
                                (long long)(off + j), (double)arr[off + j]);
    return 0;
}

static int s_check_small(const char *fn, const char *name, const float *arr, int64_t n)
{
    return arr ? s_first_bad(fn, name, arr, 0, n) : 0;
}

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
    if ((rc = s_check_small(fn, "mask", mask, n * mk)))
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
            if ((rc = s_first_bad(fn, "v_theta", v_theta, i * d, d)) ||
                (rc = s_first_bad(fn, "target", target, i * d, d)))
                return rc;
            return rl_error_set(RL_ENUMERIC, "%s: squared error of chunk %lld overflows", fn,
                                (long long)i);
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

static double s_softplus(double z)
{
    return z > 0.0 ? z + log1p(exp(-z)) : log1p(exp(z));
}

static double s_sigmoid(double z)
{
    if (z >= 0.0)
        return 1.0 / (1.0 + exp(-z));
    const double e = exp(z);
    return e / (1.0 + e);
}

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
    if ((rc = s_check_small(fn, "mask", mask, n)))
        return rc;
    double msum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double m = mask ? mask[i] : 1.0;
        msum += m;
        if (m == 0.0)
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
    const double inv_m = msum > 0.0 ? 1.0 / msum : 0.0;
    const double beta = cfg->beta, lam = cfg->kl_coeff;
    const double sc = cfg->energy_mean ? 1.0 / (double)d : 1.0;

    double s_loss = 0.0, s_ep = 0.0, s_en = 0.0, s_w = 0.0, s_con = 0.0, s_kl = 0.0,
           s_r = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double m = mask ? mask[i] : 1.0;
        float *g = grad_v ? grad_v + i * d : NULL;
        if (m == 0.0) {
            if (g)
                memset(g, 0, (size_t)d * sizeof *g);
            continue;
        }
        const float *vt = v_theta + i * d, *vo = v_old + i * d, *ui = u + i * d;
        /* E± = k·Σ(r ± β·δ)² with r = v_old − u and δ = v_θ − v_old.
         * Accumulated in double (f32 would lose the small E⁺ − E⁻). */
        double sp = 0.0, sq = 0.0, sk = 0.0;
        for (int64_t j = 0; j < d; j++) {
            const double r = (double)vo[j] - ui[j];
            const double dl = (double)vt[j] - vo[j];
            const double p = r + beta * dl, q = r - beta * dl;
            sp += p * p;
            sq += q * q;
            sk += dl * dl;
        }
        if (!isfinite(sp + sq + sk)) {
            if ((rc = s_first_bad(fn, "v_theta", v_theta, i * d, d)) ||
                (rc = s_first_bad(fn, "v_old", v_old, i * d, d)) ||
                (rc = s_first_bad(fn, "u", u, i * d, d)))
                return rc;
            return rl_error_set(RL_ENUMERIC, "%s: energy of chunk %lld overflows", fn,
                                (long long)i);
        }
        const double k = sc * (sde ? 0.5 / (double)flow_t[i] : 1.0);
        const double ep = k * sp, en = k * sq;
        const double w = weights[i], y = labels[i], rr = 0.5 * (1.0 + y);
        double li, cp, cq, cd;
        if (softplus) {
            const double z = 0.5 * y * (ep - en);
            const double con = w * s_softplus(z), kl = lam * sc * sk;
            li = con + kl;
            s_con += m * con;
            s_kl += m * kl;
            /* ∂z/∂v_θ = ½y·2kβ(p + q); ∂kl/∂v_θ = 2λ·sc·δ. */
            const double gz = w * s_sigmoid(z) * 0.5 * y * 2.0 * k * beta;
            cp = gz;
            cq = gz;
            cd = 2.0 * lam * sc;
        } else {
            li = w * (rr * ep + (1.0 - rr) * en);
            cp = w * rr * 2.0 * k * beta;
            cq = -w * (1.0 - rr) * 2.0 * k * beta;
            cd = 0.0;
        }
        s_loss += m * li;
        s_ep += m * ep;
        s_en += m * en;
        s_w += m * w;
        s_r += m * rr;
        if (g) {
            const double f = m * inv_m;
            cp *= f;
            cq *= f;
            cd *= f;
            for (int64_t j = 0; j < d; j++) {
                const double r = (double)vo[j] - ui[j];
                const double dl = (double)vt[j] - vo[j];
                g[j] = (float)(cp * (r + beta * dl) + cq * (r - beta * dl) + cd * dl);
            }
        }
    }
    if (metrics) {
        const double mean_den = msum > 0.0 ? inv_m : NAN;
        metrics->loss = s_loss * inv_m;
        metrics->e_pos = s_ep * mean_den;
        metrics->e_neg = s_en * mean_den;
        metrics->weight_mean = s_w * mean_den;
        metrics->energy_type = sde ? 1.0 : 0.0;
        metrics->loss_variant = softplus ? 1.0 : 0.0;
        metrics->contrastive = softplus ? s_con * mean_den : NAN;
        metrics->kl_penalty = softplus ? s_kl * mean_den : NAN;
        metrics->success_ratio = softplus ? NAN : s_r * mean_den;
    }
    return 0;
}
