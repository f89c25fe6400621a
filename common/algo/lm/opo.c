/* opo.c — OPO's length-weighted group baseline (see common/algo/lm/opo.h).
 * Sums are in double, per group in row order, so the result does not depend
 * on how rows are ordered within the batch beyond their group. */
#include "common/algo/lm/opo.h"

#include <math.h>
#include <stdlib.h>

#include "common/algo/advantage.h"
#include "rlrt/error.h"

int rl_adv_opo(const float *token_rewards, const float *mask, const int64_t *group, int64_t B,
               int64_t T, float *adv)
{
    const char *fn = "rl_adv_opo";
    if (!token_rewards || !mask || !group || !adv)
        return rl_error_set(RL_EINVAL, "%s: NULL argument", fn);
    if (B < 0 || T < 0 || (T > 0 && B > INT64_MAX / T))
        return rl_error_set(RL_ESHAPE, "%s: B=%lld, T=%lld", fn, (long long)B, (long long)T);
    size_t nb = (size_t)(B > 0 ? B : 1);
    double *score = malloc(nb * sizeof *score), *len = malloc(nb * sizeof *len);
    int64_t *perm = malloc(nb * sizeof *perm), *starts = malloc((nb + 1) * sizeof *starts);
    int rc = score && len && perm && starts ? RL_OK
                                            : rl_error_set(RL_ENOMEM, "%s: %lld rows", fn, (long long)B);
    for (int64_t b = 0; !rc && b < B; b++) {
        double s = 0, l = 0;
        for (int64_t t = 0; !rc && t < T; t++) {
            float r = token_rewards[b * T + t], m = mask[b * T + t];
            if (!isfinite(r) || !isfinite(m))
                rc = rl_error_set(RL_ENUMERIC, "%s: %s[%lld, %lld] is %g", fn,
                                  isfinite(r) ? "mask" : "token_rewards", (long long)b, (long long)t,
                                  (double)(isfinite(r) ? m : r));
            s += r;
            l += m;
        }
        score[b] = s, len[b] = l;
    }
    int64_t n_groups = 0;
    if (!rc)
        rc = rl_group_runs(group, B, perm, starts, &n_groups);
    for (int64_t g = 0; !rc && g < n_groups; g++) {
        double sum_ls = 0, sum_l = 0, base = 0;
        for (int64_t i = starts[g]; i < starts[g + 1]; i++)
            sum_ls += len[perm[i]] * score[perm[i]], sum_l += len[perm[i]];
        if (starts[g + 1] - starts[g] > 1 && sum_l > 0)
            base = sum_ls / sum_l;
        for (int64_t i = starts[g]; i < starts[g + 1]; i++) {
            int64_t b = perm[i];
            for (int64_t t = 0; t < T; t++)
                adv[b * T + t] = (float)((score[b] - base) * mask[b * T + t]);
        }
    }
    free(score), free(len), free(perm), free(starts);
    return rc;
}
