/* sections.c — the table of every config section (common/schema/sections.h). */
#include "common/schema/sections.h"

#include "common/schema/model.h"
#include "common/schema/trainer.h"

const rl_config_section *const rl_schema_sections[] = {
    &rl_trainer_section,
    &rl_trainer_steps_section,
    &rl_trainer_ckpt_section,
    &rl_trainer_recovery_section,
    &rl_model_base_section,
    NULL,
};
