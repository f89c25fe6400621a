/* common/reward/reward_config.h — the reward role's config sections
 * (common/schema/reward.h, reward_image.h) checked against what this
 * library knows: which verifier a default data source names, which image
 * rewards reward.reward_model combines and what each needs (the scorer's
 * directory, the remote endpoint). The reward role calls these at
 * CONFIGURE; a recipe calls them before any worker starts, so a bad value
 * is one located error there.
 *
 * Ownership: nothing is allocated; strings in *out are borrowed from the
 * job tree. */
#ifndef RLRT_REWARD_REWARD_CONFIG_H
#define RLRT_REWARD_REWARD_CONFIG_H

#include "common/reward/image_reward.h"
#include "common/reward/reward.h"
#include "rlrt/config.h"

/* The job's reward section as the scoring settings of rl_reward_score;
 * an unknown reward.default_data_source is a located RL_ECONFIG. */
int rl_reward_config_from_job(const rl_config *job, rl_reward_config *out);

/* The weights of the job's reward.reward_model (rl_image_reward_parse);
 * prompt_match and on_prompt need reward.scorer_path, remote an endpoint:
 * located RL_ECONFIG otherwise. */
int rl_image_reward_weights_from_job(const rl_config *job, double weight[RL_IMG_REWARD_COUNT]);

#endif
