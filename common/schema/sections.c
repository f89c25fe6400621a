/* sections.c — the table of every config section (common/schema/sections.h). */
#include "common/schema/sections.h"

#include "common/schema/env.h"
#include "common/schema/flow_policy.h"
#include "common/schema/flow_rl.h"
#include "common/schema/libero.h"
#include "common/schema/model.h"
#include "common/schema/trainer.h"

const rl_config_section *const rl_schema_sections[] = {
    &rl_trainer_section,
    &rl_trainer_steps_section,
    &rl_trainer_ckpt_section,
    &rl_trainer_recovery_section,
    &rl_model_base_section,
    &rl_model_flow_policy_section,
    &rl_env_section,
    &rl_flow_rl_section,
    &rl_libero_eval_section,
    &rl_libero_gif_section,
    &rl_warmstart_section,
    &rl_collect_section,
    NULL,
};
