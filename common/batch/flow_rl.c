/* flow_rl.c — the embodied methods' section as settings of the mathematics
 * (common/batch/flow_rl.h). */
#include "common/batch/flow_rl.h"

#include <stdio.h>

#include "rlrt/error.h"

rl_flow_sar_config rl_flow_rl_sar_loss_config(const rl_flow_rl_config *o)
{
    rl_flow_sar_config s = rl_flow_sar_config_default();
    s.beta = o->sar_beta;
    s.variant = o->sar_variant ? RL_FLOW_SAR_SOFTPLUS_KL : RL_FLOW_SAR_MSE_BRANCH;
    s.energy = o->sar_energy ? RL_FLOW_SAR_ENERGY_SDE : RL_FLOW_SAR_ENERGY_MSE;
    s.kl_coeff = o->sar_kl_coeff;
    return s;
}

double rl_flow_rl_ema_beta(const rl_flow_rl_config *o, int64_t count)
{
    if (o->loss == RL_FLOW_LOSS_SAR)
        return rl_flow_ema_beta(o->sar_schedule ? RL_FLOW_EMA_LINEAR : RL_FLOW_EMA_FIXED, o->sar_ema_beta,
                                o->sar_eta_rate, o->sar_eta_max, count);
    if (o->loss == RL_FLOW_LOSS_IPO)
        return rl_flow_ema_beta(RL_FLOW_EMA_FIXED, o->ipo_beta_ref, 0, 0, count);
    return 0.0 / 0.0;
}

#define S_ERR(c, ...) RL_CFG_ERROR(c, &rl_estimator_section, rl_estimator_config, adv_estimator, RL_ECONFIG, __VA_ARGS__)
#define S_ERR2(c, ...)                                                                          \
    RL_CFG_ERROR2(c, &rl_estimator_section, rl_estimator_config, adv_estimator, &rl_flow_rl_section, \
                  rl_flow_rl_config, loss_type_name, RL_ECONFIG, __VA_ARGS__)

const rl_estimator *rl_flow_rl_estimator(const rl_config *c, const rl_flow_rl_config *o)
{
    if (o->adv < 0 || o->adv >= RL_EST_COUNT) {
        S_ERR(c, "no estimator %d in the table", o->adv);
        return NULL;
    }
    const rl_estimator *e = rl_estimator_find(rl_estimators[o->adv].name, RL_TRACK_EMBODIED);
    if (!e) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", rl_error_message());
        S_ERR(c, "%s", msg);
        return NULL;
    }
    /* between two keys: at the one the user wrote (loss_type over a default estimator) */
    if (o->loss == RL_FLOW_LOSS_GRPO && e->id != RL_EST_GRPO) {
        S_ERR2(c, "loss_type actor has no value head: it needs adv_estimator grpo, got %s", e->name);
        return NULL;
    }
    if (o->loss == RL_FLOW_LOSS_PPO && e->id != RL_EST_GAE) {
        S_ERR2(c, "loss_type actor_critic trains the value head with GAE: it needs adv_estimator gae, got %s",
               e->name);
        return NULL;
    }
    return e;
}
