/* common/schema/reward.h — the reward role's section for verifiable
 * rewards of language-model responses (common/reward/reward.h). The
 * verifier a default data source names is checked by the reward library
 * (rl_reward_config_from_job, common/reward/reward_config.h). */
#ifndef RLRT_SCHEMA_REWARD_H
#define RLRT_SCHEMA_REWARD_H

#include <stddef.h>

#include "rlrt/config.h"

typedef struct rl_reward_role_config {
#define X RL_CFG_FIELD
#include "common/schema/reward.def"
#undef X
} rl_reward_role_config;

extern const rl_config_section rl_reward_section;

#endif
