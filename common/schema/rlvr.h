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

#define RL_RLVR_KEYS(X)                                                                             \
    X(BOOL, uniform_scale, "algorithm.uniform_scale", "false", 0, 0, 0, NULL,                       \
      "REINFORCE Pro Max: r/n for groups whose rewards are all equal")                             \
    X(BOOL, use_kl_in_reward, "algorithm.use_kl_in_reward", "false", 0, 0, 0, NULL,                 \
      "subtract the coefficient times the per-token KL to the reference from the reward")          \
    X(STR, kl_penalty, "algorithm.kl_penalty", "kl", 0, 0, RL_CFG_NONEMPTY, NULL,                   \
      "the per-token KL estimator: kl/k1, abs, mse/k2, low_var_kl/k3")                             \
    X(ENUM, kl_ctrl_type, "algorithm.kl_ctrl.type", "fixed", 0, 0, 0, "fixed|adaptive",             \
      "the reward-KL coefficient: fixed, or adaptive towards target_kl (verl's controllers)")      \
    X(NUM, kl_coef, "algorithm.kl_ctrl.kl_coef", "0.001", 0, 1e6, 0, NULL,                          \
      "the reward-KL coefficient (the adaptive controller's start)")                               \
    X(NUM, target_kl, "algorithm.kl_ctrl.target_kl", "0.1", 0, 1e6, RL_CFG_MIN_OPEN, NULL,          \
      "the adaptive controller's target KL")                                                       \
    X(NUM, horizon, "algorithm.kl_ctrl.horizon", "10000.0", 0, 1e12, RL_CFG_MIN_OPEN, NULL,         \
      "the adaptive controller's horizon (samples)")                                               \
    X(BOOL, online_filtering, "algorithm.online_filtering", "false", 0, 0, 0, NULL,                 \
      "keep only the prompt groups filter_mode accepts; generate rounds until the batch is full")  \
    X(STR, filter_key, "algorithm.filter_key", "accuracy", 0, 0, RL_CFG_NONEMPTY, NULL,             \
      "the reward output the filter looks at (accuracy, score, format)")                           \
    X(NUM, filter_low, "algorithm.filter_low", "0.01", -1e9, 1e9, 0, NULL,                          \
      "range mode: a group's mean filter_key must be above this ...")                              \
    X(NUM, filter_high, "algorithm.filter_high", "0.99", -1e9, 1e9, 0, NULL,                        \
      "... and below this")                                                                        \
    X(INT, max_try_make_batch, "algorithm.max_try_make_batch", "20", 1, 1e6, 0, NULL,               \
      "rounds of generation a step may take to fill its batch")                                    \
    X(ENUM, filter_mode, "algorithm.filter_mode", "range", 0, 0, 0, "range|std",                    \
      "range: filter_key's group mean in (low, high) (EasyR1); std: DAPO's dynamic sampling, "     \
      "groups whose filter_key varies")                                                            \
    X(ENUM, filter_exhausted, "algorithm.filter_exhausted", "error", 0, 0, 0, "error|fill",         \
      "after max_try_make_batch rounds: an error (verl), or fill the batch with filtered-out "     \
      "groups (logged, batch/filter_filled_groups)")                                               \
    X(BOOL, overlong_filter, "algorithm.overlong_filter", "false", 0, 0, 0, NULL,                   \
      "DAPO: truncated responses (no stop token) leave the loss")                                  \
    X(BOOL, overlong_enable, "algorithm.overlong_buffer.enable", "false", 0, 0, 0, NULL,            \
      "DAPO's soft overlong punishment: 0 to -penalty_factor over the last len tokens")            \
    X(INT, overlong_len, "algorithm.overlong_buffer.len", "16", 1, 1 << 20, 0, NULL,                \
      "the punished tail of rollout.response_length (tokens)")                                     \
    X(NUM, overlong_factor, "algorithm.overlong_buffer.penalty_factor", "1.0", 0, 1e6, 0, NULL,     \
      "the punishment of a response that uses the whole length")                                   \
    X(NUM, tis_imp_ratio_cap, "algorithm.tis_imp_ratio_cap", "0.0", 0, 1e6, 0, NULL,                \
      "truncated importance sampling: advantage x min(exp(old - rollout log-prob), cap) per "      \
      "token; 0: off (verl's TIS)")

typedef struct rl_rlvr_config {
    RL_RLVR_KEYS(RL_CFG_FIELD)
    /* the shared keys (common/schema/algorithm.h), copied by the check */
    int adv_estimator; /* rl_estimator_id */
    int norm_adv_by_std_in_grpo;
    double gamma;
} rl_rlvr_config;

extern const rl_config_section rl_rlvr_section;

/* ---- trainer.* of rlvr -------------------------------------------------------------------------- */

#define RL_RLVR_TRAINER_KEYS(X)                                                                     \
    X(STR, rollout_data_dir, "trainer.rollout_data_dir", "''", 0, 0, 0, NULL,                       \
      "a directory: each step's training samples as <step>.jsonl, with shaped scores and "         \
      "advantages ('': off)")                                                                      \
    X(INT, staleness, "trainer.staleness", "0", 0, RL_RLVR_MAX_STALENESS, 0, NULL,                  \
      "one-step-off training: the rollout generates the next steps' samples while the actor "      \
      "trains, at most this many weight versions old (0: synchronous)")                            \
    X(INT, async_rounds, "trainer.async_rounds", "0", 0, RL_RLVR_MAX_ASYNC_ROUNDS, 0, NULL,         \
      "rounds of each later step sent ahead (online filtering may need several); 0: as many as "   \
      "the last step needed")

typedef struct rl_rlvr_trainer_config {
    RL_RLVR_TRAINER_KEYS(RL_CFG_FIELD)
} rl_rlvr_trainer_config;

extern const rl_config_section rl_rlvr_trainer_section;

/* ---- ARES/AEPO entropy shaping (driver/recipes/lm/rlvr_aepo.h) ------------------------------------ */

#define RL_RLVR_AEPO_KEYS(X)                                                                        \
    X(BOOL, enable, "algorithm.aepo.enable", "false", 0, 0, 0, NULL,                                \
      "ARES/AEPO entropy shaping (seed 002)")                                                      \
    X(NUM, percentile, "algorithm.aepo.percentile", "95.0", 0, 100, RL_CFG_MIN_OPEN, NULL,          \
      "the per-response percentile of window entropy")                                             \
    X(NUM, tau_decay, "algorithm.aepo.tau_decay", "0.99", 0, 1, RL_CFG_MAX_OPEN, NULL,              \
      "the EMA decay of the high-window-entropy threshold")                                        \
    X(BOOL, dynamic_kl, "algorithm.aepo.dynamic_kl", "true", 0, 0, 0, NULL,                         \
      "token-level KL weights (half at high-window-entropy tokens)")                               \
    X(INT, window_size, "rollout.window_size", "4", 1, 1 << 20, 0, NULL,                            \
      "AEPO's entropy window (tokens)")                                                            \
    X(BOOL, bootstrap, "data.bootstrap", "false", 0, 0, 0, NULL,                                    \
      "AEPO: a difficulty pass over bootstrap_size prompts before training")                       \
    X(INT, bootstrap_size, "data.bootstrap_size", "64", 1, 1 << 24, 0, NULL,                        \
      "prompts of the bootstrap pass")

typedef struct rl_rlvr_aepo_config {
    RL_RLVR_AEPO_KEYS(RL_CFG_FIELD)
} rl_rlvr_aepo_config;

extern const rl_config_section rl_rlvr_aepo_section;

/* ---- off-policy guidance (driver/recipes/lm/rlvr_guidance.h) ------------------------------------- */

#define RL_RLVR_GUIDANCE_KEYS(X)                                                                    \
    X(BOOL, enable, "algorithm.guidance.enable", "false", 0, 0, 0, NULL,                            \
      "off-policy guidance (LUFFY): a group with no correct sample gets the row's reference "      \
      "solution in place of its last `samples` samples")                                           \
    X(STR, field, "algorithm.guidance.field", "solution", 0, 0, 0, NULL,                            \
      "the JSONL field holding the reference solution")                                            \
    X(INT, samples, "algorithm.guidance.samples", "1", 1, 1 << 20, 0, NULL,                         \
      "samples replaced per all-wrong group (below rollout.n)")

typedef struct rl_rlvr_guidance_config {
    RL_RLVR_GUIDANCE_KEYS(RL_CFG_FIELD)
} rl_rlvr_guidance_config;

extern const rl_config_section rl_rlvr_guidance_section;

/* ---- hard-prompt replay (driver/recipes/lm/rlvr_replay.h) ------------------------------------------- */

#define RL_RLVR_REPLAY_KEYS(X)                                                                      \
    X(BOOL, enable, "algorithm.hard_replay.enable", "false", 0, 0, 0, NULL,                         \
      "a prompt whose group does badly returns in later steps' first rounds")                      \
    X(NUM, below, "algorithm.hard_replay.below", "0.5", 1, 0, 0, NULL,                              \
      "queue a group whose mean accuracy is below this, in (0, 1]")                                \
    X(INT, times, "algorithm.hard_replay.times", "4", 1, 1 << 20, 0, NULL,                          \
      "replays of one prompt at most (until the policy gets it right)")                            \
    X(INT, per_step, "algorithm.hard_replay.per_step", "4", 1, 0, 0, NULL,                          \
      "queued prompts a step takes, 1 to data.train_batch_size")                                   \
    X(INT, capacity, "algorithm.hard_replay.capacity", "256", 1, 1 << 24, 0, NULL,                  \
      "queue length; when full the oldest entry leaves")

typedef struct rl_rlvr_replay_config {
    RL_RLVR_REPLAY_KEYS(RL_CFG_FIELD)
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
