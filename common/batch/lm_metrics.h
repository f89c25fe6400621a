/* common/batch/lm_metrics.h — the metrics of a scored language-model round
 * (what the policy sampled, before filtering). Shapes and names:
 * common/batch/lm_batch.h.
 *
 *   critic/score/{mean,max,min}, critic/accuracy/mean, critic/format/mean
 *   response_length/mean    every sampled token, in the loss or not
 *   actor/entropy           mean rollout entropy over the loss positions
 *   batch/solve_all, batch/solve_none   shares of prompt groups with every
 *                           sample correct / none (no signal for a group
 *                           baseline; verl's DAPO metrics)
 * and with multi-turn tool counts (L->tool_stats):
 *   tools/{turns_mean, calls_mean, used_frac}   per sample
 *   tools/<outcome>_frac, tools/bad_call_frac   shares of the calls
 *   tools/{truncated_frac, max_turns_frac}      shares of the samples
 * Reads only; the metrics go to ms. */
#ifndef RLRT_BATCH_LM_METRICS_H
#define RLRT_BATCH_LM_METRICS_H

#include "common/batch/lm_batch.h"
#include "common/metrics/metrics.h"
#include "rlrt/dataproto.h"

int rl_lm_batch_metrics(const rl_dataproto *dp, const rl_lm_names *L, rl_metric_set *ms);
/* The tools/... metrics alone (nothing when the batch has no tool counts). */
int rl_lm_tool_metrics(const rl_dataproto *dp, const rl_lm_names *L, rl_metric_set *ms);

#endif
