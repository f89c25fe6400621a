/* actor_diffusion.c — the actor's flow and diffusion section
 * (common/schema/actor_diffusion.h). */
#include "common/schema/actor_diffusion.h"

#define RL_CFG_DEFINE rl_actor_diffusion_section, rl_actor_diffusion_config, "common/schema/actor_diffusion.def", NULL, \
    "actor (flow and diffusion)", "The clipped per-timestep GRPO loss and the flow-matching step of a flow or diffusion policy.", \
    "the actor ranks; the diffusion recipe (timestep_fraction)"
#include "common/schema/section.inc"
