/* trainer.c — the trainer sections (common/schema/trainer.h). */
#include "common/schema/trainer.h"

#define RL_CFG_DEFINE rl_trainer_section, rl_trainer_config, "common/schema/trainer.def", NULL, \
    "trainer", "What every job has.", "the driver"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_trainer_steps_section, rl_trainer_steps_config, "common/schema/trainer_steps.def", NULL, \
    "trainer (steps)", "The step count and validation cadence of a training recipe.", "the driver"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_trainer_ckpt_section, rl_trainer_ckpt_config, "common/schema/trainer_ckpt.def", NULL, \
    "trainer (checkpoints)", "Checkpoints of the recipes that save and resume (step_<N>/ under output_dir/checkpoints).", \
    "the driver; the actor ranks write and read the checkpoints"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_trainer_recovery_section, rl_trainer_recovery_config, "common/schema/trainer_recovery.def", NULL, \
    "trainer (recovery)", "Lost workers: the supervisor restarts them, the recipe restores its newest checkpoint of this run and replays the steps since.", \
    "the driver"
#include "common/schema/section.inc"
