/* common/batch/lm_shape.h — what a language-model step does to each scored
 * round of samples before it joins the batch (the rlvr recipe's gen
 * phase): DAPO's overlong shaping, online filtering of prompt groups, and
 * the batch of whole groups that the rounds fill.
 *
 * Rows come in prompt groups (L->group, contiguous in a round: n rows of one
 * prompt). Shapes and names: common/batch/lm_batch.h.
 *
 * Metrics (when ms is not NULL):
 *   batch/overlong_penalty_mean  mean soft punishment added to the score
 *   batch/truncated_frac         share of rows cut off at the budget
 * Ownership: the DataProtos passed by pointer are replaced (the old one
 * freed) or extended in place; stolen arguments say so. */
#ifndef RLRT_BATCH_LM_SHAPE_H
#define RLRT_BATCH_LM_SHAPE_H

#include <stdint.h>

#include "common/batch/lm_batch.h"
#include "common/metrics/metrics.h"
#include "rlrt/dataproto.h"

/* DAPO's overlong shaping (common/algo/offpolicy.h). */
typedef struct rl_lm_overlong {
    int filter;       /* truncated rows (no stop token at the budget) leave the loss */
    int buffer;       /* the soft punishment over the last buffer_len tokens */
    int64_t buffer_len;
    double factor;    /* the punishment at the full budget */
    int32_t eos;      /* the stop token (< 0: none) */
} rl_lm_overlong;

/* Adds the punishment to L->score (with o->buffer); with o->filter zeroes
 * the truncated rows of L->loss_mask (made from the lengths when absent),
 * after keeping the positions the policy sampled as L->sampled_mask. Does
 * nothing when both are off. */
int rl_lm_overlong_shape(rl_dataproto *dp, const rl_lm_names *L, const rl_lm_overlong *o,
                         rl_metric_set *ms);

/* Adds L->loss_mask (B, R) to a batch without one: 0 from each token
 * `begin` through the next token `end` (both included), 1 elsewhere — the
 * output of a tool, <result>…</result>, in a worked solution is the tool's
 * text, not the model's. */
int rl_lm_mask_spans(rl_dataproto *dp, const rl_lm_names *L, int32_t begin, int32_t end);

/* Online filtering of prompt groups by a reward output. */
typedef struct rl_lm_filter {
    const char *key;  /* f32 (B) tensor the filter reads (e.g. "accuracy") */
    const char *what; /* how errors about the key name it (the config key that chose it) */
    int std_mode;     /* 1: DAPO's dynamic sampling, groups whose key varies;
                       * 0: groups whose mean key lies in (low, high) */
    double low, high;
    int64_t n;        /* rows per group */
} rl_lm_filter;

/* Keeps the accepted groups of *dp in order (*dp replaced); *kept_groups
 * counts them; *rejected (may be NULL; replaced) receives the other rows,
 * in order. A batch without the key is an error wrapped in f->what. */
int rl_lm_filter_groups(rl_dataproto **dp, const rl_lm_names *L, const rl_lm_filter *f,
                        int64_t *kept_groups, rl_dataproto **rejected);

/* The batch of a step, filled round by round with whole groups of n rows
 * up to `want` groups; the groups filtering rejected are kept aside, in
 * order, so that a step out of tries can complete its batch with them. */
typedef struct rl_lm_group_batch {
    rl_dataproto *batch;  /* the groups kept so far (NULL: none) */
    rl_dataproto *spare;  /* the rejected groups (NULL: none) */
    int64_t groups, want, n;
} rl_lm_group_batch;

/* Appends the first groups of `part` (stolen; `groups` of them) up to the
 * batch's `want`, and `rejected` (stolen, may be NULL) to the spare rows. */
int rl_lm_group_batch_add(rl_lm_group_batch *g, rl_dataproto *part, int64_t groups,
                          rl_dataproto *rejected);
/* Completes the batch from the spare rows when they hold enough: *filled
 * receives the groups added (0: not enough spare rows; nothing changes). */
int rl_lm_group_batch_fill(rl_lm_group_batch *g, int64_t *filled);
/* Frees the spare rows; the batch stays the caller's (g->batch). */
void rl_lm_group_batch_drop_spare(rl_lm_group_batch *g);

#endif
