/* lm_metrics.c — the metrics of a scored LM round (common/batch/lm_metrics.h). */
#include "common/batch/lm_metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/algo/advantage.h"
#include "rlrt/error.h"
#include "rlrt/tensor.h"

int rl_lm_tool_metrics(const rl_dataproto *dp, const rl_lm_names *L, rl_metric_set *ms)
{
    if (!rl_dataproto_tensor(dp, L->tool_stats))
        return RL_OK;
    const rl_lm_tool_layout *c = L->tools;
    int64_t B = rl_dataproto_rows(dp);
    const rl_tensor *t = rl_dataproto_tensor_shaped(dp, L->tool_stats, RL_I32, 2,
                                                    (int64_t[]){B, c->n});
    if (!t)
        return rl_error_code();
    const int32_t *v = rl_tensor_data((rl_tensor *)t);
    double *sum = calloc((size_t)c->n, sizeof(double)), used = 0;
    if (!sum)
        return rl_error_set(RL_ENOMEM, "tool metrics: out of memory");
    for (int64_t b = 0; b < B; b++) {
        for (int k = 0; k < c->n; k++)
            sum[k] += v[b * c->n + k];
        used += v[b * c->n + c->calls] > 0;
    }
    double n = B ? (double)B : 1, calls = sum[c->calls] > 0 ? sum[c->calls] : 1;
    rl_metric_set_put(ms, "tools/turns_mean", sum[c->turns] / n);
    rl_metric_set_put(ms, "tools/calls_mean", sum[c->calls] / n);
    rl_metric_set_put(ms, "tools/used_frac", used / n);
    for (int k = 0; k < c->n_outcomes; k++) {
        char name[64];
        snprintf(name, sizeof name, "tools/%s_frac", c->outcome_name(k));
        rl_metric_set_put(ms, name, sum[c->outcome0 + k] / calls);
    }
    rl_metric_set_put(ms, "tools/bad_call_frac", sum[c->bad_calls] / calls);
    rl_metric_set_put(ms, "tools/truncated_frac", sum[c->truncated] / n);
    rl_metric_set_put(ms, "tools/max_turns_frac", sum[c->max_turns] / n);
    free(sum);
    return RL_OK;
}

/* batch/solve_all and batch/solve_none over the prompt groups. */
static int s_solve_metrics(const rl_dataproto *dp, const rl_lm_names *L, const float *acc,
                           rl_metric_set *ms)
{
    int64_t B = rl_dataproto_rows(dp), G = 0;
    int64_t *gid = rl_lm_column_i64(dp, L->group), *perm = malloc(sizeof(int64_t) * (size_t)(B + 1)),
            *starts = malloc(sizeof(int64_t) * (size_t)(B + 2));
    int rc = !gid ? rl_error_code()
             : (!perm || !starts) ? rl_error_set(RL_ENOMEM, "batch metrics: out of memory")
                                  : rl_group_runs(gid, B, perm, starts, &G);
    double all = 0, none = 0;
    for (int64_t g = 0; !rc && g < G; g++) {
        double c = 0;
        for (int64_t i = starts[g]; i < starts[g + 1]; i++)
            c += acc[perm[i]];
        all += c == (double)(starts[g + 1] - starts[g]);
        none += c == 0;
    }
    free(gid);
    free(perm);
    free(starts);
    if (rc)
        return rc;
    rl_metric_set_put(ms, "batch/solve_all", G ? all / (double)G : 0);
    rl_metric_set_put(ms, "batch/solve_none", G ? none / (double)G : 0);
    return RL_OK;
}

int rl_lm_batch_metrics(const rl_dataproto *dp, const rl_lm_names *L, rl_metric_set *ms)
{
    int64_t B = rl_dataproto_rows(dp), R;
    float *mask = rl_lm_mask(dp, L, RL_LM_MASK_LOSS, &B, &R);
    const float *score = rl_lm_rows_f32(dp, L->score);
    const float *acc = rl_lm_rows_f32(dp, L->accuracy);
    const float *fmt = rl_lm_rows_f32(dp, L->format);
    const float *ent = rl_lm_tokens_f32(dp, L->entropy, R);
    if (!mask || !score || !acc || !fmt || !ent) {
        free(mask);
        return rl_error_code();
    }
    const int32_t *lens = rl_tensor_data(rl_dataproto_tensor(dp, L->response_lens));
    double s = 0, a = 0, f = 0, l = 0, e = 0, nt = 0, smax = -1e30, smin = 1e30;
    for (int64_t b = 0; b < B; b++) {
        s += score[b];
        a += acc[b];
        f += fmt[b];
        smax = fmax(smax, score[b]);
        smin = fmin(smin, score[b]);
        l += lens[b]; /* every sampled token, in the loss or not */
        for (int64_t k = 0; k < R; k++)
            if (mask[b * R + k]) {
                nt++;
                e += ent[b * R + k];
            }
    }
    free(mask);
    int rc = s_solve_metrics(dp, L, acc, ms);
    if (rc)
        return rc;
    rl_metric_set_put(ms, RL_M_SCORE_MEAN, B ? s / B : 0);
    rl_metric_set_put(ms, "critic/score/max", B ? smax : 0);
    rl_metric_set_put(ms, "critic/score/min", B ? smin : 0);
    rl_metric_set_put(ms, RL_M_ACCURACY, B ? a / B : 0);
    rl_metric_set_put(ms, "critic/format/mean", B ? f / B : 0);
    rl_metric_set_put(ms, RL_M_RESPONSE_LEN, B ? l / B : 0);
    rl_metric_set_put(ms, RL_M_ENTROPY, nt ? e / nt : 0);
    return rl_lm_tool_metrics(dp, L, ms);
}
