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
    "grpo|rloo|reinforce_plus_plus|reinforce_plus_plus_baseline|reinforce_pro_max|gae"

#define RL_ESTIMATOR_KEYS(X)                                                                        \
    X(ENUM, adv_estimator, "algorithm.adv_estimator", "grpo", 0, 0, 0, RL_ADV_ESTIMATOR_CHOICES,   \
      "the advantage estimator (common/batch/estimators.c: each says the tracks it serves)")

typedef struct rl_estimator_config {
    RL_ESTIMATOR_KEYS(RL_CFG_FIELD)
} rl_estimator_config;

extern const rl_config_section rl_estimator_section;

#define RL_GROUP_NORM_KEYS(X)                                                                       \
    X(BOOL, norm_adv_by_std_in_grpo, "algorithm.norm_adv_by_std_in_grpo", "true", 0, 0, 0, NULL,    \
      "group advantages are divided by the group's std (false: A = r - mean, Dr. GRPO)")

typedef struct rl_group_norm_config {
    RL_GROUP_NORM_KEYS(RL_CFG_FIELD)
} rl_group_norm_config;

extern const rl_config_section rl_group_norm_section;

#define RL_DISCOUNT_KEYS(X)                                                                         \
    X(NUM, gamma, "algorithm.gamma", "1.0", 0, 1, 0, NULL,                                          \
      "the discount: of REINFORCE++ over tokens (REINFORCE Pro Max uses 1), of GAE over chunk steps")

typedef struct rl_discount_config {
    RL_DISCOUNT_KEYS(RL_CFG_FIELD)
} rl_discount_config;

extern const rl_config_section rl_discount_section;

#define RL_BATCH_KEYS(X)                                                                            \
    X(INT, train_batch_size, "data.train_batch_size", "16", 1, 1 << 20, 0, NULL,                    \
      "prompts per training step (each a group of rollout.n samples in RL); images per "           \
      "pretraining step")

typedef struct rl_batch_config {
    RL_BATCH_KEYS(RL_CFG_FIELD)
} rl_batch_config;

extern const rl_config_section rl_batch_section;

#endif
