/* common/schema/algorithm.h — the keys the tracks share, one section each so
 * that a key has one type, one bound and one meaning wherever it appears:
 *
 *   algorithm.adv_estimator           every training track (language model, embodied,
 *                                     diffusion): one of the estimator table's names
 *                                     (common/batch/estimators.c, in its order: the
 *                                     choice's index is its rl_estimator_id; a unit test
 *                                     keeps them equal); a track that cannot use a name
 *                                     says so through rl_estimator_find
 *   algorithm.norm_adv_by_std_in_grpo the group-normalising tracks (language model, diffusion)
 *   algorithm.gamma                   the discounting tracks (language model, embodied)
 *   data.train_batch_size             the batch of a step (language model, diffusion)
 *
 * A recipe changes their defaults through its changes table. */
#ifndef RLRT_SCHEMA_ALGORITHM_H
#define RLRT_SCHEMA_ALGORITHM_H

#include <stddef.h>
#include <stdint.h>

#include "rlrt/config.h"

#define RL_ADV_ESTIMATOR_CHOICES \
    "grpo|rloo|reinforce_plus_plus|reinforce_plus_plus_baseline|reinforce_pro_max|gae|opo"

typedef struct rl_estimator_config {
#define X RL_CFG_FIELD
#include "common/schema/estimator.def"
#undef X
} rl_estimator_config;

extern const rl_config_section rl_estimator_section;

typedef struct rl_group_norm_config {
#define X RL_CFG_FIELD
#include "common/schema/group_norm.def"
#undef X
} rl_group_norm_config;

extern const rl_config_section rl_group_norm_section;

typedef struct rl_discount_config {
#define X RL_CFG_FIELD
#include "common/schema/discount.def"
#undef X
} rl_discount_config;

extern const rl_config_section rl_discount_section;

typedef struct rl_batch_config {
#define X RL_CFG_FIELD
#include "common/schema/batch.def"
#undef X
} rl_batch_config;

extern const rl_config_section rl_batch_section;

#endif
