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

#define RL_ACTOR_DIFFUSION_KEYS(X)                                                                  \
    X(NUM, clip_range, "actor.clip_range", "1.0e-4", 0, 10, 0, NULL,                                \
      "PPO ratio clip of the per-timestep loss")                                                    \
    X(NUM, adv_clip_max, "actor.ppo_adv_clip_max", "5.0", 0, 1e6, 0, NULL,                          \
      "advantages clamped to +-this")                                                               \
    X(NUM, max_grad_norm, "actor.ppo_max_grad_norm", "1.0", 0, 1e9, 0, NULL,                        \
      "gradient clipping of the diffusion and flow-matching steps (0: off)")                        \
    X(NUM, timestep_fraction, "actor.timestep_fraction", "1.0", 0, 1, RL_CFG_MIN_OPEN, NULL,        \
      "share of the sampling steps trained per sample")

typedef struct rl_actor_diffusion_config {
    RL_ACTOR_DIFFUSION_KEYS(RL_CFG_FIELD)
} rl_actor_diffusion_config;

extern const rl_config_section rl_actor_diffusion_section;

#endif
