/* diffusion.c — GRPO mathematics for diffusion / flow image generators
 * (common/algo/diffusion/diffusion.h): advantages, the constraint's PI
 * update, the clipped per-timestep loss, seeded timestep subsets. The SDE
 * step itself is common/sde/diffusion_sde.h. */
#include "common/algo/diffusion/diffusion.h"

#include <math.h>
#include <stddef.h>

#include "rlrt/error.h"
#include "common/core/rng.h"
#include "common/core/finite.h"

#define S_LOG_SQRT_2PI 0.91893853320467274178


/* z-score (or with by_std 0 the centred reward) of rows where sel(i)
 * holds; rows outside are untouched. */
static void s_zscore(const float *r, float *adv, int64_t b, const int64_t *group, int64_t g,
                     double threshold, int apply_threshold, double eps, int by_std)
{
    double mean = 0.0;
    int64_t cnt = 0;
    for (int64_t i = 0; i < b; i++)
        if (!group || group[i] == g) {
            mean += r[i];
            cnt++;
        }
    if (cnt == 0)
        return;
    mean /= (double)cnt;
    double var = 0.0;
    for (int64_t i = 0; i < b; i++)
        if (!group || group[i] == g)
            var += ((double)r[i] - mean) * ((double)r[i] - mean);
    /* One row has no spread: A = 0 (documented; torch's unbiased std is NaN). */
    const double std = cnt > 1 ? sqrt(var / (double)(cnt - 1)) : 0.0;
    const int zero = cnt < 2 || (apply_threshold && mean < threshold);
    for (int64_t i = 0; i < b; i++)
        if (!group || group[i] == g)
            adv[i] = zero ? 0.0f : (float)(((double)r[i] - mean) / (by_std ? std + eps : 1.0));
}

int rl_diffusion_grpo_advantages(const float *rewards, const int64_t *group,
                                 int64_t b, int64_t n_groups, int use_group,
                                 int norm_by_std, double reward_threshold, double eps,
                                 float *adv)
{
    static const char fn[] = "rl_diffusion_grpo_advantages";
    int rc;
    if (b < 0 || (b > 0 && (!rewards || !adv)))
        return rl_error_set(RL_EINVAL, "%s: need B >= 0 and rewards/adv buffers", fn);
    if (!(eps >= 0.0) || !isfinite(eps))
        return rl_error_set(RL_EINVAL, "%s: eps=%g must be finite and >= 0", fn, eps);
    if ((rc = rl__first_nonfinite(fn, "rewards", rewards, 0, b)))
        return rc;
    if (!use_group) {
        s_zscore(rewards, adv, b, NULL, 0, 0.0, 0, eps, norm_by_std);
        return 0;
    }
    if (!group || n_groups <= 0)
        return rl_error_set(RL_EINVAL, "%s: use_group needs group ids and n_groups > 0 (got %lld)",
                            fn, (long long)n_groups);
    for (int64_t i = 0; i < b; i++)
        if (group[i] < 0 || group[i] >= n_groups)
            return rl_error_set(RL_ERANGE, "%s: group[%lld]=%lld outside [0, %lld)", fn,
                                (long long)i, (long long)group[i], (long long)n_groups);
    /* Groups are small and few; one pass per group keeps this allocation-free. */
    const int thr = !isnan(reward_threshold) && reward_threshold != -INFINITY;
    for (int64_t g = 0; g < n_groups; g++)
        s_zscore(rewards, adv, b, group, g, reward_threshold, thr, eps, norm_by_std);
    return 0;
}

static double s_clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

int rl_constraint_pi_update(rl_constraint_pi *st, double ki, double kp, double floor,
                            double mean_c, double lambda_max)
{
    static const char fn[] = "rl_constraint_pi_update";
    if (!st)
        return rl_error_set(RL_EINVAL, "%s: need a state", fn);
    if (!isfinite(st->integral) || !isfinite(ki) || !isfinite(kp) || !isfinite(floor) ||
        !isfinite(mean_c) || !isfinite(lambda_max))
        return rl_error_set(RL_EINVAL, "%s: values must be finite, got integral=%g ki=%g kp=%g "
                                       "floor=%g mean=%g lambda_max=%g", fn, st->integral, ki, kp,
                            floor, mean_c, lambda_max);
    if (ki < 0 || kp < 0 || lambda_max < 0)
        return rl_error_set(RL_EINVAL, "%s: ki=%g, kp=%g and lambda_max=%g must be >= 0", fn, ki,
                            kp, lambda_max);
    const double e = floor - mean_c;
    st->integral = s_clamp(st->integral + ki * e, 0, lambda_max);
    st->lambda = s_clamp(st->integral + kp * e, 0, lambda_max);
    return 0;
}

int rl_diffusion_grpo_loss(const float *logp, const float *old_logp,
                           const float *adv, const float *mask, int64_t n,
                           double clip_range, double adv_clip_max,
                           float *grad_logp,
                           rl_diffusion_grpo_metrics *metrics)
{
    static const char fn[] = "rl_diffusion_grpo_loss";
    int rc;
    if (n < 0 || (n > 0 && (!logp || !old_logp || !adv)))
        return rl_error_set(RL_EINVAL, "%s: need n >= 0 and logp/old_logp/adv buffers", fn);
    if (!(clip_range >= 0.0) || !(adv_clip_max >= 0.0))
        return rl_error_set(RL_EINVAL, "%s: clip_range=%g and adv_clip_max=%g must be >= 0", fn,
                            clip_range, adv_clip_max);
    double inv_m, md;
    if ((rc = rl__mask_inv_sum(fn, mask, n, &inv_m, &md)))
        return rc;
    for (int64_t i = 0; i < n; i++) {
        if (mask && mask[i] == 0.0f)
            continue;
        if ((rc = rl__first_nonfinite(fn, "logp", logp, i, 1)) ||
            (rc = rl__first_nonfinite(fn, "old_logp", old_logp, i, 1)) ||
            (rc = rl__first_nonfinite(fn, "adv", adv, i, 1)))
            return rc;
    }
    const double lo = 1.0 - clip_range, hi = 1.0 + clip_range;
    double s_loss = 0.0, s_clip = 0.0, s_kl = 0.0, s_ratio = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double m = mask ? mask[i] : 1.0;
        if (m == 0.0) {
            if (grad_logp)
                grad_logp[i] = 0.0f;
            continue;
        }
        double a = adv[i];
        a = a > adv_clip_max ? adv_clip_max : (a < -adv_clip_max ? -adv_clip_max : a);
        const double lr = (double)logp[i] - old_logp[i];
        const double ratio = exp(lr);
        const double cr = ratio < lo ? lo : (ratio > hi ? hi : ratio);
        const double un = -a * ratio, cl = -a * cr;
        /* d/dlogp of max(un, cl): un' = −A·ratio; cl' = −A·ratio inside
         * [lo, hi] (clamp passes the gradient) else 0; ties split evenly. */
        const double dun = -a * ratio;
        const double dcl = (ratio >= lo && ratio <= hi) ? -a * ratio : 0.0;
        double dl;
        if (un > cl)
            dl = dun;
        else if (cl > un)
            dl = dcl;
        else
            dl = 0.5 * (dun + dcl);
        if (!isfinite(un) || !isfinite(cl))
            return rl_error_set(RL_ENUMERIC, "%s: ratio of row %lld overflows (logp − old = %g)",
                                fn, (long long)i, lr);
        s_loss += m * (un > cl ? un : cl);
        s_clip += m * (cl > un ? 1.0 : 0.0);
        s_kl += m * 0.5 * lr * lr;
        s_ratio += m * ratio;
        if (grad_logp)
            grad_logp[i] = (float)(m * inv_m * dl);
    }
    if (metrics) {
        metrics->loss = s_loss * inv_m;
        metrics->clip_frac = s_clip * md;
        metrics->approx_kl = s_kl * md;
        metrics->ratio_mean = s_ratio * md;
    }
    return 0;
}

int rl_diffusion_timestep_subset(uint64_t seed, uint64_t stream,
                                 int64_t n_timesteps, double fraction,
                                 int64_t *idx, int64_t *k_out)
{
    static const char fn[] = "rl_diffusion_timestep_subset";
    if (n_timesteps <= 0 || !idx || !k_out)
        return rl_error_set(RL_EINVAL, "%s: need n_timesteps > 0, idx and k_out, got n_timesteps=%lld",
                            fn, (long long)n_timesteps);
    if (!(fraction > 0.0 && fraction <= 1.0))
        return rl_error_set(RL_ERANGE, "%s: fraction=%g outside (0, 1]", fn, fraction);
    /* Same truncation as Python's int(len(timesteps) * fraction). */
    int64_t k = (int64_t)((double)n_timesteps * fraction);
    if (k < 1)
        k = 1;
    if (k > n_timesteps)
        k = n_timesteps;
    for (int64_t i = 0; i < n_timesteps; i++)
        idx[i] = i;
    rl_rng g;
    rl_rng_init(&g, seed, stream);
    /* Forward Fisher-Yates: the first k slots are a uniform k-subset. */
    for (int64_t i = 0; i < k; i++) {
        const int64_t j = i + (int64_t)rl_rng_below(&g, (uint64_t)(n_timesteps - i));
        const int64_t tmp = idx[i];
        idx[i] = idx[j];
        idx[j] = tmp;
    }
    *k_out = k;
    return 0;
}
