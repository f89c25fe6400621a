/* reward.c — the reward role's verifiable-reward section (common/schema/reward.h). */
#include "common/schema/reward.h"

#define RL_CFG_DEFINE rl_reward_section, rl_reward_role_config, "common/schema/reward.def", NULL, \
    "reward", "Verifiable rewards of a language model's responses.", \
    "the reward ranks; the driver (checked before any worker starts)"
#include "common/schema/section.inc"
