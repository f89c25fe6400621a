/* sft.c — the sft recipe's section and changes (common/schema/sft.h). */
#include "common/schema/sft.h"

#include "common/schema/trainer.h"
#include "rlrt/error.h"

/* Stopping at an accuracy needs validations to see it. */
static int s_check(const rl_config *c, void *out)
{
    const rl_sft_config *s = out;
    const rl_trainer_steps_config *steps = rl_config_section_get(c, &rl_trainer_steps_section);
    if (!steps)
        return rl_error_code();
    if (s->stop_at_val_accuracy > 0 && steps->val_every <= 0)
        return RL_CFG_ERROR2(c, &rl_sft_section, rl_sft_config, stop_at_val_accuracy,
                             &rl_trainer_steps_section, rl_trainer_steps_config, val_every,
                             RL_ECONFIG, "%s %g needs validation: %s must be > 0",
                             RL_CFG_PATH(&rl_sft_section, rl_sft_config, stop_at_val_accuracy),
                             s->stop_at_val_accuracy,
                             RL_CFG_PATH(&rl_trainer_steps_section, rl_trainer_steps_config,
                                         val_every));
    return RL_OK;
}

#define RL_CFG_DEFINE rl_sft_section, rl_sft_config, "common/schema/sft.def", s_check, \
    "trainer (sft)", "When the supervised warm start may end early.", "the driver"
#include "common/schema/section.inc"

const rl_config_default rl_sft_changes[] = {
    {"trainer.total_steps", "300"},
    {"trainer.val_every", "50"},
    {"actor.optim.lr", "0.001"},
    {NULL, NULL},
};
