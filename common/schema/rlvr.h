/* common/schema/rlvr.h — the sections of the rlvr recipe
 * (driver/recipes/lm/rlvr.c): the algorithm (advantage estimator, the KL
 * to the reference, online filtering, DAPO's overlong shaping, TIS), its
 * trainer keys (sample dumps, one-step-off generation), and the parts that
 * are off by default: ARES/AEPO entropy shaping, off-policy guidance,
 * hard-prompt replay. Also the defaults the recipe changes (rl_rlvr_changes)
 * and the checks that need a value from elsewhere (rl_rlvr_check_sizes).
 *
 * Which track can use an estimator, and the KL estimator's names, are the
 * library's (common/batch/estimators.h, common/algo/kl.h): the recipe
 * checks those, located at these keys.
 */
#ifndef RLRT_SCHEMA_RLVR_H
#define RLRT_SCHEMA_RLVR_H

#include <stddef.h>
#include <stdint.h>

#include "common/schema/algorithm.h"
#include "rlrt/config.h"

#define RL_RLVR_MAX_STALENESS 8
#define RL_RLVR_MAX_ASYNC_ROUNDS 8 /* rounds sent ahead per step, at most */

/* ---- algorithm.* ------------------------------------------------------------------------------ */

typedef struct rl_rlvr_config {
#define X RL_CFG_FIELD
#include "common/schema/rlvr.def"
#undef X
    /* the shared keys (common/schema/algorithm.h), copied by the check */
    int adv_estimator; /* rl_estimator_id */
    int norm_adv_by_std_in_grpo;
    double gamma;
} rl_rlvr_config;

extern const rl_config_section rl_rlvr_section;

/* ---- trainer.* of rlvr -------------------------------------------------------------------------- */

typedef struct rl_rlvr_trainer_config {
#define X RL_CFG_FIELD
#include "common/schema/rlvr_trainer.def"
#undef X
} rl_rlvr_trainer_config;

extern const rl_config_section rl_rlvr_trainer_section;

/* ---- ARES/AEPO entropy shaping (driver/recipes/lm/rlvr_aepo.h) ------------------------------------ */

typedef struct rl_rlvr_aepo_config {
#define X RL_CFG_FIELD
#include "common/schema/rlvr_aepo.def"
#undef X
} rl_rlvr_aepo_config;

extern const rl_config_section rl_rlvr_aepo_section;

/* ---- off-policy guidance (driver/recipes/lm/rlvr_guidance.h) ------------------------------------- */

typedef struct rl_rlvr_guidance_config {
#define X RL_CFG_FIELD
#include "common/schema/rlvr_guidance.def"
#undef X
} rl_rlvr_guidance_config;

extern const rl_config_section rl_rlvr_guidance_section;

/* ---- hard-prompt replay (driver/recipes/lm/rlvr_replay.h) ------------------------------------------- */

typedef struct rl_rlvr_replay_config {
#define X RL_CFG_FIELD
#include "common/schema/rlvr_replay.def"
#undef X
} rl_rlvr_replay_config;

extern const rl_config_section rl_rlvr_replay_section;

/* ---- the recipe ------------------------------------------------------------------------------------ */

/* The defaults rlvr changes ({NULL, NULL}-terminated). */
extern const rl_config_default rl_rlvr_changes[];

/* The batch sizes against each other: actor.ppo_mini_batch_size divides
 * data.train_batch_size, rollout.n is at least the estimator's
 * `min_samples` (`estimator`: its name), and with `actor_ranks` > 0 a
 * mini-batch's rows are a multiple of the actor ranks. Located errors. */
int rl_rlvr_check_sizes(const rl_config *c, const char *estimator, int64_t min_samples,
                        int actor_ranks);

#endif
