/* common/algo/flow/embodied.h — pure pieces of the embodied RL recipe libero_rl
 * (its batch transforms: common/batch/episodes.h): turning the
 * env's per-action arrays into the step-major per-chunk arrays the credit
 * functions of common/algo/flow/flow.h read, and GRPO's group advantages with
 * RLinf's reward filter.
 *
 * Errors: 0 or a negative rl_status with the message set.
 * Layout: S chunk steps (policy calls) × B episodes, step-major
 * x[s * B + b]; C actions per chunk. Callers own every buffer. */
#ifndef RLRT_ALGO_EMBODIED_H
#define RLRT_ALGO_EMBODIED_H

#include <stdint.h>

/* From the env arrays of B episodes of K = S·C actions, row-major (B, K):
 * rewards (f32) and valid (u8) →
 *   step_rewards (S, B, C) f32: rewards[b, s·C + c] (0 where not valid)
 *   chunk_rewards (S, B) f32: Σ_c of the above
 *   step_mask (S, B) f32: 1 where the chunk's first action was taken. */
void rl_embodied_chunk_arrays(const float *rewards, const uint8_t *valid, int64_t B, int64_t S, int64_t C,
                         float *step_rewards, float *chunk_rewards, float *step_mask);

/* GRPO over episodes: per group g (group[b] in [0, n_groups)), A_b = (R_b −
 * mean_g) / (std_g + 1e-6), std unbiased (a group of one: A = 0). With
 * `filter`, a group whose mean reward lies outside [lo, hi] (RLinf's
 * filter_rewards: all-success or all-failure groups) gets A = 0 and does not
 * count in *kept. adv (B) out; *kept may be NULL. Returns 0, or RL_ERANGE
 * for a group id out of range. */
int rl_embodied_grpo_advantages(const float *R, const int64_t *group, int64_t B, int64_t n_groups, int filter,
                           double lo, double hi, float *adv, int64_t *kept);

/* verl's loss_agg_mode seq-mean-token-mean over episodes, for a loss that
 * is a mean over n rows (chunk steps): row k belongs to episode episode[k]
 * in [0, B), and its advantage adv[k] (n) is scaled in place by
 * (n / E) / L_e, with L_e the rows of its episode and E the episodes that
 * have rows. The mean over the n rows then equals the mean over episodes of
 * each episode's own mean: a failed episode that ran to the time limit
 * weighs as much as a success that ended early, not ~2x more. Scaling the
 * advantage is exact for the clipped ratio loss (min(r·wA, clip(r)·wA) =
 * w·min(r·A, clip(r)·A) for w > 0). Returns 0, or RL_ERANGE for an episode
 * id out of range (adv untouched). */
int rl_embodied_seq_mean_scale(const int64_t *episode, int64_t n, int64_t B, float *adv);

#endif
