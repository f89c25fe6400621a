/* flow_credit.c — FlowIPO / FlowSAR credit weights, EMA reference update,
 * flow interpolation and self-annotation error (see common/algo/flow/flow.h). */
#include "common/algo/flow/flow.h"

#include <math.h>
#include <stddef.h>

#include "rlrt/error.h"

/* First non-finite entry of arr (kept where keep != NULL && keep[i] != 0),
 * reported as RL_ENUMERIC naming the array; 0 if all finite. */
static int s_check_finite(const char *fn, const char *name, const float *arr,
                          int64_t n, const float *keep, int64_t per_keep)
{
    for (int64_t i = 0; i < n; i++) {
        if (keep && keep[i / per_keep] == 0.0f)
            continue;
        if (!isfinite(arr[i]))
            return rl_error_set(RL_ENUMERIC, "%s: %s[%lld] is %g (not finite)",
                                fn, name, (long long)i, (double)arr[i]);
    }
    return 0;
}

/* The episodes' rewards (B) and, when given, the step mask (S, B): finite. */
static int s_check_episodes(const char *fn, const float *rewards, const float *step_mask, int64_t s, int64_t b)
{
    int rc = s_check_finite(fn, "rewards", rewards, b, NULL, 1);
    return rc || !step_mask ? rc : s_check_finite(fn, "step_mask", step_mask, s * b, NULL, 1);
}

static int s_check_dims(const char *fn, int64_t n, int64_t d)
{
    if (n < 0 || d <= 0)
        return rl_error_set(RL_ESHAPE, "%s: need n >= 0 and d > 0, got n=%lld d=%lld",
                            fn, (long long)n, (long long)d);
    return 0;
}

int rl_flow_interp(const float *a, const float *eps, const float *t,
                   int64_t n, int64_t d, float *x_t, float *u)
{
    static const char fn[] = "rl_flow_interp";
    int rc = s_check_dims(fn, n, d);
    if (rc)
        return rc;
    if (!a || !eps || !t)
        return rl_error_set(RL_EINVAL, "%s: a, eps and t must not be NULL", fn);
    if ((rc = s_check_finite(fn, "t", t, n, NULL, 1)))
        return rc;
    for (int64_t i = 0; i < n; i++) {
        const double ti = t[i];
        const float *ai = a + i * d, *ei = eps + i * d;
        for (int64_t j = 0; j < d; j++) {
            if (x_t)
                x_t[i * d + j] = (float)((1.0 - ti) * ai[j] + ti * ei[j]);
            if (u)
                u[i * d + j] = (float)((double)ei[j] - ai[j]);
        }
    }
    return 0;
}

int rl_flow_recon_error(const float *a, const float *x_mid, const float *v,
                        float t_mid, int64_t n, int64_t d, float *e)
{
    static const char fn[] = "rl_flow_recon_error";
    int rc = s_check_dims(fn, n, d);
    if (rc)
        return rc;
    if (!a || !x_mid || !v || !e)
        return rl_error_set(RL_EINVAL, "%s: a, x_mid, v and e must not be NULL", fn);
    if (!isfinite(t_mid))
        return rl_error_set(RL_ENUMERIC, "%s: t_mid is %g (not finite)", fn, (double)t_mid);
    for (int64_t i = 0; i < n; i++) {
        double acc = 0.0;
        for (int64_t j = 0; j < d; j++) {
            const int64_t k = i * d + j;
            const double ahat = (double)x_mid[k] - (double)v[k] * t_mid;
            const double diff = (double)a[k] - ahat;
            acc += diff * diff;
        }
        if (!isfinite(acc)) {
            if ((rc = s_check_finite(fn, "a", a + i * d, d, NULL, 1)) ||
                (rc = s_check_finite(fn, "x_mid", x_mid + i * d, d, NULL, 1)) ||
                (rc = s_check_finite(fn, "v", v + i * d, d, NULL, 1)))
                return rl_error_wrap(rc, "chunk %lld", (long long)i);
            return rl_error_set(RL_ENUMERIC, "%s: error of chunk %lld overflows", fn,
                                (long long)i);
        }
        e[i] = (float)acc;
    }
    return 0;
}

int64_t rl_flow_clip_actions(float *a, int64_t n, float lo, float hi)
{
    int64_t out = 0;
    for (int64_t i = 0; a && i < n; i++) {
        if (a[i] < lo) {
            a[i] = lo;
            out++;
        } else if (a[i] > hi) {
            a[i] = hi;
            out++;
        }
    }
    return out;
}

int rl_flow_episode_rewards(const float *step_rewards, int64_t s, int64_t b, int64_t c,
                            float *out)
{
    static const char fn[] = "rl_flow_episode_rewards";
    if (s < 0 || b < 0 || c <= 0)
        return rl_error_set(RL_ESHAPE, "%s: need S >= 0, B >= 0, C > 0, got %lld %lld %lld", fn,
                            (long long)s, (long long)b, (long long)c);
    if (!step_rewards || !out)
        return rl_error_set(RL_EINVAL, "%s: step_rewards and out must not be NULL", fn);
    int rc = s_check_finite(fn, "step_rewards", step_rewards, s * b * c, NULL, 1);
    if (rc)
        return rc;
    for (int64_t e = 0; e < b; e++) {
        double sum = 0.0;
        for (int64_t t = 0; t < s; t++)
            for (int64_t k = 0; k < c; k++)
                sum += step_rewards[(t * b + e) * c + k];
        out[e] = (float)(sum < 0.0 ? 0.0 : (sum > 1.0 ? 1.0 : sum));
    }
    return 0;
}

double rl_flow_ema_beta(rl_flow_ema_schedule schedule, double beta_fixed,
                        double eta_rate, double eta_max, int64_t step)
{
    switch (schedule) {
    case RL_FLOW_EMA_FIXED:
        return beta_fixed;
    case RL_FLOW_EMA_LINEAR: {
        const double b = eta_rate * (double)step;
        return b < eta_max ? b : eta_max;
    }
    }
    return NAN;
}

int rl_flow_ema_update(float *ref, const float *cur, int64_t n, double beta)
{
    static const char fn[] = "rl_flow_ema_update";
    if (n < 0 || (n > 0 && (!ref || !cur)))
        return rl_error_set(RL_EINVAL, "%s: need n >= 0 and non-NULL buffers", fn);
    if (!(beta >= 0.0 && beta <= 1.0))
        return rl_error_set(RL_ERANGE, "%s: beta=%g outside [0, 1]", fn, beta);
    const double keep = beta, take = 1.0 - beta;
    for (int64_t i = 0; i < n; i++)
        ref[i] = (float)(keep * ref[i] + take * cur[i]);
    return 0;
}

/* δ = ‖a − a_ref‖₂ of flat step k. */
static double s_delta(const float *a, const float *r, int64_t k, int64_t d)
{
    const float *x = a + k * d, *y = r + k * d;
    double acc = 0.0;
    for (int64_t j = 0; j < d; j++) {
        const double diff = (double)x[j] - y[j];
        acc += diff * diff;
    }
    return sqrt(acc);
}

int rl_flow_ipo_weights(const float *actions, const float *ref_actions,
                        const float *rewards, const float *step_mask,
                        int64_t s, int64_t b, int64_t d, double alpha,
                        double eps, float *w, rl_flow_ipo_weight_stats *stats)
{
    static const char fn[] = "rl_flow_ipo_weights";
    int rc;
    if (s < 0 || b < 0 || d <= 0)
        return rl_error_set(RL_ESHAPE, "%s: need S >= 0, B >= 0, D > 0, got %lld %lld %lld",
                            fn, (long long)s, (long long)b, (long long)d);
    if (!actions || !ref_actions || !rewards || !w)
        return rl_error_set(RL_EINVAL, "%s: actions, ref_actions, rewards and w must not be NULL", fn);
    if (!isfinite(alpha) || !(eps >= 0.0) || !isfinite(eps))
        return rl_error_set(RL_EINVAL, "%s: alpha=%g must be finite and eps=%g >= 0", fn, alpha, eps);
    if ((rc = s_check_episodes(fn, rewards, step_mask, s, b)))
        return rc;

    /* δ is recomputed in each pass rather than kept in f32: the z-score
     * divides by the spread, which f32 rounding of δ would distort. */
    for (int64_t k = 0; k < s * b; k++) {
        if (step_mask && step_mask[k] == 0.0f)
            continue;
        if (!isfinite(s_delta(actions, ref_actions, k, d))) {
            if ((rc = s_check_finite(fn, "actions", actions, s * b * d, step_mask, d)) ||
                (rc = s_check_finite(fn, "ref_actions", ref_actions, s * b * d, step_mask, d)))
                return rc;
            return rl_error_set(RL_ENUMERIC, "%s: delta of step %lld overflows", fn, (long long)k);
        }
    }
    double dsum = 0.0, wsum = 0.0;
    int64_t kept_total = 0;
    for (int64_t e = 0; e < b; e++) {
        double mean = 0.0, var = 0.0;
        int64_t cnt = 0;
        for (int64_t t = 0; t < s; t++) {
            const int64_t k = t * b + e;
            if (step_mask && step_mask[k] == 0.0f) {
                w[k] = 0.0f;
                continue;
            }
            mean += s_delta(actions, ref_actions, k, d);
            cnt++;
        }
        if (cnt == 0)
            continue;
        dsum += mean;
        kept_total += cnt;
        mean /= (double)cnt;
        for (int64_t t = 0; t < s && cnt > 1; t++) {
            const int64_t k = t * b + e;
            if (step_mask && step_mask[k] == 0.0f)
                continue;
            const double dv = s_delta(actions, ref_actions, k, d) - mean;
            var += dv * dv;
        }
        const double std = cnt > 1 ? sqrt(var / (double)(cnt - 1)) : 0.0;
        const double sign = 2.0 * rewards[e] - 1.0;
        for (int64_t t = 0; t < s; t++) {
            const int64_t k = t * b + e;
            if (step_mask && step_mask[k] == 0.0f)
                continue;
            /* One kept step: no spread to normalise by; A = 0 (w = 0.5). */
            const double adv = cnt > 1
                ? sign * (s_delta(actions, ref_actions, k, d) - mean) / (std + eps) : 0.0;
            const double z = alpha * adv;
            const double wk = z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
            w[k] = (float)wk;
            wsum += wk;
        }
    }
    if (stats) {
        stats->weight_mean = kept_total ? wsum / (double)kept_total : NAN;
        stats->delta_mean = kept_total ? dsum / (double)kept_total : NAN;
    }
    return 0;
}

int rl_flow_ipo_target(const float *u, const float *v_ref, const float *w,
                       int64_t n, int64_t d, float *target)
{
    static const char fn[] = "rl_flow_ipo_target";
    int rc = s_check_dims(fn, n, d);
    if (rc)
        return rc;
    if (!u || !v_ref || !w || !target)
        return rl_error_set(RL_EINVAL, "%s: u, v_ref, w and target must not be NULL", fn);
    if ((rc = s_check_finite(fn, "w", w, n, NULL, 1)))
        return rc;
    for (int64_t i = 0; i < n; i++) {
        const double wi = w[i];
        for (int64_t j = 0; j < d; j++) {
            const int64_t k = i * d + j;
            target[k] = (float)(wi * u[k] + (1.0 - wi) * v_ref[k]);
        }
    }
    return 0;
}

int rl_flow_sar_weights(const float *recon_errors, const float *rewards,
                        const float *step_mask, int64_t s, int64_t b,
                        double temperature, double w_min, double w_max,
                        float *weights, float *labels)
{
    return rl_flow_sar_weights_ex(recon_errors, rewards, step_mask, s, b, temperature, w_min, w_max, weights,
                                  labels, NULL);
}

int rl_flow_sar_weights_ex(const float *recon_errors, const float *rewards,
                           const float *step_mask, int64_t s, int64_t b,
                           double temperature, double w_min, double w_max,
                           float *weights, float *labels, int64_t clipped[2])
{
    static const char fn[] = "rl_flow_sar_weights";
    int rc;
    if (s < 0 || b < 0)
        return rl_error_set(RL_ESHAPE, "%s: need S >= 0 and B >= 0, got %lld %lld", fn,
                            (long long)s, (long long)b);
    if (!recon_errors || !rewards || !weights)
        return rl_error_set(RL_EINVAL, "%s: recon_errors, rewards and weights must not be NULL", fn);
    if (!(temperature > 0.0) || !isfinite(temperature))
        return rl_error_set(RL_EINVAL, "%s: temperature=%g must be > 0", fn, temperature);
    if (!(w_min <= w_max))
        return rl_error_set(RL_EINVAL, "%s: w_min=%g must be <= w_max=%g", fn, w_min, w_max);
    if ((rc = s_check_episodes(fn, rewards, step_mask, s, b)))
        return rc;
    for (int64_t k = 0; k < s * b; k++) {
        if (step_mask && step_mask[k] == 0.0f)
            continue;
        if (!isfinite(recon_errors[k]))
            return rl_error_set(RL_ENUMERIC, "%s: recon_errors[%lld] (step %lld, traj %lld) is %g",
                                fn, (long long)k, (long long)(k / b), (long long)(k % b),
                                (double)recon_errors[k]);
    }
    const int clip = w_min > 0.0 || w_max < 1.0;
    if (clipped)
        clipped[0] = clipped[1] = 0;
    for (int64_t e = 0; e < b; e++) {
        const double sign = rewards[e] >= 0.5 ? 1.0 : -1.0;
        if (labels)
            labels[e] = (float)(2.0 * rewards[e] - 1.0);
        double zmax = -INFINITY;
        for (int64_t t = 0; t < s; t++) {
            const int64_t k = t * b + e;
            if (step_mask && step_mask[k] == 0.0f)
                continue;
            const double z = sign * recon_errors[k] / temperature;
            if (z > zmax)
                zmax = z;
        }
        double sum = 0.0;
        for (int64_t t = 0; t < s; t++) {
            const int64_t k = t * b + e;
            if (step_mask && step_mask[k] == 0.0f) {
                weights[k] = 0.0f;
                continue;
            }
            const double ez = exp(sign * recon_errors[k] / temperature - zmax);
            sum += ez;
        }
        if (sum == 0.0)
            continue; /* no kept step */
        /* Second pass in double so the clip sees exact softmax values. */
        double csum = 0.0;
        for (int64_t t = 0; t < s; t++) {
            const int64_t k = t * b + e;
            if (step_mask && step_mask[k] == 0.0f)
                continue;
            double wk = exp(sign * recon_errors[k] / temperature - zmax) / sum;
            if (clip) {
                if (clipped) {
                    clipped[0] += wk < w_min;
                    clipped[1] += wk > w_max;
                }
                wk = wk < w_min ? w_min : (wk > w_max ? w_max : wk);
            }
            csum += wk;
        }
        for (int64_t t = 0; t < s; t++) {
            const int64_t k = t * b + e;
            if (step_mask && step_mask[k] == 0.0f)
                continue;
            double wk = exp(sign * recon_errors[k] / temperature - zmax) / sum;
            if (clip) {
                wk = wk < w_min ? w_min : (wk > w_max ? w_max : wk);
                wk = csum > 0.0 ? wk / csum : 0.0;
            }
            weights[k] = (float)wk;
        }
    }
    return 0;
}

int rl_flow_credit_stats_get(const float *w, const float *rewards, const float *step_mask, int64_t s,
                             int64_t b, rl_flow_credit_stats *out)
{
    static const char fn[] = "rl_flow_credit_stats_get";
    if (s < 0 || b < 0)
        return rl_error_set(RL_ESHAPE, "%s: need S >= 0 and B >= 0, got %lld %lld", fn, (long long)s,
                            (long long)b);
    if (!w || !rewards || !out)
        return rl_error_set(RL_EINVAL, "%s: w, rewards and out must not be NULL", fn);
    double hsum = 0, sat = 0, pos = 0;
    int64_t nh = 0, eps = 0, steps = 0;
    for (int64_t e = 0; e < b; e++) {
        double tot = 0;
        int64_t n = 0;
        for (int64_t t = 0; t < s; t++) {
            const int64_t k = t * b + e;
            if (step_mask && step_mask[k] == 0.0f)
                continue;
            tot += w[k];
            n++;
            sat += w[k] < 0.05f || w[k] > 0.95f;
        }
        if (!n)
            continue;
        eps++;
        steps += n;
        pos += rewards[e] >= 0.5f;
        if (n < 2 || !(tot > 0))
            continue;
        double h = 0;
        for (int64_t t = 0; t < s; t++) {
            const int64_t k = t * b + e;
            if ((step_mask && step_mask[k] == 0.0f) || !(w[k] > 0))
                continue;
            const double p = w[k] / tot;
            h -= p * log(p);
        }
        hsum += h / log((double)n);
        nh++;
    }
    out->entropy = nh ? hsum / (double)nh : NAN;
    out->saturated = steps ? sat / (double)steps : NAN;
    out->pos_frac = eps ? pos / (double)eps : NAN;
    out->episodes = eps;
    out->steps = steps;
    return 0;
}

int rl_flow_grad_split_get(const float *g_a, const float *g_total, int64_t n, rl_flow_grad_split *out)
{
    if (n < 0 || !out || (n > 0 && (!g_a || !g_total)))
        return rl_error_set(RL_EINVAL, "rl_flow_grad_split_get: need n >= 0 and non-NULL arrays");
    double aa = 0, bb = 0, ab = 0;
    for (int64_t i = 0; i < n; i++) {
        const double a = g_a[i], gb = (double)g_total[i] - a;
        aa += a * a;
        bb += gb * gb;
        ab += a * gb;
    }
    out->norm_a = sqrt(aa);
    out->norm_b = sqrt(bb);
    out->cos = aa > 0 && bb > 0 ? ab / (out->norm_a * out->norm_b) : NAN;
    return 0;
}
