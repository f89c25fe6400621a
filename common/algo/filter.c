/* filter.c — online group filtering by a metric's mean (see common/algo/filter.h). */
#include "common/algo/filter.h"

#include <math.h>
#include <stdlib.h>

#include "common/algo/advantage.h"
#include "rlrt/error.h"

int rl_filter_groups(const float *metric, const int64_t *group, int64_t B, double low,
                     double high, uint8_t *keep, int64_t *kept_rows, rl_filter_result *res)
{
    const char *fn = "rl_filter_groups";
    if (!metric || !group)
        return rl_error_set(RL_EINVAL, "%s: NULL argument (metric, group)", fn);
    if (B < 0)
        return rl_error_set(RL_ESHAPE, "%s: B = %lld < 0", fn, (long long)B);
    if (!(low < high))
        return rl_error_set(RL_EINVAL, "%s: need low < high (got low=%g, high=%g)", fn, low,
                            high);
    for (int64_t b = 0; b < B; b++)
        if (!isfinite(metric[b]))
            return rl_error_set(RL_ENUMERIC, "%s: metric[%lld] is %g", fn, (long long)b,
                                (double)metric[b]);
    size_t nb = (size_t)(B > 0 ? B : 1);
    int64_t *perm = malloc(nb * sizeof *perm);
    int64_t *starts = malloc((nb + 1) * sizeof *starts);
    uint8_t *k = malloc(nb);
    if (!perm || !starts || !k) {
        free(perm);
        free(starts);
        free(k);
        return rl_error_set(RL_ENOMEM, "%s: %lld rows", fn, (long long)B);
    }
    int64_t G = 0;
    int rc = rl_group_runs(group, B, perm, starts, &G);
    int64_t gk = 0, rk = 0;
    if (!rc) {
        for (int64_t g = 0; g < G; g++) {
            double s = 0.0;
            int64_t n = starts[g + 1] - starts[g];
            for (int64_t i = starts[g]; i < starts[g + 1]; i++)
                s += metric[perm[i]];
            double mean = s / (double)n;
            uint8_t kept = mean > low && mean < high;
            gk += kept;
            for (int64_t i = starts[g]; i < starts[g + 1]; i++)
                k[perm[i]] = kept;
        }
        for (int64_t b = 0; b < B; b++) {
            if (keep)
                keep[b] = k[b];
            if (k[b] && kept_rows)
                kept_rows[rk] = b;
            rk += k[b];
        }
        if (res) {
            res->n_groups = G;
            res->n_groups_kept = gk;
            res->n_rows_kept = rk;
        }
    }
    free(perm);
    free(starts);
    free(k);
    return rc;
}
