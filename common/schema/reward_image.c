/* reward_image.c — the reward role's image-reward section
 * (common/schema/reward_image.h). */
#include "common/schema/reward_image.h"

#define RL_CFG_DEFINE rl_reward_image_section, rl_reward_image_config, "common/schema/reward_image.def", NULL, \
    "reward (image)", "Image rewards of the diffusion track and their scorers.", \
    "the reward ranks; the driver (checked before any worker starts)"
#include "common/schema/section.inc"
