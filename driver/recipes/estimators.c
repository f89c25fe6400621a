/* estimators.c — the table of advantage estimators (see estimators.h). */
#include "driver/recipes/estimators.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/algo/advantage.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "common/metrics/metrics.h"

/* Outcome estimators work on token rewards: the score at the last valid
 * token, minus kl_coef·kl at every token when the KL is in the reward. */
static int s_token_rewards(const rl_adv_input *in, float **tok)
{
    *tok = calloc((size_t)(in->B * in->R > 0 ? in->B * in->R : 1), sizeof(float));
    if (!*tok)
        return rl_error_set(RL_ENOMEM, "advantages: out of memory");
    return rl_token_rewards_kl(in->scores, in->kl_coef > 0 ? in->kl : NULL, in->mask, in->B, in->R,
                               in->kl_coef, *tok);
}

#define S_TOKEN_ESTIMATOR(fname, call)                                    \
    static int fname(const rl_adv_input *in, float *adv, rl_metric_set *ms) \
    {                                                                     \
        (void)ms;                                                         \
        float *tok;                                                       \
        int rc = s_token_rewards(in, &tok);                               \
        if (!rc)                                                          \
            rc = call;                                                    \
        free(tok);                                                        \
        return rc;                                                        \
    }

S_TOKEN_ESTIMATOR(s_grpo, rl_adv_grpo(tok, in->mask, in->group, in->B, in->R, RL_GRPO_EPS,
                                      in->norm_by_std, adv, NULL))
S_TOKEN_ESTIMATOR(s_rloo, rl_adv_rloo(tok, in->mask, in->group, in->B, in->R, adv))
S_TOKEN_ESTIMATOR(s_rpp, rl_adv_reinforce_pp(tok, in->mask, in->B, in->R, in->gamma, adv, NULL))
S_TOKEN_ESTIMATOR(s_rpp_baseline, rl_adv_reinforce_pp_baseline(tok, in->mask, in->group, in->B,
                                                                in->R, adv))

/* REINFORCE Pro Max (seed 003) shapes the rewards itself. */
static int s_pro_max(const rl_adv_input *in, float *adv, rl_metric_set *ms)
{
    rl_pro_max_cfg cfg;
    rl_pro_max_cfg_default(&cfg, in->n);
    cfg.kl_coef = in->kl_coef;
    cfg.uniform_scale = in->uniform_scale;
    cfg.gamma = in->gamma;
    rl_pro_max_result res;
    int rc = rl_adv_pro_max(&cfg, in->scores, in->kl_coef > 0 ? in->kl : NULL, in->mask, NULL,
                            in->group, in->B, in->R, adv, NULL, &res);
    if (rc)
        return rc;
    if (res.warnings & RL_PM_WARN_GAMMA_FORCED)
        rl_log_warn("reinforce_pro_max: algorithm.gamma %g ignored, gamma = 1 is used", in->gamma);
    rl_metric_set_put(ms, "adv/pro_max_normalized_groups", (double)res.n_normalized);
    rl_metric_set_put(ms, "adv/pro_max_fallback_groups",
                      (double)(res.n_same_sign + res.n_small_sum + res.n_nonfinite));
    rl_metric_set_put(ms, "adv/pro_max_uniform_groups", (double)res.n_uniform);
    return RL_OK;
}

static const rl_estimator s_estimators[] = {
    {"grpo", 2, s_grpo},
    {"rloo", 2, s_rloo},
    {"reinforce_plus_plus", 1, s_rpp},
    {"reinforce_plus_plus_baseline", 2, s_rpp_baseline},
    {"reinforce_pro_max", 2, s_pro_max},
};
#define S_N (sizeof s_estimators / sizeof s_estimators[0])

const rl_estimator *rl_estimator_find(const char *name)
{
    for (size_t i = 0; i < S_N; i++)
        if (strcmp(s_estimators[i].name, name) == 0)
            return &s_estimators[i];
    char known[512] = "";
    for (size_t i = 0, k = 0; i < S_N && k < sizeof known; i++)
        k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", i ? ", " : "", s_estimators[i].name);
    rl_error_set(RL_ENOTFOUND, "unknown estimator '%s' (known: %s)", name, known);
    return NULL;
}
