/* offpolicy.c — DAPO's overlong shaping and group filter by std, and
 * truncated importance sampling (see common/algo/offpolicy.h). */
#include "common/algo/offpolicy.h"

#include <math.h>
#include <stdlib.h>

#include "common/algo/advantage.h"
#include "rlrt/error.h"

int rl_overlong_penalty(const int32_t *lens, int64_t B, int64_t max_len, int64_t buffer_len,
                        double factor, float *out)
{
    const char *fn = "rl_overlong_penalty";
    if (!lens || !out)
        return rl_error_set(RL_EINVAL, "%s: NULL argument (lens, out)", fn);
    if (B < 0)
        return rl_error_set(RL_ESHAPE, "%s: B = %lld < 0", fn, (long long)B);
    if (buffer_len < 1 || buffer_len > max_len)
        return rl_error_set(RL_EINVAL, "%s: need 0 < buffer_len <= max_len, got %lld and %lld",
                            fn, (long long)buffer_len, (long long)max_len);
    if (!(factor >= 0) || !isfinite(factor))
        return rl_error_set(RL_EINVAL, "%s: factor must be finite and >= 0, got %g", fn, factor);
    int64_t expected = max_len - buffer_len;
    for (int64_t b = 0; b < B; b++) {
        if (lens[b] < 0 || lens[b] > max_len)
            return rl_error_set(RL_ERANGE, "%s: lens[%lld] = %d outside [0, %lld]", fn,
                                (long long)b, lens[b], (long long)max_len);
        double exceed = (double)(lens[b] - expected);
        double p = -exceed / (double)buffer_len * factor;
        out[b] = (float)(p < 0 ? p : 0.0);
    }
    return RL_OK;
}

int rl_overlong_truncated(const int32_t *tokens, const int32_t *lens, int64_t B, int64_t R,
                          const int32_t *stop, int n_stop, uint8_t *out, int64_t *n_truncated)
{
    const char *fn = "rl_overlong_truncated";
    if (!tokens || !lens || !out || (n_stop > 0 && !stop))
        return rl_error_set(RL_EINVAL, "%s: NULL argument", fn);
    if (B < 0 || R < 1)
        return rl_error_set(RL_ESHAPE, "%s: (B, R) = (%lld, %lld)", fn, (long long)B, (long long)R);
    int64_t n = 0;
    for (int64_t b = 0; b < B; b++) {
        if (lens[b] < 0 || lens[b] > R)
            return rl_error_set(RL_ERANGE, "%s: lens[%lld] = %d outside [0, %lld]", fn,
                                (long long)b, lens[b], (long long)R);
        int cut = lens[b] == R;
        for (int k = 0; cut && k < n_stop; k++)
            if (tokens[b * R + R - 1] == stop[k])
                cut = 0;
        out[b] = (uint8_t)cut;
        n += cut;
    }
    if (n_truncated)
        *n_truncated = n;
    return RL_OK;
}

int rl_filter_groups_std(const float *metric, const int64_t *group, int64_t B, uint8_t *keep,
                         int64_t *kept_groups, int64_t *groups)
{
    const char *fn = "rl_filter_groups_std";
    if (!metric || !group || !keep)
        return rl_error_set(RL_EINVAL, "%s: NULL argument (metric, group, keep)", fn);
    if (B < 0)
        return rl_error_set(RL_ESHAPE, "%s: B = %lld < 0", fn, (long long)B);
    for (int64_t b = 0; b < B; b++)
        if (!isfinite(metric[b]))
            return rl_error_set(RL_ENUMERIC, "%s: metric[%lld] is %g", fn, (long long)b,
                                (double)metric[b]);
    size_t nb = (size_t)(B > 0 ? B : 1);
    int64_t *perm = malloc(nb * sizeof *perm), *starts = malloc((nb + 1) * sizeof *starts);
    if (!perm || !starts) {
        free(perm);
        free(starts);
        return rl_error_set(RL_ENOMEM, "%s: %lld rows", fn, (long long)B);
    }
    int64_t G = 0, gk = 0;
    int rc = rl_group_runs(group, B, perm, starts, &G);
    for (int64_t g = 0; !rc && g < G; g++) {
        int64_t n = starts[g + 1] - starts[g];
        double s = 0.0, s2 = 0.0;
        for (int64_t i = starts[g]; i < starts[g + 1]; i++)
            s += metric[perm[i]];
        double mean = s / (double)n;
        for (int64_t i = starts[g]; i < starts[g + 1]; i++) {
            double d = metric[perm[i]] - mean;
            s2 += d * d;
        }
        uint8_t kept = n == 1 || s2 > 0.0;
        gk += kept;
        for (int64_t i = starts[g]; i < starts[g + 1]; i++)
            keep[perm[i]] = kept;
    }
    free(perm);
    free(starts);
    if (rc)
        return rc;
    if (kept_groups)
        *kept_groups = gk;
    if (groups)
        *groups = G;
    return RL_OK;
}

int rl_tis_weights(const float *old_logp, const float *rollout_logp, const float *mask,
                   int64_t B, int64_t T, double cap, float *weights, rl_tis_stats *stats)
{
    const char *fn = "rl_tis_weights";
    if (!old_logp || !rollout_logp || !mask || !weights)
        return rl_error_set(RL_EINVAL, "%s: NULL argument", fn);
    if (B < 0 || T < 0)
        return rl_error_set(RL_ESHAPE, "%s: (B, T) = (%lld, %lld)", fn, (long long)B, (long long)T);
    if (!(cap > 0) || !isfinite(cap))
        return rl_error_set(RL_EINVAL, "%s: cap must be finite and > 0, got %g", fn, cap);
    double n = 0, sw = 0, sraw = 0, mx = 0, capped = 0, kl = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            if (mask[i] == 0.0f) {
                weights[i] = 0.0f;
                continue;
            }
            if (!isfinite(old_logp[i]) || !isfinite(rollout_logp[i]))
                return rl_error_set(RL_ENUMERIC, "%s: %s[%lld, %lld] is %g", fn,
                                    isfinite(old_logp[i]) ? "rollout_logp" : "old_logp",
                                    (long long)b, (long long)t,
                                    (double)(isfinite(old_logp[i]) ? rollout_logp[i] : old_logp[i]));
            double d = (double)old_logp[i] - (double)rollout_logp[i];
            d = d < -20 ? -20 : d > 20 ? 20 : d;
            double r = exp(d), w = r < cap ? r : cap;
            weights[i] = (float)w;
            n++;
            sw += w;
            sraw += r;
            mx = r > mx ? r : mx;
            capped += r > cap;
            kl += (double)rollout_logp[i] - (double)old_logp[i];
        }
    if (stats) {
        stats->n_tokens = n;
        stats->mean = n > 0 ? sw / n : 0;
        stats->raw_mean = n > 0 ? sraw / n : 0;
        stats->raw_max = mx;
        stats->capped_frac = n > 0 ? capped / n : 0;
        stats->mismatch_kl = n > 0 ? kl / n : 0;
    }
    return RL_OK;
}
