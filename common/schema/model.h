/* common/schema/model.h — the keys every model section has, whatever its
 * kind: model.type picks the kind (common/nn/kinds.c) and model.init_from a
 * saved directory to start from. Each kind adds its own section of model.*
 * keys (rl_model_kind.sections); a recipe sets model.type's default to its
 * kind through its changes. model.precision is a key of the kinds that
 * have bf16 (the lm's section; its index is device.h's rl_precision); a job
 * that sets it to anything but fp32 for another kind is refused naming the
 * kind (rl_model_kind.bf16, common/nn/kinds.c). */
#ifndef RLRT_SCHEMA_MODEL_H
#define RLRT_SCHEMA_MODEL_H

#include <stddef.h>

#include "rlrt/config.h"

typedef struct rl_model_base_config {
#define X RL_CFG_FIELD
#include "common/schema/model_base.def"
#undef X
} rl_model_base_config;

extern const rl_config_section rl_model_base_section;

#endif
