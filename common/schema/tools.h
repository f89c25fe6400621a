/* common/schema/tools.h — what the agent loop (common/tools/agent_loop.h)
 * takes from a job: rollout.multi_turn.*, read typed here. The keys are the
 * rollout role's (its section defines them, their defaults and docs); the
 * agent loop, the rlvr guidance check and the LM recipes' prepare read them
 * through rl_agent_config_read, so no multi-turn key is named outside
 * common/schema. When the rollout's section reads them typed, this becomes
 * a view of it. */
#ifndef RLRT_SCHEMA_TOOLS_H
#define RLRT_SCHEMA_TOOLS_H

#include <stdint.h>

#include "rlrt/config.h"

/* The largest tool output a job may allow (rollout.multi_turn.max_tool_output;
 * common/tools/tools.h RL_TOOL_MAX_OUTPUT is this). */
#define RL_AGENT_MAX_TOOL_OUTPUT 4096
#define RL_AGENT_MAX_TOOLS 16

typedef struct rl_agent_config {
    int enable;                  /* rollout.multi_turn.enable */
    int64_t max_turns;           /* [0, 64]: tool calls per sample at most */
    int64_t tool_timeout_ms;     /* [1, 600000] per call */
    int64_t max_tool_output;     /* [1, RL_AGENT_MAX_TOOL_OUTPUT] bytes */
    const rl_config_node *tools; /* 1..RL_AGENT_MAX_TOOLS built-in tool names (borrowed) */
    const char *enable_key;      /* the path of `enable`, for messages */
} rl_agent_config;

/* Reads and range-checks the keys (located errors; the list's length too).
 * The tools' names are the agent loop's to check (rl_tool_builtin). */
int rl_agent_config_read(const rl_config *c, rl_agent_config *out);

#endif
