/* common/schema/actor_diffusion.h — the actor's section for the flow and
 * diffusion losses (seed 004's names): the clip of the per-timestep GRPO
 * loss, the advantage clamp, the gradient clip of those steps and of flow
 * matching, and the share of the sampling steps the diffusion recipe trains.
 * Optional: the actor serves its diffusion_grpo and flow_matching losses
 * only in a job that has it (rl_config_has_section). */
#ifndef RLRT_SCHEMA_ACTOR_DIFFUSION_H
#define RLRT_SCHEMA_ACTOR_DIFFUSION_H

#include <stddef.h>

#include "rlrt/config.h"

typedef struct rl_actor_diffusion_config {
#define X RL_CFG_FIELD
#include "common/schema/actor_diffusion.def"
#undef X
} rl_actor_diffusion_config;

extern const rl_config_section rl_actor_diffusion_section;

#endif
