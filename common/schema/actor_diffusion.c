/* actor_diffusion.c — the actor's flow and diffusion section
 * (common/schema/actor_diffusion.h). */
#include "common/schema/actor_diffusion.h"

#define RL_CFG_STRUCT rl_actor_diffusion_config
static const rl_config_key s_keys[] = {
#define X RL_CFG_KEY
#include "common/schema/actor_diffusion.def"
#undef X
};
const rl_config_section rl_actor_diffusion_section =
    RL_CFG_SECTION("actor (flow and diffusion)",
                   "The clipped per-timestep GRPO loss and the flow-matching step of a flow or diffusion policy.",
                   "the actor ranks; the diffusion recipe (timestep_fraction)", s_keys, NULL);
#undef RL_CFG_STRUCT
