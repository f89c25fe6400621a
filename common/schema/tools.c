/* tools.c — the multi-turn keys as the agent loop takes them
 * (common/schema/tools.h). */
#include "common/schema/tools.h"

#include <stddef.h>
#include <string.h>

#include "rlrt/error.h"

#define S_ENABLE "rollout.multi_turn.enable"
#define S_TOOLS "rollout.multi_turn.tools"

int rl_agent_config_read(const rl_config *c, rl_agent_config *out)
{
#define S_INT(path, f, lo, hi) {path, RL_CFG_INT, offsetof(rl_agent_config, f), lo, hi, 0, NULL}
    static const rl_config_spec spec[] = {
        {S_ENABLE, RL_CFG_BOOL, offsetof(rl_agent_config, enable), 0, 0, 0, NULL},
        S_INT("rollout.multi_turn.max_turns", max_turns, 0, 64),
        S_INT("rollout.multi_turn.tool_timeout_ms", tool_timeout_ms, 1, 600000),
        S_INT("rollout.multi_turn.max_tool_output", max_tool_output, 1, RL_AGENT_MAX_TOOL_OUTPUT),
    };
#undef S_INT
    memset(out, 0, sizeof *out);
    out->enable_key = S_ENABLE;
    int rc = rl_config_read(c, spec, sizeof spec / sizeof spec[0], out);
    size_t n = 0;
    if (!rc && rl_config_list_len(c, S_TOOLS, &n))
        rc = rl_error_code();
    if (!rc && (n < 1 || n > RL_AGENT_MAX_TOOLS))
        rc = rl_config_error_at(c, S_TOOLS, RL_ECONFIG, "expected 1..%d tool names, got %zu",
                                RL_AGENT_MAX_TOOLS, n);
    if (!rc)
        out->tools = rl_config_node_at(rl_config_root(c), S_TOOLS);
    return rc;
}
