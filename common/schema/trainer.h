/* common/schema/trainer.h — the trainer sections: what every job has
 * (trainer.recipe, seed, output_dir), and the steps, checkpoints and
 * recovery of the recipes that have them (rl_trainer,
 * driver/recipes/phases.h). */
#ifndef RLRT_SCHEMA_TRAINER_H
#define RLRT_SCHEMA_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

typedef struct rl_trainer_config {
#define X RL_CFG_FIELD
#include "common/schema/trainer.def"
#undef X
} rl_trainer_config;

extern const rl_config_section rl_trainer_section;

typedef struct rl_trainer_steps_config {
#define X RL_CFG_FIELD
#include "common/schema/trainer_steps.def"
#undef X
} rl_trainer_steps_config;

extern const rl_config_section rl_trainer_steps_section;

typedef struct rl_trainer_ckpt_config {
#define X RL_CFG_FIELD
#include "common/schema/trainer_ckpt.def"
#undef X
} rl_trainer_ckpt_config;

extern const rl_config_section rl_trainer_ckpt_section;

typedef struct rl_trainer_recovery_config {
#define X RL_CFG_FIELD
#include "common/schema/trainer_recovery.def"
#undef X
} rl_trainer_recovery_config;

extern const rl_config_section rl_trainer_recovery_section;

#endif
