/* reward.c — the reward role's verifiable-reward section (common/schema/reward.h). */
#include "common/schema/reward.h"

#define RL_CFG_STRUCT rl_reward_role_config
static const rl_config_key s_keys[] = {
#define X RL_CFG_KEY
#include "common/schema/reward.def"
#undef X
};
const rl_config_section rl_reward_section =
    RL_CFG_SECTION("reward", "Verifiable rewards of a language model's responses.",
                   "the reward ranks; the driver (checked before any worker starts)", s_keys, NULL);
#undef RL_CFG_STRUCT
