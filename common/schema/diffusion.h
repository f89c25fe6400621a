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

#define RL_DIFFUSION_DATA_KEYS(X)                                                                   \
    X(INT, val_per_prompt, "data.val_per_prompt", "8", 1, 4096, 0, NULL,                            \
      "validation: ODE samples per built-in prompt, with fixed noise")

typedef struct rl_diffusion_data_config {
    RL_DIFFUSION_DATA_KEYS(RL_CFG_FIELD)
    /* derived: actor.ppo_mini_batch_size (prompts) and the optimiser steps of
     * a GRPO step, actor.ppo_epochs × train_batch_size / mini_batch */
    int64_t mini_batch, updates_per_step;
} rl_diffusion_data_config;

extern const rl_config_section rl_diffusion_data_section;

#define RL_DIFFUSION_ROLLOUT_KEYS(X)                                                                \
    X(BOOL, init_same_noise, "rollout.init_same_noise", "true", 0, 0, 0, NULL,                      \
      "one initial noise per prompt group (false: one per sample)")                                 \
    X(BOOL, online_test, "rollout.online.test", "true", 0, 0, 0, NULL,                              \
      "the seed's online test: one ODE sample per prompt as output_dir/online/step_N.{png,gif}")    \
    X(INT, online_interval, "rollout.online.step.interval", "10", 1, 1000000000, 0, NULL,           \
      "the online test every this many steps (and at steps 0 and the last)")

typedef struct rl_diffusion_rollout_config {
    RL_DIFFUSION_ROLLOUT_KEYS(RL_CFG_FIELD)
} rl_diffusion_rollout_config;

extern const rl_config_section rl_diffusion_rollout_section;

#define RL_DIFFUSION_ALGORITHM_KEYS(X)                                                              \
    X(BOOL, use_group, "algorithm.use_group", "true", 0, 0, 0, NULL,                                \
      "normalise within each prompt group (false: one global z-score)")                             \
    X(NUM, reward_threshold, "algorithm.reward_threshold", "-1.0e30", -1e30, 1e30, 0, NULL,         \
      "a group whose mean reward is below it gets A = 0")

typedef struct rl_diffusion_algorithm_config {
    RL_DIFFUSION_ALGORITHM_KEYS(RL_CFG_FIELD)
    /* the shared keys (common/schema/algorithm.h), copied by the check */
    int adv_estimator; /* rl_estimator_id */
    int norm_adv_by_std_in_grpo;
} rl_diffusion_algorithm_config;

extern const rl_config_section rl_diffusion_algorithm_section;

/* algorithm.constraint.reward: the term held at a floor (0: none) */
#define RL_CONSTRAINT_NONE 0
#define RL_CONSTRAINT_ON_PROMPT 1
#define RL_CONSTRAINT_PROMPT_MATCH 2

#define RL_DIFFUSION_CONSTRAINT_KEYS(X)                                                             \
    X(ENUM, reward, "algorithm.constraint.reward", "none", 0, 0, 0, "none|on_prompt|prompt_match",  \
      "hold this scorer term (listed in reward.reward_model) at a floor: constrained RL")           \
    X(NUM, min, "algorithm.constraint.min", "0.9", 0, 1, 0, NULL,                                   \
      "the floor: the training batch's mean of that term")                                         \
    X(NUM, ki, "algorithm.constraint.ki", "1.0", 0, 1e6, 0, NULL,                                   \
      "after a step I += ki*(min - mean), in [0, lambda_max] (the dual step)")                      \
    X(NUM, kp, "algorithm.constraint.kp", "0.0", 0, 1e6, 0, NULL,                                   \
      "lambda = I + kp*(min - mean), in [0, lambda_max] (the PI form)")                             \
    X(NUM, init, "algorithm.constraint.init", "-1", -1, 1e6, 0, NULL,                               \
      "the starting lambda (>= 0); -1: the term's weight in reward.reward_model")                  \
    X(NUM, lambda_max, "algorithm.constraint.lambda_max", "100.0", 0, 1e6, 0, NULL,                 \
      "the multiplier's cap")

typedef struct rl_diffusion_constraint_config {
    RL_DIFFUSION_CONSTRAINT_KEYS(RL_CFG_FIELD)
} rl_diffusion_constraint_config;

extern const rl_config_section rl_diffusion_constraint_section;

/* ---- the recipes' changes to other sections' defaults ---------------------------------------- */

extern const rl_config_default rl_diffusion_changes[];
extern const rl_config_default rl_scorer_train_changes[];
extern const rl_config_default rl_flow_pretrain_changes[];
/* Their changes to the role keys, as YAML fragments merged over the roles'
 * legacy defaults until the role sections are in common/schema (then these
 * lines join the arrays above). */

#endif
