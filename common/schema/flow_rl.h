/* common/schema/flow_rl.h — the algorithm section of the embodied flow-policy
 * RL methods (seeds 000 FlowSAR and 001 FlowIPO, RLinf's flow-SDE GRPO and
 * PPO), which the libero_rl recipe, the rollout (EMA reference, annotation)
 * and the actor (update_flow) share; their contract is workers/flow_rl.h.
 *
 * Two keys switch the method: algorithm.loss_type (flow_sar | flow_ipo |
 * actor, flow-SDE GRPO | actor_critic, flow-SDE PPO with a value head) and
 * algorithm.adv_estimator, one of the estimator table's names
 * (common/batch/estimators.h) that the embodied track can use: actor needs
 * grpo, actor_critic gae, and the flow_* losses ignore it (their credit is
 * their own). The estimator is looked up where the table is
 * (rl_flow_rl_estimator, common/batch/flow_rl.h).
 *
 * The check reads two keys of the roles' sections: actor.loss_agg_mode
 * (token-mean, or seq-mean-token-mean for actor / actor_critic: every
 * episode weighs the same) and rollout.noise_level (GRPO and PPO score the
 * flow SDE's log-probs: > 0; at 0 FlowSAR's and FlowIPO's training rounds
 * sample the ODE). */
#ifndef RLRT_SCHEMA_FLOW_RL_H
#define RLRT_SCHEMA_FLOW_RL_H

#include <stddef.h>
#include <stdint.h>

#include "common/schema/algorithm.h"
#include "rlrt/config.h"

typedef enum rl_flow_loss_type {
    RL_FLOW_LOSS_SAR = 0,
    RL_FLOW_LOSS_IPO = 1,
    RL_FLOW_LOSS_GRPO = 2, /* loss_type actor, adv_estimator grpo */
    RL_FLOW_LOSS_PPO = 3   /* loss_type actor_critic, adv_estimator gae */
} rl_flow_loss_type;

typedef struct rl_flow_rl_config {
#define X RL_CFG_FIELD
#include "common/schema/flow_rl.def"
#undef X
    /* the shared keys (common/schema/algorithm.h), copied by the check:
     * adv (rl_estimator_id) grpo for loss_type actor, gae for actor_critic,
     * ignored by the flow_* losses; gamma GAE's discount over chunk steps */
    int adv;
    double gamma;
    /* derived (the check) */
    rl_flow_loss_type loss; /* algorithm.loss_type */
    int seq_mean;           /* actor.loss_agg_mode seq-mean-token-mean (else token-mean) */
    int train_ode;          /* rollout.noise_level 0: training rounds sample the ODE */
} rl_flow_rl_config;

extern const rl_config_section rl_flow_rl_section;

#endif
