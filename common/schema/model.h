/* common/schema/model.h — the keys every model section has, whatever its
 * kind: model.type picks the kind (common/nn/kinds.c) and model.init_from a
 * saved directory to start from. Each kind adds its own section of model.*
 * keys (rl_model_kind.sections); a recipe sets model.type's default to its
 * kind through its changes. */
#ifndef RLRT_SCHEMA_MODEL_H
#define RLRT_SCHEMA_MODEL_H

#include <stddef.h>

#include "rlrt/config.h"

#define RL_MODEL_BASE_KEYS(X)                                                                       \
    X(STR, type, "model.type", "lm", 0, 0, RL_CFG_NONEMPTY, NULL,                                   \
      "the model kind: lm, flow_policy, clip_flow, image_classifier")                              \
    X(STR, init_from, "model.init_from", "''", 0, 0, 0, NULL,                                       \
      "a directory with model.safetensors and config.json to start from ('': random init)")

typedef struct rl_model_base_config {
    RL_MODEL_BASE_KEYS(RL_CFG_FIELD)
} rl_model_base_config;

extern const rl_config_section rl_model_base_section;

#endif
