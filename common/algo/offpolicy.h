/* common/algo/offpolicy.h — the DAPO toolbox pieces that are math (verl's
 * DAPO recipe) and the off-policy correction of stale or mismatched rollout
 * log-probs (verl's truncated importance sampling, TIS).
 *
 * Purpose:
 *  * rl_overlong_penalty: DAPO's soft overlong punishment (verl
 *    reward_model.overlong_buffer): with L_max the response budget and a
 *    buffer of `buffer_len` tokens at its end, a response of length ℓ gets
 *      penalty = min(−(ℓ − (L_max − buffer_len)) / buffer_len · factor, 0)
 *    i.e. 0 up to L_max − buffer_len, falling linearly to −factor at L_max.
 *  * rl_overlong_truncated: DAPO's overlong filtering: a row that used the
 *    whole budget without emitting its stop token was cut off; its tokens
 *    leave the loss (the caller zeroes the row in its loss mask).
 *  * rl_filter_groups_std (dynamic sampling, verl filter_groups): keep the
 *    groups whose metric has a non-zero standard deviation (some signal for
 *    a group baseline), or that hold one row.
 *  * rl_tis_weights: per token, w = min(exp(old_logp − rollout_logp), cap)
 *    with the log-ratio clamped to [−20, 20] (token level, truncate mode);
 *    masked positions get 0. The caller multiplies the per-token policy loss
 *    by w (detached). Because w > 0, multiplying the advantage by w is the
 *    same thing for PPO's clipped loss, its dual clip and its gradient:
 *    max(−Aw·r, −Aw·clip(r)) = w·max(−A·r, −A·clip(r)).
 *
 * Conventions (as every rlrt/algo header): f32 (B, T) row-major arrays, f32 0/1 masks,
 * int64 group ids, sums in double in row order. Ownership: the caller owns
 * every array; nothing is retained. NaN/Inf at a valid position →
 * RL_ENUMERIC naming the array and [b, t].
 */
#ifndef RLRT_ALGO_OFFPOLICY_H
#define RLRT_ALGO_OFFPOLICY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* lens (B) response lengths in [0, max_len]; out (B) penalties (<= 0).
 * Needs 0 < buffer_len <= max_len and factor >= 0 (RL_EINVAL otherwise). */
int rl_overlong_penalty(const int32_t *lens, int64_t B, int64_t max_len, int64_t buffer_len,
                        double factor, float *out);

/* tokens (B, R), lens (B): out (B) = 1 where lens[b] == R and the last token
 * is not one of stop[0..n_stop), else 0. *n_truncated (may be NULL) counts them. */
int rl_overlong_truncated(const int32_t *tokens, const int32_t *lens, int64_t B, int64_t R,
                          const int32_t *stop, int n_stop, uint8_t *out, int64_t *n_truncated);

/* keep (B): 1 for the rows of groups whose metric has std > 0 (population
 * std over the group, in double) or that hold a single row. *kept_groups and
 * *groups (may be NULL) count groups. */
int rl_filter_groups_std(const float *metric, const int64_t *group, int64_t B, uint8_t *keep,
                         int64_t *kept_groups, int64_t *groups);

typedef struct rl_tis_stats {
    double mean;          /* mean of the capped weight over valid tokens */
    double raw_mean;      /* mean of exp(old − rollout) before the cap */
    double raw_max;       /* its maximum */
    double capped_frac;   /* share of valid tokens whose ratio exceeded the cap */
    double mismatch_kl;   /* mean of rollout_logp − old_logp (KL(rollout‖old) estimate) */
    double n_tokens;      /* valid tokens */
} rl_tis_stats;

/* old_logp, rollout_logp, mask (B, T); cap > 0; weights (B, T) out; stats
 * may be NULL. */
int rl_tis_weights(const float *old_logp, const float *rollout_logp, const float *mask,
                   int64_t B, int64_t T, double cap, float *weights, rl_tis_stats *stats);

#ifdef __cplusplus
}
#endif
#endif
