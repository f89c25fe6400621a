/* common/schema/reward.h — the reward role's section for verifiable
 * rewards of language-model responses (common/reward/reward.h). The
 * verifier a default data source names is checked by the reward library
 * (rl_reward_config_from_job, common/reward/reward_config.h). */
#ifndef RLRT_SCHEMA_REWARD_H
#define RLRT_SCHEMA_REWARD_H

#include <stddef.h>

#include "rlrt/config.h"

#define RL_REWARD_KEYS(X)                                                                           \
    X(NUM, format_weight, "reward.format_weight", "0.1", 0, 1, 0, NULL,                             \
      "score = (1 - w) x accuracy + w x format + extra")                                            \
    X(BOOL, last_number_fallback, "reward.last_number_fallback", "true", 0, 0, 0, NULL,             \
      "gsm8k: the last number of a response without '#### n' or \\\\boxed{}")                      \
    X(BOOL, math_last_number_fallback, "reward.math_last_number_fallback", "false", 0, 0, 0, NULL,  \
      "the same for the math verifiers")                                                            \
    X(STR, default_source, "reward.default_data_source", "~", 0, 0, 0, NULL,                   \
      "the verifier of a row whose data_source is unknown (~: such a row is an error)")

typedef struct rl_reward_role_config {
    RL_REWARD_KEYS(RL_CFG_FIELD)
} rl_reward_role_config;

extern const rl_config_section rl_reward_section;

#endif
