/* common/schema/rollout.h — the rollout role's sections. What every job
 * with a rollout has (rollout: the group size of a prompt, the weight
 * sync's timeout) and, by the model kind it samples, the token sampling of
 * a language model, the flow / diffusion SDE, and the LM's multi-turn tool
 * use. The rollout ranks read each section the job has at CONFIGURE
 * (rl_config_has_section); the actor reads rollout.temperature (its
 * log-probs are those of the sampling distribution). */
#ifndef RLRT_SCHEMA_ROLLOUT_H
#define RLRT_SCHEMA_ROLLOUT_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

#define RL_ROLLOUT_KEYS(X)                                                                          \
    X(INT, n, "rollout.n", "8", 1, 1 << 16, 0, NULL,                                                \
      "samples per prompt (the recipe repeats each prompt: a group)")                               \
    X(NUM, weight_timeout_s, "rollout.weight_timeout_s", "120.0", 0, 3600, RL_CFG_MIN_OPEN, NULL,   \
      "how long sync_weights waits for a weight version")

typedef struct rl_rollout_config {
    RL_ROLLOUT_KEYS(RL_CFG_FIELD)
} rl_rollout_config;

extern const rl_config_section rl_rollout_section;

#define RL_ROLLOUT_TOKENS_KEYS(X)                                                                   \
    X(NUM, temperature, "rollout.temperature", "1.0", 0, 100, RL_CFG_MIN_OPEN, NULL,                \
      "sampling temperature (the actor's log-probs are at it too)")                                 \
    X(NUM, top_p, "rollout.top_p", "1.0", 0, 1, RL_CFG_MIN_OPEN, NULL, "nucleus sampling's mass")   \
    X(INT, top_k, "rollout.top_k", "0", 0, 1 << 24, 0, NULL, "top-k sampling (0: off)")             \
    X(INT, response_length, "rollout.response_length", "48", 1, 1 << 20, 0, NULL,                   \
      "new tokens per sample")

typedef struct rl_rollout_tokens_config {
    RL_ROLLOUT_TOKENS_KEYS(RL_CFG_FIELD)
} rl_rollout_tokens_config;

extern const rl_config_section rl_rollout_tokens_section;

#define RL_ROLLOUT_FLOW_KEYS(X)                                                                     \
    X(INT, num_steps, "rollout.num_steps", "10", 1, 10000, 0, NULL,                                 \
      "integration steps of a sample")                                                              \
    X(NUM, noise_level, "rollout.noise_level", "0.7", 0, 10, 0, NULL,                               \
      "noise of the SDE that samples (0: the ODE)")                                                 \
    X(NUM, shift, "rollout.shift", "1.0", 0, 1000, RL_CFG_MIN_OPEN, NULL,                           \
      "sigma-schedule shift of a diffusion model (SD3's; 1: none)")

typedef struct rl_rollout_flow_config {
    RL_ROLLOUT_FLOW_KEYS(RL_CFG_FIELD)
} rl_rollout_flow_config;

extern const rl_config_section rl_rollout_flow_section;

/* The most bytes of output a tool may be allowed (common/tools/tools.h's
 * RL_TOOL_MAX_OUTPUT is this) and the most tools a job may list. */
#define RL_MULTI_TURN_MAX_TOOL_OUTPUT 4096
#define RL_MULTI_TURN_MAX_TOOLS 16

#define RL_ROLLOUT_MULTI_TURN_KEYS(X)                                                               \
    X(BOOL, enable, "rollout.multi_turn.enable", "false", 0, 0, 0, NULL,                            \
      "tool calls during sampling (common/tools/agent_loop.h); false: one turn")                    \
    X(INT, max_turns, "rollout.multi_turn.max_turns", "2", 0, 64, 0, NULL,                          \
      "tool calls per sample at most")                                                              \
    X(LIST, tools, "rollout.multi_turn.tools", "[calc]", 0, 0, 0, NULL,                             \
      "the built-in tools a sample may call (rl_tool_builtin)")                                     \
    X(INT, tool_timeout_ms, "rollout.multi_turn.tool_timeout_ms", "1000", 1, 600000, 0, NULL,       \
      "per call; a stuck tool gives 'error: timeout'")                                              \
    X(INT, max_tool_output, "rollout.multi_turn.max_tool_output", "64", 1,                          \
      RL_MULTI_TURN_MAX_TOOL_OUTPUT, 0, NULL,                                                       \
      "bytes of a tool's output; longer output is 'error: bad output'")

typedef struct rl_rollout_multi_turn_config {
    RL_ROLLOUT_MULTI_TURN_KEYS(RL_CFG_FIELD)
} rl_rollout_multi_turn_config;

extern const rl_config_section rl_rollout_multi_turn_section;

#endif
