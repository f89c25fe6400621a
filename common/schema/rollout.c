/* rollout.c — the rollout role's sections (common/schema/rollout.h). */
#include "common/schema/rollout.h"

#include "rlrt/error.h"

#define RL_CFG_DEFINE rl_rollout_section, rl_rollout_config, "common/schema/rollout.def", NULL, \
    "rollout", "What every job with a rollout has: its groups and the weight sync.", \
    "the rollout ranks (weight_timeout_s); the driver (n)"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_rollout_tokens_section, rl_rollout_tokens_config, "common/schema/rollout_tokens.def", NULL, \
    "rollout (token sampling)", "How a language model samples its responses.", \
    "the rollout ranks; the actor ranks (temperature); the driver (response_length)"
#include "common/schema/section.inc"

#define RL_CFG_DEFINE rl_rollout_flow_section, rl_rollout_flow_config, "common/schema/rollout_flow.def", NULL, \
    "rollout (flow and diffusion sampling)", "How a flow or diffusion model samples: the ODE, or the SDE of its noise level.", \
    "the rollout ranks; the driver"
#include "common/schema/section.inc"

/* 1..RL_MULTI_TURN_MAX_TOOLS tool names (the agent loop checks the names). */
static int s_multi_turn_check(const rl_config *c, void *out)
{
    const rl_rollout_multi_turn_config *o = out;
    size_t n = rl_config_node_len(o->tools);
    if (n < 1 || n > RL_MULTI_TURN_MAX_TOOLS)
        return RL_CFG_ERROR(c, &rl_rollout_multi_turn_section, rl_rollout_multi_turn_config, tools,
                            RL_ECONFIG, "expected 1..%d tool names, got %zu", RL_MULTI_TURN_MAX_TOOLS, n);
    return RL_OK;
}

#define RL_CFG_DEFINE rl_rollout_multi_turn_section, rl_rollout_multi_turn_config, "common/schema/rollout_multi_turn.def", s_multi_turn_check, \
    "rollout.multi_turn", "Tool use while a language model samples (needs a tokenizer with the tool markup, data.tokenizer: arith_ext).", \
    "the rollout ranks; the driver (the tools, checked before any worker starts)"
#include "common/schema/section.inc"
