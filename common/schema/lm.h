/* common/schema/lm.h — the sections of the language-model track that are
 * not a role's: the model kind lm's keys (model.*, besides model.type and
 * model.init_from of common/schema/model.h), the task's data (data.*) and
 * the validation dumps (trainer.validation_data_dir). The sft and rlvr
 * recipes name them (driver/recipes/lm/); the model kind reads its section
 * when it builds a model (common/nn/models/lm/lm_model.c), the agent loop
 * data.tokenizer (common/tools/agent_loop.c).
 *
 * Derived fields (filled by the checks): the data section's levels as ints.
 */
#ifndef RLRT_SCHEMA_LM_H
#define RLRT_SCHEMA_LM_H

#include <stddef.h>
#include <stdint.h>

#include "common/schema/algorithm.h"
#include "rlrt/config.h"

/* ---- model.* of the lm kind --------------------------------------------------------------
 * vocab_size, eos_token_id and pad_token_id are set from data.tokenizer by
 * the LM recipes before any worker starts (their prepare); 0 / -1 are their
 * "not set" values. The network's own checks (head size, divisibility)
 * come when the kind builds it (rl_lm_config_validate). */

typedef struct rl_lm_model_config {
#define X RL_CFG_FIELD
#include "common/schema/lm_model.def"
#undef X
} rl_lm_model_config;

extern const rl_config_section rl_lm_model_section;

/* ---- data.* of the LM recipes ----------------------------------------------------------------- */

/* data.levels: 1..RL_LM_MAX_LEVELS levels, each in [RL_LM_LEVEL_MIN,
 * RL_LM_LEVEL_MAX] (the built-in task's, common/data/data.h RL_ARITH_*_LEVEL;
 * driver/recipes/lm/lm_common.c asserts they agree). */
#define RL_LM_MAX_LEVELS 8
#define RL_LM_LEVEL_MIN 1
#define RL_LM_LEVEL_MAX 9

typedef struct rl_lm_data_config {
#define X RL_CFG_FIELD
#include "common/schema/lm_data.def"
#undef X
    int64_t train_batch_size; /* data.train_batch_size (common/schema/algorithm.h), copied by the check */
    int level[RL_LM_MAX_LEVELS]; /* data.levels, n_levels of them */
    int n_levels;
} rl_lm_data_config;

extern const rl_config_section rl_lm_data_section;

/* ---- trainer.* of the LM recipes ---------------------------------------------------------------- */

typedef struct rl_lm_trainer_config {
#define X RL_CFG_FIELD
#include "common/schema/lm_trainer.def"
#undef X
} rl_lm_trainer_config;

extern const rl_config_section rl_lm_trainer_section;

#endif
