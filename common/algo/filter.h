/* common/algo/filter.h — online filtering of prompt groups (DAPO / EasyR1).
 *
 * Purpose: after a rollout, keep only the groups (rows sharing a prompt id)
 * whose mean of some per-row metric (usually the accuracy reward) lies
 * strictly inside (low, high), so that all-correct and all-wrong groups,
 * which carry no GRPO signal, are dropped; the caller then generates again
 * until the batch is full (at most max_try_make_batch rounds; that loop
 * belongs to the trainer, not here).
 *
 * Ownership: the caller owns every array. The group mean is accumulated in
 * row order, in double.
 */
#ifndef RLRT_ALGO_FILTER_H
#define RLRT_ALGO_FILTER_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_FILTER_DEFAULT_LOW 0.01
#define RL_FILTER_DEFAULT_HIGH 0.99
#define RL_FILTER_DEFAULT_MAX_TRY 20

typedef struct rl_filter_result {
    int64_t n_groups;
    int64_t n_groups_kept;
    int64_t n_rows_kept;
} rl_filter_result;

/* metric (B), group (B) int64 ids. keep (B) or NULL: 1 for rows of kept
 * groups, else 0. kept_rows (B) or NULL: indices of kept rows in increasing
 * order (n_rows_kept of them are written). res or NULL.
 * RL_ENUMERIC names the first row with a NaN/Inf metric; RL_EINVAL if
 * low >= high or an argument is NULL. */
int rl_filter_groups(const float *metric, const int64_t *group, int64_t B,
                     double low, double high, uint8_t *keep,
                     int64_t *kept_rows, rl_filter_result *res);

#ifdef __cplusplus
}
#endif
#endif
