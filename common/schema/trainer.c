/* trainer.c — the trainer sections (common/schema/trainer.h). */
#include "common/schema/trainer.h"

#define RL_CFG_STRUCT rl_trainer_config
static const rl_config_key s_trainer[] = {
#define X RL_CFG_KEY
#include "common/schema/trainer.def"
#undef X
};
const rl_config_section rl_trainer_section =
    RL_CFG_SECTION("trainer", "What every job has.", "the driver", s_trainer, NULL);
#undef RL_CFG_STRUCT

#define RL_CFG_STRUCT rl_trainer_steps_config
static const rl_config_key s_steps[] = {
#define X RL_CFG_KEY
#include "common/schema/trainer_steps.def"
#undef X
};
const rl_config_section rl_trainer_steps_section =
    RL_CFG_SECTION("trainer (steps)", "The step count and validation cadence of a training recipe.",
                   "the driver", s_steps, NULL);
#undef RL_CFG_STRUCT

#define RL_CFG_STRUCT rl_trainer_ckpt_config
static const rl_config_key s_ckpt[] = {
#define X RL_CFG_KEY
#include "common/schema/trainer_ckpt.def"
#undef X
};
const rl_config_section rl_trainer_ckpt_section =
    RL_CFG_SECTION("trainer (checkpoints)",
                   "Checkpoints of the recipes that save and resume (step_<N>/ under "
                   "output_dir/checkpoints).",
                   "the driver; the actor ranks write and read the checkpoints", s_ckpt, NULL);
#undef RL_CFG_STRUCT

#define RL_CFG_STRUCT rl_trainer_recovery_config
static const rl_config_key s_recovery[] = {
#define X RL_CFG_KEY
#include "common/schema/trainer_recovery.def"
#undef X
};
const rl_config_section rl_trainer_recovery_section =
    RL_CFG_SECTION("trainer (recovery)",
                   "Lost workers: the supervisor restarts them, the recipe restores its newest "
                   "checkpoint of this run and replays the steps since.",
                   "the driver", s_recovery, NULL);
#undef RL_CFG_STRUCT
