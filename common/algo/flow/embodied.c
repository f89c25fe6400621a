/* embodied.c — step-major chunk arrays and GRPO group advantages of the
 * embodied recipe (contract: common/algo/flow/embodied.h). */
#include <math.h>
#include <stdlib.h>

#include "common/algo/flow/embodied.h"
#include "rlrt/error.h"


void rl_embodied_chunk_arrays(const float *rewards, const uint8_t *valid, int64_t B, int64_t S, int64_t C,
                         float *step_rewards, float *chunk_rewards, float *step_mask)
{
    int64_t K = S * C;
    for (int64_t s = 0; s < S; s++)
        for (int64_t b = 0; b < B; b++) {
            double sum = 0;
            for (int64_t c = 0; c < C; c++) {
                int64_t k = s * C + c;
                float r = valid[b * K + k] ? rewards[b * K + k] : 0.0f;
                if (step_rewards)
                    step_rewards[(s * B + b) * C + c] = r;
                sum += r;
            }
            chunk_rewards[s * B + b] = (float)sum;
            step_mask[s * B + b] = valid[b * K + s * C] ? 1.0f : 0.0f;
        }
}

int rl_embodied_grpo_advantages(const float *R, const int64_t *group, int64_t B, int64_t n_groups, int filter,
                           double lo, double hi, float *adv, int64_t *kept)
{
    double *sum = calloc((size_t)(n_groups > 0 ? n_groups : 1) * 3, sizeof(double));
    if (!sum)
        return rl_error_set(RL_ENOMEM, "out of memory");
    double *sq = sum + n_groups, *cnt = sq + n_groups;
    for (int64_t b = 0; b < B; b++) {
        if (group[b] < 0 || group[b] >= n_groups) {
            free(sum);
            return rl_error_set(RL_ERANGE, "group[%lld] = %lld, expected [0, %lld)", (long long)b,
                                (long long)group[b], (long long)n_groups);
        }
        sum[group[b]] += R[b];
        cnt[group[b]] += 1;
    }
    for (int64_t b = 0; b < B; b++) {
        double m = sum[group[b]] / cnt[group[b]];
        sq[group[b]] += (R[b] - m) * (R[b] - m);
    }
    int64_t k = 0;
    for (int64_t g = 0; g < n_groups; g++) {
        double m = cnt[g] > 0 ? sum[g] / cnt[g] : 0;
        if (cnt[g] > 0 && !(filter && (m < lo || m > hi)))
            k++;
    }
    for (int64_t b = 0; b < B; b++) {
        int64_t g = group[b];
        double m = sum[g] / cnt[g], sd = cnt[g] > 1 ? sqrt(sq[g] / (cnt[g] - 1)) : 0;
        adv[b] = (filter && (m < lo || m > hi)) || cnt[g] < 2 ? 0.0f : (float)((R[b] - m) / (sd + 1e-6));
    }
    if (kept)
        *kept = k;
    free(sum);
    return RL_OK;
}

int rl_embodied_seq_mean_scale(const int64_t *episode, int64_t n, int64_t B, float *adv)
{
    int64_t *len = calloc((size_t)(B > 0 ? B : 1), sizeof(int64_t)), E = 0;
    if (!len)
        return rl_error_set(RL_ENOMEM, "out of memory");
    for (int64_t k = 0; k < n; k++) {
        if (episode[k] < 0 || episode[k] >= B) {
            free(len);
            return rl_error_set(RL_ERANGE, "episode[%lld] = %lld, expected [0, %lld)", (long long)k,
                                (long long)episode[k], (long long)B);
        }
        E += len[episode[k]]++ == 0;
    }
    for (int64_t k = 0; k < n; k++)
        adv[k] = (float)(adv[k] * ((double)n / (double)E) / (double)len[episode[k]]);
    free(len);
    return RL_OK;
}
