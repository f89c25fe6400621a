/* sections.c — the table of every config section (common/schema/sections.h). */
#include "common/schema/sections.h"

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
