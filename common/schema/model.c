/* model.c — the keys every model section has (common/schema/model.h). */
#include "common/schema/model.h"

#define RL_CFG_DEFINE rl_model_base_section, rl_model_base_config, "common/schema/model_base.def", NULL, \
    "model", "The model kind and the weights it starts from.", \
    "the actor and rollout ranks (rl_model_build); the driver"
#include "common/schema/section.inc"
