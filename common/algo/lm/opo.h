/* common/algo/lm/opo.h — OPO's advantage (On-Policy RL with Optimal reward
 * baseline, arXiv 2505.23585; verl compute_opo_outcome_advantage): an
 * outcome estimator whose group baseline weights each response's score by
 * its length, the variance-minimising baseline when the gradient's norm
 * grows with the number of tokens.
 *
 * Shapes: token_rewards, mask, adv (B, T) f32 row-major; group (B) i64 (the
 * prompt group of each row, any values, rows of a group in any order).
 * Invariants: s_b = Σ_t token_rewards[b, t] over all T; l_b = Σ_t mask[b, t];
 * per group G of two or more rows the baseline is Σ_G l·s / Σ_G l (0 when
 * every row of G is empty, whose advantages the mask zeroes anyway), a group
 * of one row has baseline 0; adv[b, t] = (s_b − baseline)·mask[b, t].
 * Ownership: the caller's arrays; nothing is kept. */
#ifndef RLRT_ALGO_LM_OPO_H
#define RLRT_ALGO_LM_OPO_H

#include <stdint.h>

/* RL_OK; RL_EINVAL (a NULL array), RL_ESHAPE (B or T negative, or B·T
 * overflowing), RL_ENUMERIC (a non-finite reward or mask value, named with
 * its row and position), RL_ENOMEM. */
int rl_adv_opo(const float *token_rewards, const float *mask, const int64_t *group, int64_t B,
               int64_t T, float *adv);

#endif
