/* driver/recipes/lm/rlvr_gen.h — the gen phase of the rlvr recipe: a step's
 * batch of data.train_batch_size prompt groups of rollout.n samples,
 * generated and scored in rounds.
 *
 * A round: train_batch_size prompts (queued hard prompts first in a step's
 * first round, rlvr_replay.h), each repeated rollout.n times (the group is
 * the prompt's global id) with a seed per row, a function of (seed, step,
 * round, row); sampled by the rollout ranks and scored by the reward
 * ranks; then DAPO's overlong shaping (common/batch/lm_shape.h), the batch
 * metrics of the first round (common/batch/lm_metrics.h), replay's look at
 * the policy's own accuracy, off-policy guidance of all-wrong groups
 * (rlvr_guidance.h), and with algorithm.online_filtering the groups the
 * filter accepts. Rounds follow until the batch is full, at most
 * algorithm.max_try_make_batch: then an error, or with
 * algorithm.filter_exhausted fill, the batch completed with filtered-out
 * groups.
 *
 * With trainer.staleness S > 0 (rlvr_async.h) the first rounds of the next
 * S steps are sent ahead once this step's rounds are back, a step takes its
 * rounds from that queue, and every row's weight version is checked to be
 * at most S versions behind the actor's. With rollout.partial_rollouts a
 * row's tokens may come from several versions (RL_LM_TOKEN_VERSION, the row
 * column is the oldest): every token is checked against the bound, and
 * async/token_staleness_{mean,max}, async/partial_rows and
 * async/tokens_lag_<k> (tokens sampled k versions behind the actor, k <= S)
 * say how stale the step's tokens were (docs/decisions/partial-rollouts.md).
 * A round without per-token versions (multi-turn rows, a checkpoint of a
 * run without partial rollouts) gets its row's version for each token.
 *
 * Metrics: batch/{filter_rounds, filter_filled_groups, guided_rows, ...},
 * async/..., replay/..., timing_s/gen, timing_s/reward, and those of the
 * transforms. Checkpoints carry the weight version (so versions, and the
 * staleness of the rounds sent ahead, continue exactly after a resume), the
 * queue of rounds sent ahead and the replay queue (rl_rlvr_gen_save /
 * _restore).
 *
 * Ownership: the queues are the struct's own (rl_rlvr_gen_close); the job
 * and its config sections are borrowed.
 */
#ifndef RLRT_DRIVER_RLVR_GEN_H
#define RLRT_DRIVER_RLVR_GEN_H

#include <jansson.h>
#include <stdint.h>

#include "common/batch/lm_shape.h"
#include "common/schema/rlvr.h"
#include "driver/recipes/lm/lm_common.h"
#include "driver/recipes/lm/rlvr_async.h"
#include "driver/recipes/lm/rlvr_replay.h"

typedef struct rl_rlvr_gen {
    rl_lm_job *j;
    uint64_t seed;                          /* trainer.seed */
    const rl_rlvr_config *algo;             /* filtering */
    const rl_rlvr_trainer_config *tc;       /* staleness, async_rounds */
    const rl_rlvr_guidance_config *guide;
    rl_lm_overlong overlong;
    rl_lm_filter filter;
    rl_rlvr_async async;                    /* rounds sent ahead for later steps */
    rl_rlvr_replay replay;                  /* hard prompts queued for later steps */
    int partial;                            /* rollout.partial_rollouts */
} rl_rlvr_gen;

int rl_rlvr_gen_open(rl_rlvr_gen *g, rl_lm_job *j, const rl_config *job, uint64_t seed);
void rl_rlvr_gen_close(rl_rlvr_gen *g);
/* The batch of step `step` into *batch (new), its metrics into ms. */
int rl_rlvr_gen_step(rl_rlvr_gen *g, int64_t step, rl_dataproto **batch, rl_metric_set *ms);
/* One round of `prompts` prompts of (step, round), sampled and scored
 * (*gen_s, *reward_s: the waits), no shaping: the AEPO bootstrap's. */
int rl_rlvr_gen_round(rl_rlvr_gen *g, int64_t step, int64_t round, int64_t prompts,
                      rl_dataproto **out, double *gen_s, double *reward_s);
/* Adds the weight version and the queues to a checkpoint's `extra` object. */
int rl_rlvr_gen_save(rl_rlvr_gen *g, json_t *extra);
/* The weight version (into the job's sync: its next publication is the
 * saved one) and the queues of the checkpoint of step `start` (its
 * `extra`, may be NULL). */
int rl_rlvr_gen_restore(rl_rlvr_gen *g, const json_t *extra, int64_t start);

#endif
