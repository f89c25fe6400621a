/* flow_rl.c — the algorithm section of the embodied methods
 * (common/schema/flow_rl.h). */
#include "common/schema/flow_rl.h"

#include <string.h>

#include "common/schema/actor.h"
#include "common/schema/rollout.h"
#include "rlrt/error.h"

#define S_PATH(field) RL_CFG_PATH(&rl_flow_rl_section, rl_flow_rl_config, field)
#define S_ERR(c, field, ...) \
    RL_CFG_ERROR(c, &rl_flow_rl_section, rl_flow_rl_config, field, RL_ECONFIG, __VA_ARGS__)
/* a check between two of its keys: at the one the user wrote */
#define S_ERR2(c, fa, fb, ...) \
    RL_CFG_ERROR2(c, &rl_flow_rl_section, rl_flow_rl_config, fa, &rl_flow_rl_section, \
                  rl_flow_rl_config, fb, RL_ECONFIG, __VA_ARGS__)

static int s_check(const rl_config *c, void *out)
{
    rl_flow_rl_config *o = out;
    static const char *const losses[] = {"flow_sar", "flow_ipo", "actor", "actor_critic"};
    int loss = -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(o->loss_type_name, losses[i]) == 0)
            loss = i;
    if (loss < 0)
        return S_ERR(c, loss_type_name, "expected flow_sar, flow_ipo, actor or actor_critic, got '%s'",
                     o->loss_type_name);
    o->loss = (rl_flow_loss_type)loss;
    const rl_estimator_config *e = rl_config_section_get(c, &rl_estimator_section);
    const rl_discount_config *d = e ? rl_config_section_get(c, &rl_discount_section) : NULL;
    if (!d)
        return rl_error_code();
    o->adv = e->adv_estimator;
    o->gamma = d->gamma;
    if (o->demo_coef > 0 && (!o->demos || !*o->demos))
        return S_ERR2(c, demos, demo_coef, "%s is %g: name the demonstrations in %s (a libero_collect "
                      "dataset, e.g. runs/libero_demos/demos.safetensors)", S_PATH(demo_coef),
                      o->demo_coef, S_PATH(demos));
    if (o->rl_coef == 0 && o->demo_coef == 0)
        return S_ERR2(c, rl_coef, demo_coef, "%s 0 with %s 0 trains nothing: rl_coef 0 is the "
                      "anchor-only control, which needs demo_coef > 0 and %s", S_PATH(rl_coef),
                      S_PATH(demo_coef), S_PATH(demos));
    /* the roles' keys these methods give a meaning of their own (the roles'
     * sections bound them) */
    const rl_actor_config *ac = rl_config_section_get(c, &rl_actor_section);
    const rl_rollout_flow_config *rf = ac ? rl_config_section_get(c, &rl_rollout_flow_section) : NULL;
    if (!rf)
        return rl_error_code();
    const char *agg = ac->loss_agg_name;
    if (strcmp(agg, "token-mean") && strcmp(agg, "seq-mean-token-mean"))
        return RL_CFG_ERROR(c, &rl_actor_section, rl_actor_config, loss_agg, RL_ECONFIG,
                            "unknown value '%s' (expected one of: token-mean,seq-mean-token-mean)", agg);
    o->seq_mean = strcmp(agg, "seq-mean-token-mean") == 0;
    if (o->seq_mean && o->loss < RL_FLOW_LOSS_GRPO)
        return RL_CFG_ERROR2(c, &rl_actor_section, rl_actor_config, loss_agg, &rl_flow_rl_section,
                             rl_flow_rl_config, loss_type_name, RL_ECONFIG,
                             "seq-mean-token-mean weights the chunk steps of %s actor or "
                             "actor_critic; %s weighs its chunks by its own credit: set %s: token-mean",
                             S_PATH(loss_type_name), o->loss_type_name,
                             RL_CFG_PATH(&rl_actor_section, rl_actor_config, loss_agg));
    if (o->sar_t_min > o->sar_t_max)
        return S_ERR2(c, sar_t_min, sar_t_max, "%s (%g) is above %s (%g)", S_PATH(sar_t_min),
                      o->sar_t_min, S_PATH(sar_t_max), o->sar_t_max);
    if (o->ipo_t_min > o->ipo_t_max)
        return S_ERR2(c, ipo_t_min, ipo_t_max, "%s (%g) is above %s (%g)", S_PATH(ipo_t_min),
                      o->ipo_t_min, S_PATH(ipo_t_max), o->ipo_t_max);
    if (o->sar_w_min > o->sar_w_max)
        return S_ERR2(c, sar_w_min, sar_w_max, "%s (%g) is above %s (%g)", S_PATH(sar_w_min),
                      o->sar_w_min, S_PATH(sar_w_max), o->sar_w_max);
    if (o->loss == RL_FLOW_LOSS_SAR && o->sar_energy == 1 && o->sar_t_min <= 0)
        return S_ERR2(c, sar_t_min, sar_energy, "the sde energy (%s) divides by 2t: %s must be > 0, "
                      "got %g", S_PATH(sar_energy), S_PATH(sar_t_min), o->sar_t_min);
    /* Evaluation rounds sample the ODE. Training rounds sample the flow SDE
     * at rollout.noise_level; GRPO/PPO score its log-probs, so they need a
     * level > 0. FlowSAR and FlowIPO read no log-probs: at 0 their training
     * rounds sample the ODE from each row's initial noise (seed 001 §2.5:
     * exploration from the initial noise alone). */
    o->train_ode = !(rf->noise_level > 0);
    if (o->train_ode && o->loss >= RL_FLOW_LOSS_GRPO)
        return RL_CFG_ERROR2(c, &rl_rollout_flow_section, rl_rollout_flow_config, noise_level,
                             &rl_flow_rl_section, rl_flow_rl_config, loss_type_name, RL_ECONFIG,
                             "%s (%s %s) scores the flow SDE's log-probs: %s must be > 0 (0, the "
                             "ODE, is for flow_sar and flow_ipo)",
                             o->loss == RL_FLOW_LOSS_GRPO ? "flow-SDE GRPO" : "flow-SDE PPO",
                             S_PATH(loss_type_name), o->loss_type_name,
                             RL_CFG_PATH(&rl_rollout_flow_section, rl_rollout_flow_config, noise_level));
    return RL_OK;
}

#define RL_CFG_DEFINE rl_flow_rl_section, rl_flow_rl_config, "common/schema/flow_rl.def", s_check, \
    "algorithm (embodied)", "The embodied flow-policy RL methods: FlowSAR, FlowIPO, flow-SDE GRPO and PPO (workers/flow_rl.h).", \
    "the driver (libero_rl); the actor ranks (update_flow); the rollout ranks (EMA reference, flow_annotate)"
#include "common/schema/section.inc"
