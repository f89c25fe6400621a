/* driver/recipes/estimators.h — the advantage estimators a recipe can name in
 * algorithm.adv_estimator, as a table: a new estimator is its math in
 * common/algo plus one row in estimators.c.
 *
 * Every estimator gets the same input (outcome rewards per row, an optional
 * per-token KL with its coefficient, the response mask and the prompt groups)
 * and writes advantages (B, R) and its own metrics. */
#ifndef RLRT_DRIVER_ESTIMATORS_H
#define RLRT_DRIVER_ESTIMATORS_H

#include <stdint.h>

#include "common/metrics/metrics.h"

typedef struct rl_adv_input {
    const float *scores;  /* (B) sequence rewards */
    const float *kl;      /* (B, R) per-token KL, or NULL */
    double kl_coef;       /* the reward-KL coefficient (<= 0: no KL in the reward) */
    const float *mask;    /* (B, R) response tokens */
    const int64_t *group; /* (B) prompt group of each row */
    int64_t B, R, n;      /* n: samples per prompt */
    double gamma;         /* discount (REINFORCE++) */
    int norm_by_std;      /* GRPO: divide by the group std */
    int uniform_scale;    /* REINFORCE Pro Max: r/n for all-equal groups */
} rl_adv_input;

typedef struct rl_estimator {
    const char *name;    /* algorithm.adv_estimator */
    int64_t min_samples; /* rollout.n it needs (group baselines need 2) */
    int (*run)(const rl_adv_input *in, float *adv, rl_metric_set *ms);
} rl_estimator;

/* The estimator called `name`, or NULL with RL_ENOTFOUND listing the known
 * ones. */
const rl_estimator *rl_estimator_find(const char *name);

#endif
