/* actor.c — the actor role's section (common/schema/actor.h). */
#include "common/schema/actor.h"

#include "rlrt/error.h"

#define S_PATH(field) RL_CFG_PATH(&rl_actor_section, rl_actor_config, field)

static int s_check(const rl_config *c, void *out)
{
    rl_actor_config *o = out;
    int rc;
    if ((rc = rl_config_get_string(c, S_PATH(lr_schedule), &o->lr_schedule_name)) ||
        (rc = rl_config_get_string(c, S_PATH(loss_agg), &o->loss_agg_name)) ||
        (rc = rl_config_get_string(c, S_PATH(kl_loss_type), &o->kl_loss_type_name)))
        return rc;
    if (o->value_lr > 0 && !(o->lr > 0))
        return RL_CFG_ERROR2(c, &rl_actor_section, rl_actor_config, value_lr, &rl_actor_section,
                             rl_actor_config, lr, RL_ECONFIG,
                             "the value head's lr (%s %g) follows the policy's lr schedule as a "
                             "multiple of %s, which is 0: set %s > 0", S_PATH(value_lr), o->value_lr,
                             S_PATH(lr), S_PATH(lr));
    /* -1: the recipe sets its run's steps before the workers start (the actor checks) */
    if (o->lr_schedule != 0 /* constant */ && o->total_training_steps < 1 && o->total_training_steps != -1)
        return RL_CFG_ERROR2(c, &rl_actor_section, rl_actor_config, total_training_steps,
                             &rl_actor_section, rl_actor_config, lr_schedule, RL_ECONFIG,
                             "%s '%s' needs the number of optimiser steps, got %s %lld",
                             S_PATH(lr_schedule), o->lr_schedule_name, S_PATH(total_training_steps),
                             (long long)o->total_training_steps);
    return RL_OK;
}

#define RL_CFG_DEFINE rl_actor_section, rl_actor_config, "common/schema/actor.def", s_check, \
    "actor", "The trainable policy: AdamW, the PPO loss, FSDP, the batch sizes of an optimiser step.", \
    "the actor ranks; the driver (batch sizes, epochs, the KL loss)"
#include "common/schema/section.inc"
