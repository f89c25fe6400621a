/* common/schema/trainer.h — the trainer sections: what every job has
 * (trainer.recipe, seed, output_dir), and the steps, checkpoints and
 * recovery of the recipes that have them (rl_trainer,
 * driver/recipes/phases.h). */
#ifndef RLRT_SCHEMA_TRAINER_H
#define RLRT_SCHEMA_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

#define RL_TRAINER_KEYS(X)                                                                          \
    X(STR, recipe, "trainer.recipe", "selftest", 0, 0, RL_CFG_NONEMPTY, NULL,                       \
      "the training loop: rl-driver --help lists the recipes")                                     \
    X(INT, seed, "trainer.seed", "1", 0, INT64_MAX, 0, NULL,                                       \
      "the job's seed: every random draw is a function of (seed, step, round, row)")                \
    X(STR, output_dir, "trainer.output_dir", "runs/default", 0, 0, RL_CFG_NONEMPTY, NULL,           \
      "metrics.jsonl, TensorBoard events, checkpoints/ and the recipe's files")

typedef struct rl_trainer_config {
    RL_TRAINER_KEYS(RL_CFG_FIELD)
} rl_trainer_config;

extern const rl_config_section rl_trainer_section;

#define RL_TRAINER_STEPS_KEYS(X)                                                                    \
    X(INT, total_steps, "trainer.total_steps", "100", 0, 1e9, 0, NULL, "training steps of the run") \
    X(INT, val_every, "trainer.val_every", "0", 0, 1e9, 0, NULL,                                    \
      "validate every this many steps, at step 0 and at the last step (0: never)")

typedef struct rl_trainer_steps_config {
    RL_TRAINER_STEPS_KEYS(RL_CFG_FIELD)
} rl_trainer_steps_config;

extern const rl_config_section rl_trainer_steps_section;

#define RL_TRAINER_CKPT_KEYS(X)                                                                     \
    X(INT, save_every, "trainer.save_every", "0", 0, 1e9, 0, NULL,                                  \
      "checkpoint every this many steps and at the last step (0: never)")                          \
    X(BOOL, resume, "trainer.resume", "false", 0, 0, 0, NULL,                                       \
      "start from the newest complete checkpoint in output_dir/checkpoints (rl-driver --resume)")

typedef struct rl_trainer_ckpt_config {
    RL_TRAINER_CKPT_KEYS(RL_CFG_FIELD)
} rl_trainer_ckpt_config;

extern const rl_config_section rl_trainer_ckpt_section;

#define RL_TRAINER_RECOVERY_KEYS(X)                                                                 \
    X(INT, max_recoveries, "trainer.max_recoveries", "3", 0, 1e6, 0, NULL,                          \
      "lost workers survived per job: restore the run's newest checkpoint and replay (0: fail)")

typedef struct rl_trainer_recovery_config {
    RL_TRAINER_RECOVERY_KEYS(RL_CFG_FIELD)
} rl_trainer_recovery_config;

extern const rl_config_section rl_trainer_recovery_section;

#endif
