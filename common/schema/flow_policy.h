/* common/schema/flow_policy.h — the model section of the flow_policy kind
 * (common/nn/models/flow_policy.h): the architecture of the embodied track's
 * action model. Its keys join the base section (model.type, model.init_from:
 * common/schema/model.h) in rl_model_kind_flow_policy.sections. */
#ifndef RLRT_SCHEMA_FLOW_POLICY_H
#define RLRT_SCHEMA_FLOW_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

#define RL_MODEL_FLOW_POLICY_KEYS(X)                                                                \
    X(INT, num_action_chunks, "model.num_action_chunks", "10", 1, 1000, 0, NULL,                    \
      "C actions of 7 per policy call (env.num_action_chunks must match)")                          \
    X(INT, num_tasks, "model.num_tasks", "10", 1, 1 << 20, 0, NULL, "rows of the learned task table") \
    X(INT, hidden_size, "model.hidden_size", "256", 2, 1 << 14, 0, NULL, "width of the encoder and trunk") \
    X(INT, num_layers, "model.num_layers", "3", 0, 64, 0, NULL, "residual blocks of the trunk")     \
    X(INT, time_embed_dim, "model.time_embed_dim", "64", 2, 4096, 0, NULL,                          \
      "the flow time's sinusoidal embedding (even: sin and cos halves)")                            \
    X(ENUM, sde_mode, "model.sde_mode", "one", 0, 0, 0, "one|joint",                                \
      "one: one random SDE step per chain; joint: every step stochastic and in the log-prob")      \
    X(NUM, obs_clip, "model.obs_clip", "0.0", 0, 1e6, 0, NULL,                                      \
      "> 0: normalised observations clamped to [-obs_clip, obs_clip] (0: off)")                    \
    X(BOOL, detach_critic_input, "model.detach_critic_input", "true", 0, 0, 0, NULL,               \
      "the value loss trains value_head only, not the policy's encoder (RLinf)")

typedef struct rl_model_flow_policy_config {
    RL_MODEL_FLOW_POLICY_KEYS(RL_CFG_FIELD)
} rl_model_flow_policy_config;

extern const rl_config_section rl_model_flow_policy_section;

#endif
