/* common/schema/reward_image.h — the reward role's section for image
 * rewards (the diffusion track, seed 004): which rewards and their weights,
 * the learned scorer and judge, a remote scorer (proto/scorer.proto). The
 * reward library parses reward.reward_model and checks what each reward
 * needs (rl_image_reward_weights_from_job, common/reward/reward_config.h).
 * Optional: the reward role serves compute_image_reward only in a job that
 * has it. */
#ifndef RLRT_SCHEMA_REWARD_IMAGE_H
#define RLRT_SCHEMA_REWARD_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

typedef struct rl_reward_image_config {
#define X RL_CFG_FIELD
#include "common/schema/reward_image.def"
#undef X
} rl_reward_image_config;

extern const rl_config_section rl_reward_image_section;

#endif
