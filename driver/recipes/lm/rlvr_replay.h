/* driver/recipes/lm/rlvr_replay.h — hard-prompt replay for the rlvr recipe
 * (prioritised prompt sampling in the spirit of Kimi k1.5's curriculum,
 * which samples problems by their failure rate). A sub-skill the warm start
 * lacks can be rare in the training stream: the arithmetic task's "x1 − y0"
 * without a borrow is about 0.5% of prompts, the policy gets it right once in
 * eight samples, and one group a few steps apart does not undo the habit
 * (docs/decisions/hard-prompt-replay.md). With replay on, a prompt
 * whose group does badly comes back in later steps until the policy gets it
 * right or its replays are spent.
 *
 * Keys (algorithm.hard_replay.*, common/schema/rlvr.h):
 *   enable    false by default (then nothing here runs and batches are
 *             bit-identical to a job without the keys)
 *   below     a group whose mean reward accuracy over the policy's own
 *             samples (before guidance) is below this is queued, in (0, 1]
 *   times     replays of one prompt at most, >= 1
 *   per_step  prompts taken off the queue for the first round of a step
 *             (the rest of the round comes from the data iterator), in
 *             [1, data.train_batch_size]
 *   capacity  queue length, >= 1; when full the oldest entry leaves
 *             (counted in replay/dropped)
 * Every scored round of a step is looked at (dynamic sampling's rounds
 * too); only the first round takes from the queue. A replayed prompt keeps
 * its global id (its group and guidance work as for a fresh one) and
 * carries int64 column RL_LM_REPLAYED: 0 for a fresh prompt, k for its k-th
 * replay. The queue (global ids and replays done) travels with checkpoints,
 * so a resumed run draws the same batches.
 *
 * Metrics (per step): replay/prompts (replayed prompts in the first round),
 * replay/queued (groups queued), replay/solved (replayed groups at or above
 * `below`), replay/expired (replayed groups still below after `times`),
 * replay/dropped, replay/merged (queued prompts the iterator drew into the
 * same round: the fresh copy stands in for the replay, as a prompt is in a
 * round at most once), replay/queue (entries after the step). A queued
 * prompt that a later dynamic-sampling round of the same step draws fresh
 * would share its group id (the global id) with the replay; with a training
 * set much larger than the queue this needs the iterator to reach that
 * exact prompt in that step.
 *
 * Ownership: the queue is the struct's own (rl_rlvr_replay_close); the
 * dataset and iterator are borrowed. */
#ifndef RLRT_DRIVER_RLVR_REPLAY_H
#define RLRT_DRIVER_RLVR_REPLAY_H

#include <jansson.h>
#include <stdint.h>

#include "driver/recipes/lm/lm_common.h"

typedef struct rl_rlvr_replay {
    int enable;
    double below;
    int64_t times, per_step, capacity;
    const rl_dataset *train;
    int64_t *row, *done; /* ring of `capacity`: training row, replays done */
    int64_t head, len;
    int64_t n_prompts, n_queued, n_solved, n_expired, n_dropped, n_merged; /* this step */
} rl_rlvr_replay;

/* The keys, and the queue over `train` (borrowed) when enabled. */
int rl_rlvr_replay_open(rl_rlvr_replay *q, const rl_config *job, const rl_dataset *train);
void rl_rlvr_replay_close(rl_rlvr_replay *q);

/* The prompts of a round: with `queued` (a step's first round) up to
 * per_step queued prompts, oldest first, then fresh rows from `it` up to
 * `prompts`; every round gets column RL_LM_REPLAYED, so rounds concatenate.
 * Disabled: rl_data_iter_next (no column). *out is new. */
int rl_rlvr_replay_prompts(rl_rlvr_replay *q, rl_data_iter *it, int64_t prompts, int queued,
                           rl_dataproto **out);
/* Queues the groups of the scored round dp whose mean RL_REWARD_ACCURACY is
 * below `below` and counts the replays that came back (see above). */
int rl_rlvr_replay_observe(rl_rlvr_replay *q, const rl_dataproto *dp);
/* This step's metrics into ms, then the counts restart. */
void rl_rlvr_replay_metrics(rl_rlvr_replay *q, rl_metric_set *ms);

/* [[global_id, replays done], ...] oldest first (a new array). */
json_t *rl_rlvr_replay_save(const rl_rlvr_replay *q);
/* The queue of rl_rlvr_replay_save; entries whose replays are spent under
 * today's `times` are left out, the newest `capacity` kept. Errors name the
 * entry and the field. */
int rl_rlvr_replay_restore(rl_rlvr_replay *q, const json_t *saved);

#endif
