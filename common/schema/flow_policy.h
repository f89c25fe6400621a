/* common/schema/flow_policy.h — the model section of the flow_policy kind
 * (common/nn/models/flow_policy.h): the architecture of the embodied track's
 * action model. Its keys join the base section (model.type, model.init_from:
 * common/schema/model.h) in rl_model_kind_flow_policy.sections. */
#ifndef RLRT_SCHEMA_FLOW_POLICY_H
#define RLRT_SCHEMA_FLOW_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

typedef struct rl_model_flow_policy_config {
#define X RL_CFG_FIELD
#include "common/schema/model_flow_policy.def"
#undef X
} rl_model_flow_policy_config;

extern const rl_config_section rl_model_flow_policy_section;

#endif
