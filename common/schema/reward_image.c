/* reward_image.c — the reward role's image-reward section
 * (common/schema/reward_image.h). */
#include "common/schema/reward_image.h"

#define RL_CFG_STRUCT rl_reward_image_config
static const rl_config_key s_keys[] = {
#define X RL_CFG_KEY
#include "common/schema/reward_image.def"
#undef X
};
const rl_config_section rl_reward_image_section =
    RL_CFG_SECTION("reward (image)", "Image rewards of the diffusion track and their scorers.",
                   "the reward ranks; the driver (checked before any worker starts)", s_keys, NULL);
#undef RL_CFG_STRUCT
