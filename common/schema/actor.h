/* common/schema/actor.h — the actor role's section: the optimiser, the PPO
 * loss settings, FSDP's communication timeout, the batch sizes of an
 * optimiser step (the recipes read actor.ppo_* too). Read once per tree
 * (rl_config_section_get) by the actor ranks at CONFIGURE and by the
 * driver before any process starts.
 *
 * The three ENUM keys carry their text beside the index (the derived
 * *_name fields, borrowed from the tree): the actor turns them into the
 * optimiser's, the loss's and the KL's own enums (rl_lr_kind_parse,
 * rl_loss_agg_parse, rl_kl_kind_parse accept every choice listed here). */
#ifndef RLRT_SCHEMA_ACTOR_H
#define RLRT_SCHEMA_ACTOR_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

typedef struct rl_actor_config {
#define X RL_CFG_FIELD
#include "common/schema/actor.def"
#undef X
    /* derived: the ENUM keys' text (borrowed from the tree) */
    const char *lr_schedule_name, *loss_agg_name, *kl_loss_type_name;
} rl_actor_config;

extern const rl_config_section rl_actor_section;

#endif
