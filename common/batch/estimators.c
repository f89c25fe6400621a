/* estimators.c — the table of advantage estimators (see estimators.h). */
#include "common/batch/estimators.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/algo/advantage.h"
#include "common/algo/lm/opo.h"
#include "common/schema/algorithm.h"
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
S_TOKEN_ESTIMATOR(s_opo, rl_adv_opo(tok, in->mask, in->group, in->B, in->R, adv))
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
        rl_log_warn("reinforce_pro_max: %s %g ignored, gamma = 1 is used",
                    RL_CFG_PATH(&rl_discount_section, rl_discount_config, gamma), in->gamma);
    rl_metric_set_put(ms, "adv/pro_max_normalized_groups", (double)res.n_normalized);
    rl_metric_set_put(ms, "adv/pro_max_fallback_groups",
                      (double)(res.n_same_sign + res.n_small_sum + res.n_nonfinite));
    rl_metric_set_put(ms, "adv/pro_max_uniform_groups", (double)res.n_uniform);
    return RL_OK;
}

const rl_estimator rl_estimators[RL_EST_COUNT] = {
    {"grpo", RL_EST_GRPO, RL_TRACK_LM | RL_TRACK_EMBODIED | RL_TRACK_DIFFUSION, 2, s_grpo},
    {"rloo", RL_EST_RLOO, RL_TRACK_LM, 2, s_rloo},
    {"reinforce_plus_plus", RL_EST_REINFORCE_PP, RL_TRACK_LM, 1, s_rpp},
    {"reinforce_plus_plus_baseline", RL_EST_REINFORCE_PP_BASELINE, RL_TRACK_LM, 2, s_rpp_baseline},
    {"reinforce_pro_max", RL_EST_REINFORCE_PRO_MAX, RL_TRACK_LM, 2, s_pro_max},
    {"gae", RL_EST_GAE, RL_TRACK_EMBODIED, 1, NULL},
    {"opo", RL_EST_OPO, RL_TRACK_LM, 2, s_opo},
};

const char *rl_estimator_names(void)
{
    static char names[256];
    if (!names[0])
        for (size_t i = 0, k = 0; i < RL_EST_COUNT && k < sizeof names; i++)
            k += (size_t)snprintf(names + k, sizeof names - k, "%s%s", i ? "|" : "", rl_estimators[i].name);
    return names;
}

const char *rl_track_name(unsigned track)
{
    return track == RL_TRACK_LM ? "language model"
           : track == RL_TRACK_EMBODIED ? "embodied"
           : track == RL_TRACK_DIFFUSION ? "diffusion" : "?";
}

/* The names of the estimators `track` can use, or of all (track 0). */
static void s_names(unsigned track, char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 0, k = 0; i < RL_EST_COUNT && k < size; i++)
        if (!track || (rl_estimators[i].tracks & track))
            k += (size_t)snprintf(buf + k, size - k, "%s%s", k ? ", " : "", rl_estimators[i].name);
}

const rl_estimator *rl_estimator_find(const char *name, unsigned track)
{
    char known[512];
    for (size_t i = 0; i < RL_EST_COUNT; i++) {
        if (!name || strcmp(rl_estimators[i].name, name) != 0)
            continue;
        if (rl_estimators[i].tracks & track)
            return &rl_estimators[i];
        s_names(track, known, sizeof known);
        rl_error_set(RL_ECONFIG, "estimator '%s' is not available to the %s track (it has: %s)", name,
                     rl_track_name(track), known);
        return NULL;
    }
    s_names(0, known, sizeof known);
    rl_error_set(RL_ENOTFOUND, "unknown estimator '%s' (known: %s)", name ? name : "(null)", known);
    return NULL;
}
