/* flow_policy.c — the flow_policy kind's model section
 * (common/schema/flow_policy.h). */
#include "common/schema/flow_policy.h"

#include "rlrt/error.h"

static int s_check(const rl_config *c, void *out)
{
    const rl_model_flow_policy_config *o = out;
    if (o->time_embed_dim % 2)
        return RL_CFG_ERROR(c, &rl_model_flow_policy_section, rl_model_flow_policy_config, time_embed_dim,
                            RL_ECONFIG, "must be even (sin and cos halves), got %lld",
                            (long long)o->time_embed_dim);
    return RL_OK;
}

#define RL_CFG_DEFINE rl_model_flow_policy_section, rl_model_flow_policy_config, "common/schema/model_flow_policy.def", s_check, \
    "model (flow_policy)", "The flow_policy action model of the embodied track (observation encoder, task table, flow trunk, value head).", \
    "the actor and rollout ranks (rl_model_build); the driver (LIBERO recipes)"
#include "common/schema/section.inc"
