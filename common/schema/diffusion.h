/* common/schema/diffusion.h — the sections of the diffusion track's recipes
 * (seed 004, MMDanceGRPO; driver/recipes/diffusion/): the batch size all
 * three share, and the GRPO recipe's own data, rollout, algorithm and
 * algorithm.constraint keys; each recipe's changes to other sections'
 * defaults.
 *
 * Cross-key checks live in the sections' checks: the GRPO data section's
 * (actor.ppo_mini_batch_size divides data.train_batch_size; it fills the
 * optimiser steps a GRPO step makes), the GRPO rollout section's (the SDE
 * needs rollout.noise_level > 0) and the constraint's (init >= 0 or -1).
 * Those that need a role's key read the role's section. */
#ifndef RLRT_SCHEMA_DIFFUSION_H
#define RLRT_SCHEMA_DIFFUSION_H

#include <stddef.h>
#include <stdint.h>

#include "common/schema/algorithm.h"
#include "rlrt/config.h"

/* ---- all three recipes ------------------------------------------------------------------- */

/* ---- the GRPO recipe (diffusion) ------------------------------------------------------------ */

typedef struct rl_diffusion_data_config {
#define X RL_CFG_FIELD
#include "common/schema/diffusion_data.def"
#undef X
    /* derived: actor.ppo_mini_batch_size (prompts) and the optimiser steps of
     * a GRPO step, actor.ppo_epochs × train_batch_size / mini_batch */
    int64_t mini_batch, updates_per_step;
} rl_diffusion_data_config;

extern const rl_config_section rl_diffusion_data_section;

/* data.reward_image: what the reward scores of an SDE chain */
#define RL_REWARD_IMAGE_SAMPLE 0 /* the last latent */
#define RL_REWARD_IMAGE_MEAN 1   /* the last step's ODE mean (RL_CF_FINAL_MEAN) */

typedef struct rl_diffusion_rollout_config {
#define X RL_CFG_FIELD
#include "common/schema/diffusion_rollout.def"
#undef X
} rl_diffusion_rollout_config;

extern const rl_config_section rl_diffusion_rollout_section;

typedef struct rl_diffusion_algorithm_config {
#define X RL_CFG_FIELD
#include "common/schema/diffusion_algorithm.def"
#undef X
    /* the shared keys (common/schema/algorithm.h), copied by the check */
    int adv_estimator; /* rl_estimator_id */
    int norm_adv_by_std_in_grpo;
} rl_diffusion_algorithm_config;

extern const rl_config_section rl_diffusion_algorithm_section;

/* algorithm.constraint.reward: the term held at a floor (0: none) */
#define RL_CONSTRAINT_NONE 0
#define RL_CONSTRAINT_ON_PROMPT 1
#define RL_CONSTRAINT_PROMPT_MATCH 2

typedef struct rl_diffusion_constraint_config {
#define X RL_CFG_FIELD
#include "common/schema/diffusion_constraint.def"
#undef X
} rl_diffusion_constraint_config;

extern const rl_config_section rl_diffusion_constraint_section;

/* ---- the recipes' changes to other sections' defaults ---------------------------------------- */

extern const rl_config_default rl_diffusion_changes[];
extern const rl_config_default rl_scorer_train_changes[];
extern const rl_config_default rl_flow_pretrain_changes[];

#endif
