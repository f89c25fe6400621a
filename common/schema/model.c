/* model.c — the keys every model section has (common/schema/model.h). */
#include "common/schema/model.h"

#define RL_CFG_STRUCT rl_model_base_config
static const rl_config_key s_keys[] = {
#define X RL_CFG_KEY
#include "common/schema/model_base.def"
#undef X
};
const rl_config_section rl_model_base_section =
    RL_CFG_SECTION("model", "The model kind and the weights it starts from.",
                   "the actor and rollout ranks (rl_model_build); the driver", s_keys, NULL);
#undef RL_CFG_STRUCT
