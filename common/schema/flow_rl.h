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

#define RL_FLOW_RL_KEYS(X)                                                                          \
    X(STR, loss_type_name, "algorithm.loss_type", "flow_sar", 0, 0, RL_CFG_NONEMPTY, NULL,          \
      "the method: flow_sar | flow_ipo | actor (flow-SDE GRPO) | actor_critic (flow-SDE PPO)")     \
    X(NUM, sar_beta, "algorithm.flow_sar_beta", "1.0", 0, 100, RL_CFG_MIN_OPEN, NULL,                \
      "FlowSAR's mirror trust region")                                                              \
    X(NUM, sar_temperature, "algorithm.flow_sar_temperature", "0.5", 0, 1e6, RL_CFG_MIN_OPEN, NULL, \
      "FlowSAR's credit softmax temperature")                                                       \
    X(NUM, sar_tau_mid, "algorithm.flow_sar_tau_mid", "0.5", 0, 1, RL_CFG_MIN_OPEN, NULL,           \
      "FlowSAR's self-annotation time")                                                             \
    X(NUM, sar_ema_beta, "algorithm.flow_sar_ema_beta", "0.995", 0, 1, 0, NULL,                      \
      "the EMA reference's beta with flow_sar_ema_schedule fixed")                                  \
    X(ENUM, sar_schedule, "algorithm.flow_sar_ema_schedule", "linear", 0, 0, 0, "fixed|linear",     \
      "fixed beta, or linear (DiffusionNFT): min(eta_rate * i, eta_max) at EMA update i")           \
    X(NUM, sar_eta_rate, "algorithm.flow_sar_ema_eta_rate", "0.001", 0, 1, 0, NULL,                  \
      "the linear schedule's slope")                                                                \
    X(NUM, sar_eta_max, "algorithm.flow_sar_ema_eta_max", "0.5", 0, 1, 0, NULL,                      \
      "the linear schedule's cap")                                                                  \
    X(NUM, sar_t_min, "algorithm.flow_sar_t_min", "0.2", 0, 1, 0, NULL,                              \
      "FlowSAR's training times t ~ U[t_min, t_max]")                                               \
    X(NUM, sar_t_max, "algorithm.flow_sar_t_max", "0.8", 0, 1, 0, NULL, "(see flow_sar_t_min)")     \
    X(ENUM, sar_energy, "algorithm.flow_sar_energy_type", "mse", 0, 0, 0, "mse|sde",                 \
      "FlowSAR's energy: mse, or sde (divided by 2t)")                                              \
    X(ENUM, sar_variant, "algorithm.flow_sar_loss_variant", "softplus_kl", 0, 0, 0,                  \
      "mse_branch|softplus_kl", "FlowSAR's loss: softplus_kl (seed 000) or mse_branch")            \
    X(ENUM, sar_credit, "algorithm.flow_sar_credit", "softmax", 0, 0, 0, "softmax|success",          \
      "softmax (seed 000), or success: self-imitation on the successful episodes only")            \
    X(NUM, sar_kl_coeff, "algorithm.flow_sar_kl_coeff", "1.0", 0, 1e6, 0, NULL,                      \
      "FlowSAR's KL penalty weight")                                                                \
    X(NUM, sar_w_min, "algorithm.flow_sar_w_min", "0.0", 0, 1, 0, NULL,                              \
      "FlowSAR's credit weights clamped to [w_min, w_max]")                                         \
    X(NUM, sar_w_max, "algorithm.flow_sar_w_max", "1.0", 0, 1, 0, NULL, "(see flow_sar_w_min)")     \
    X(NUM, ipo_alpha, "algorithm.flow_ipo_alpha", "2.0", 0, 1e6, 0, NULL,                            \
      "FlowIPO's sigmoid weight sharpness")                                                         \
    X(NUM, ipo_beta_ref, "algorithm.flow_ipo_beta_ref", "0.995", 0, 1, 0, NULL,                      \
      "FlowIPO's EMA reference beta")                                                               \
    X(NUM, ipo_t_min, "algorithm.flow_ipo_t_min", "0.2", 0, 1, 0, NULL,                              \
      "FlowIPO's training times t ~ U[t_min, t_max]")                                               \
    X(NUM, ipo_t_max, "algorithm.flow_ipo_t_max", "0.8", 0, 1, 0, NULL, "(see flow_ipo_t_min)")     \
    X(NUM, gae_lambda, "algorithm.gae_lambda", "0.95", 0, 1, 0, NULL, "GAE's lambda")               \
    X(BOOL, normalize_adv, "algorithm.normalize_advantages", "true", 0, 0, 0, NULL,                 \
      "PPO: GAE advantages whitened over the step's chunk steps (RLinf)")                           \
    X(BOOL, filter_rewards, "algorithm.filter_rewards", "true", 0, 0, 0, NULL,                      \
      "GRPO: groups whose mean reward is outside the bounds get A = 0")                             \
    X(NUM, rewards_lower, "algorithm.rewards_lower_bound", "0.1", -1e30, 1e30, 0, NULL,              \
      "GRPO's reward filter: the lower bound")                                                      \
    X(NUM, rewards_upper, "algorithm.rewards_upper_bound", "0.9", -1e30, 1e30, 0, NULL,              \
      "GRPO's reward filter: the upper bound")                                                      \
    X(NUM, value_coef, "algorithm.value_loss_coef", "0.5", 0, 1e6, 0, NULL,                          \
      "PPO: the value head's loss weight")                                                          \
    X(NUM, value_clip, "algorithm.value_clip", "0.2", 0, 1e6, 0, NULL, "PPO: the value clip")       \
    X(NUM, demo_coef, "algorithm.demo_coef", "0.0", 0, 1e6, 0, NULL,                                 \
      "> 0: + demo_coef x flow matching on demonstrations (the anchor; needs algorithm.demos)")     \
    X(NUM, rl_coef, "algorithm.rl_coef", "1.0", 0, 1e6, 0, NULL,                                     \
      "the method's own loss x rl_coef (0 with demo_coef > 0: the anchor alone, a control)")       \
    X(STR, demos, "algorithm.demos", "''", 0, 0, 0, NULL,                                           \
      "the anchor's demonstrations: a libero_collect dataset (demos.safetensors)")                 \
    X(INT, demos_per_task, "algorithm.demos_per_task", "10", 1, 100000, 0, NULL,                    \
      "its first successful episodes per task")

typedef struct rl_flow_rl_config {
    RL_FLOW_RL_KEYS(RL_CFG_FIELD)
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
