/* common/batch/estimators.h — every advantage estimator a job can name in
 * algorithm.adv_estimator, in one table: a new estimator is its math in
 * common/algo plus one row in estimators.c, which says the tracks that can
 * use it. Each track looks names up here (rl_estimator_find), so a name a
 * track cannot use is one located error, whatever the track.
 *
 * The language-model track's estimators share one input (outcome rewards per
 * row, an optional per-token KL with its coefficient, the response mask and
 * the prompt groups) and write advantages (B, R) and their own metrics
 * (`run`); the embodied and diffusion tracks dispatch on `id` to their own
 * credit assignment (common/algo/flow, common/algo/diffusion). */
#ifndef RLRT_BATCH_ESTIMATORS_H
#define RLRT_BATCH_ESTIMATORS_H

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

/* The tracks (a bit each). */
#define RL_TRACK_LM 1u        /* language models: token-level advantages */
#define RL_TRACK_EMBODIED 2u  /* flow policies in an env: chunk steps of episodes */
#define RL_TRACK_DIFFUSION 4u /* image/clip generators: one advantage per sample */

typedef enum rl_estimator_id {
    RL_EST_GRPO = 0,
    RL_EST_RLOO,
    RL_EST_REINFORCE_PP,
    RL_EST_REINFORCE_PP_BASELINE,
    RL_EST_REINFORCE_PRO_MAX,
    RL_EST_GAE,
    RL_EST_OPO,
    RL_EST_COUNT
} rl_estimator_id;

typedef struct rl_estimator {
    const char *name;    /* algorithm.adv_estimator */
    rl_estimator_id id;
    unsigned tracks;     /* RL_TRACK_* that can use it */
    int64_t min_samples; /* samples per group it needs (group baselines need 2) */
    /* the language-model track's computation (NULL when it has none) */
    int (*run)(const rl_adv_input *in, float *adv, rl_metric_set *ms);
} rl_estimator;

/* The estimators, in table order; "grpo|rloo|..." for a schema's choices. */
extern const rl_estimator rl_estimators[RL_EST_COUNT];
const char *rl_estimator_names(void);
/* "language model", "embodied", "diffusion" */
const char *rl_track_name(unsigned track);

/* The estimator called `name` that `track` can use, or NULL with
 * RL_ENOTFOUND "unknown estimator 'x' (known: ...)" or RL_ECONFIG
 * "estimator 'gae' is not available to the language model track (it has:
 * ...)". */
const rl_estimator *rl_estimator_find(const char *name, unsigned track);

#endif
