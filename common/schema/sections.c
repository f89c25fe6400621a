/* sections.c — the table of every config section (common/schema/sections.h). */
#include "common/schema/sections.h"

#include "common/schema/diffusion.h"
#include "common/schema/fmnist.h"
#include "common/schema/image_models.h"
#include "common/schema/actor.h"
#include "common/schema/algorithm.h"
#include "common/schema/actor_diffusion.h"
#include "common/schema/env.h"
#include "common/schema/flow_policy.h"
#include "common/schema/flow_rl.h"
#include "common/schema/libero.h"
#include "common/schema/model.h"
#include "common/schema/reward.h"
#include "common/schema/reward_image.h"
#include "common/schema/rollout.h"
#include "common/schema/selftest.h"
#include "common/schema/lm.h"
#include "common/schema/model.h"
#include "common/schema/rlvr.h"
#include "common/schema/sft.h"
#include "common/schema/trainer.h"

const rl_config_section *const rl_schema_sections[] = {
    &rl_trainer_section,
    &rl_trainer_steps_section,
    &rl_trainer_ckpt_section,
    &rl_trainer_recovery_section,
    &rl_model_base_section,
    &rl_estimator_section,
    &rl_group_norm_section,
    &rl_discount_section,
    &rl_batch_section,
    &rl_image_size_section,
    &rl_clip_flow_model_section,
    &rl_image_classifier_model_section,
    &rl_image_cnn_model_section,
    &rl_fmnist_data_section,
    &rl_diffusion_data_section,
    &rl_diffusion_rollout_section,
    &rl_diffusion_algorithm_section,
    &rl_diffusion_constraint_section,
    &rl_actor_section,
    &rl_actor_diffusion_section,
    &rl_rollout_section,
    &rl_rollout_tokens_section,
    &rl_rollout_flow_section,
    &rl_rollout_multi_turn_section,
    &rl_reward_section,
    &rl_reward_image_section,
    &rl_selftest_section,
    &rl_model_flow_policy_section,
    &rl_env_section,
    &rl_flow_rl_section,
    &rl_libero_eval_section,
    &rl_libero_gif_section,
    &rl_warmstart_section,
    &rl_collect_section,
    &rl_lm_model_section,
    &rl_lm_data_section,
    &rl_lm_trainer_section,
    &rl_sft_section,
    &rl_rlvr_section,
    &rl_rlvr_trainer_section,
    &rl_rlvr_aepo_section,
    &rl_rlvr_guidance_section,
    &rl_rlvr_replay_section,
    NULL,
};
