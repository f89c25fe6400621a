/* aepo_reward.c — AEPO hierarchical entropy reward and token-level dynamic
 * KL weights. See common/algo/lm/aepo.h. */
#include "common/algo/lm/aepo.h"

#include <math.h>
#include <stddef.h>

#include "rlrt/error.h"

/* Quadratic inside the knee, linear outside: a bounded slope keeps one
 * runaway response from dominating the batch. Only called with x ≥ 0. */
static double s_huber(double x, double kappa)
{
    if (x < 0)
        x = 0;
    return x <= kappa ? 0.5 * x * x / kappa : x - 0.5 * kappa;
}

static double s_sig(double x, double temp) { return 1.0 / (1.0 + exp(-x / temp)); }

static double s_min(double a, double b) { return a < b ? a : b; }

double rl_aepo_entropy_reward_one(const rl_aepo_config *c, int d, int correct, double count,
                                  double target, double alpha)
{
    if (d < 0 || d >= RL_AEPO_NBUCKETS)
        return NAN;
    double delta = count - target;
    double m = c->margin_frac[d] * (target > 1 ? target : 1);
    if (m < 1)
        m = 1;
    double k = c->kappa[d], T = c->temp[d], cap = alpha * c->cap_scale[d];
    if (!correct) {
        /* A wrong answer that explored past the band earns a (bounded) bonus. */
        double over = delta - m > 0 ? delta - m : 0;
        return s_sig(over, T) * cap * c->wrong_scale[d];
    }
    switch (d) {
    case RL_AEPO_EASY: {
        double over = delta - m > 0 ? delta - m : 0;
        return -s_min(cap, s_huber(over, k) / (m + k) * cap);
    }
    case RL_AEPO_MEDIUM: {
        double dev = fabs(delta) - m > 0 ? fabs(delta) - m : 0;
        return -s_min(cap, s_huber(dev, k) / (m + k) * cap);
    }
    default: /* hard */
        if (delta >= -m)
            return s_sig(delta + m, T) * cap;
        return -s_min(cap, 0.5 * s_huber(-delta - m, k) / (m + k) * cap);
    }
}

int rl_aepo_entropy_reward(const rl_aepo_state *s, const int8_t *bucket, const float *acc,
                           const float *hwe, int64_t B, float *ent_reward, float *overall)
{
    const char *fn = "rl_aepo_entropy_reward";
    if (!s || B < 0 || (B > 0 && (!bucket || !acc || !hwe || !ent_reward)))
        return rl_error_set(RL_EINVAL, "%s: NULL argument or B=%lld < 0", fn, (long long)B);
    const rl_aepo_config *c = rl_aepo_state_config(s);
    for (int64_t b = 0; b < B; b++) {
        int d = bucket[b];
        if (d < 0 || d >= RL_AEPO_NBUCKETS)
            return rl_error_set(RL_EINVAL,
                                "%s: bucket[%lld] = %d (%s), expected 0..2; run rl_aepo_update "
                                "on the batch first", fn, (long long)b, d, rl_aepo_bucket_name(d));
        if (!isfinite(acc[b]) || !isfinite(hwe[b]))
            return rl_error_set(RL_ENUMERIC, "%s: row %lld has acc %g, hwe %g", fn, (long long)b,
                                (double)acc[b], (double)hwe[b]);
    }
    for (int64_t b = 0; b < B; b++) {
        int d = bucket[b];
        double r = rl_aepo_entropy_reward_one(c, d, acc[b] >= 1.0f, hwe[b],
                                              rl_aepo_target(s, d, NULL), rl_aepo_alpha(s, d));
        ent_reward[b] = (float)r;
        if (overall)
            overall[b] = (float)((double)acc[b] + r);
    }
    return 0;
}

int rl_aepo_kl_weights(const rl_aepo_state *s, const uint8_t *flags, const float *mask,
                       const int8_t *bucket, int64_t B, int64_t T, double beta,
                       double low_factor, float *w)
{
    const char *fn = "rl_aepo_kl_weights";
    if (B < 0 || T < 0 || (B * T > 0 && (!flags || !mask || !w)))
        return rl_error_set(RL_EINVAL, "%s: NULL array or negative size (B=%lld, T=%lld)", fn,
                            (long long)B, (long long)T);
    if (!isfinite(beta))
        return rl_error_set(RL_ENUMERIC, "%s: beta = %g must be finite", fn, beta);
    if (low_factor < 0)
        low_factor = s ? rl_aepo_state_config(s)->kl_low_factor : 0.5;
    if (!isfinite(low_factor))
        return rl_error_set(RL_ENUMERIC, "%s: low_factor = %g must be finite", fn, low_factor);
    int per_bucket = s && bucket;
    for (int64_t b = 0; b < B; b++) {
        double bb = beta;
        if (per_bucket) {
            int d = bucket[b];
            if (d < 0 || d >= RL_AEPO_NBUCKETS)
                return rl_error_set(RL_EINVAL, "%s: bucket[%lld] = %d, expected 0..2", fn,
                                    (long long)b, d);
            bb += rl_aepo_lambda(s, d);
        }
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            w[i] = mask[i] != 0 ? (float)((double)mask[i] * bb * (flags[i] ? low_factor : 1.0)) : 0.0f;
        }
    }
    return 0;
}
