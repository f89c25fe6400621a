/* common/schema/estimators.h — the choices of algorithm.adv_estimator, for
 * every track's section that has the key: the names of the estimator
 * table (common/batch/estimators.c), in its order, so the choice's index is
 * the estimator's rl_estimator_id. tests/unit/test_algo_lm_batch.c checks
 * that they are rl_estimator_names(). A track that cannot use a name says
 * so through rl_estimator_find (a located error). */
#ifndef RLRT_SCHEMA_ESTIMATORS_H
#define RLRT_SCHEMA_ESTIMATORS_H

#define RL_ADV_ESTIMATOR_CHOICES \
    "grpo|rloo|reinforce_plus_plus|reinforce_plus_plus_baseline|reinforce_pro_max|gae"

#endif
