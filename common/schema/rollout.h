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

typedef struct rl_rollout_config {
#define X RL_CFG_FIELD
#include "common/schema/rollout.def"
#undef X
} rl_rollout_config;

extern const rl_config_section rl_rollout_section;

typedef struct rl_rollout_tokens_config {
#define X RL_CFG_FIELD
#include "common/schema/rollout_tokens.def"
#undef X
} rl_rollout_tokens_config;

extern const rl_config_section rl_rollout_tokens_section;

typedef struct rl_rollout_flow_config {
#define X RL_CFG_FIELD
#include "common/schema/rollout_flow.def"
#undef X
} rl_rollout_flow_config;

extern const rl_config_section rl_rollout_flow_section;

/* The most bytes of output a tool may be allowed (common/tools/tools.h's
 * RL_TOOL_MAX_OUTPUT is this) and the most tools a job may list. */
#define RL_MULTI_TURN_MAX_TOOL_OUTPUT 4096
#define RL_MULTI_TURN_MAX_TOOLS 16

typedef struct rl_rollout_multi_turn_config {
#define X RL_CFG_FIELD
#include "common/schema/rollout_multi_turn.def"
#undef X
} rl_rollout_multi_turn_config;

extern const rl_config_section rl_rollout_multi_turn_section;

#endif
