/* driver/recipes/lm/rlvr_async.h — one-step-off (and k-step-off) asynchronous
 * generation for the rlvr recipe (verl's one_step_off_policy, RLinf's
 * pipelining): while the actor trains step k, the rollout ranks already
 * generate the first rounds of steps k+1 .. k+S with the weights they hold.
 *
 * Rounds: with online filtering a step may take several rounds of
 * generation (each `train_batch_size` fresh prompts; rlvr_gen.c). The recipe
 * sends the first R rounds of each later step ahead (trainer.async_rounds;
 * 0 = as many as the step just done needed), so filtering's extra rounds
 * overlap with training too. A step that needs fewer than were sent drops
 * the rest (counted in async/unused_rounds, as DAPO drops the groups past
 * the batch); one that needs more generates them when it needs them.
 *
 * trainer.staleness S in [0, 8]: 0 is the synchronous loop (nothing here
 * runs). With S > 0 the rollout's calls queue in order, so the round of step
 * s issued during step s−1 runs before that step's weight sync: it samples
 * with the weights the actor had before its update, and a sample reaches the
 * actor at most S versions old. Every row carries its weight version (the
 * rollout's RL_ROLLOUT_ROW_VERSION column); the recipe checks the bound.
 * With rollout.partial_rollouts a row's tokens may come from several
 * versions (RL_LM_TOKEN_VERSION; the row column is the oldest):
 * docs/decisions/partial-rollouts.md.
 *
 * A prefetched round is either in flight (a future) or finished (sampled,
 * decoded and scored). Checkpoints keep the finished rounds (in flight ones
 * are finished first) in the trainer state as packed DataProtos in base64,
 * so a resumed run trains on exactly the batches an uninterrupted one would.
 *
 * Ownership: rl_rlvr_async owns its batches and futures; close frees them.
 */
#ifndef RLRT_DRIVER_RLVR_ASYNC_H
#define RLRT_DRIVER_RLVR_ASYNC_H

#include <jansson.h>
#include <stdint.h>

#include "common/schema/rlvr.h" /* RL_RLVR_MAX_STALENESS, RL_RLVR_MAX_ASYNC_ROUNDS */
#include "driver/recipes/lm/lm_common.h"

#define RL_RLVR_ASYNC_QUEUE (RL_RLVR_MAX_STALENESS * RL_RLVR_MAX_ASYNC_ROUNDS)

typedef struct rl_rlvr_prefetch {
    int64_t step;      /* the training step this round belongs to */
    int64_t round;     /* its round within that step, 0 .. */
    rl_dataproto *dp;  /* prompts (+ samples and scores once finished) */
    rl_future *f;      /* in flight, or NULL once finished */
    double gen_s, reward_s;
} rl_rlvr_prefetch;

typedef struct rl_rlvr_async {
    int64_t staleness;
    rl_rlvr_prefetch q[RL_RLVR_ASYNC_QUEUE]; /* in the order sent */
    int n;
} rl_rlvr_async;

/* Adds round `round` of `step` (dp stolen, f stolen: in flight). */
int rl_rlvr_async_push(rl_rlvr_async *a, int64_t step, int64_t round, rl_dataproto *dp,
                       rl_future *f);
/* 1 when round `round` of `step` is queued. */
int rl_rlvr_async_has(const rl_rlvr_async *a, int64_t step, int64_t round);
/* Removes round `round` of `step` and finishes it if needed: *out (the
 * caller's), with the wait for generation and the reward time. RL_ENOTFOUND
 * if absent. */
int rl_rlvr_async_take(rl_rlvr_async *a, rl_lm_job *j, int64_t step, int64_t round,
                       rl_dataproto **out, double *gen_s, double *reward_s);
/* Drops every round queued for steps <= `step` (rounds a step did not
 * need); one in flight is abandoned without a wait (the runtime drops its
 * reply when it comes). Returns how many it dropped. */
int rl_rlvr_async_drop_through(rl_rlvr_async *a, int64_t step);
/* Finishes every round in flight, then {"<step>.<round>": "<base64 packed
 * DataProto>"} (a new object) for the checkpoint. */
int rl_rlvr_async_save(rl_rlvr_async *a, rl_lm_job *j, json_t **out);
/* What a checkpoint's rounds must be to be trained on after a resume at
 * step `start`, with the weights of version `version` published for step
 * start + 1 (version + (s − start − 1) for step s). */
typedef struct rl_rlvr_async_expect {
    int64_t start;
    int64_t rows;            /* data.train_batch_size × rollout.n */
    int64_t response_length; /* rollout.response_length: the responses' width */
    int64_t version;
} rl_rlvr_async_expect;

/* The rounds saved by rl_rlvr_async_save (finished); a key "<step>" (the
 * checkpoints of before async_rounds) is round 0 of that step. `saved` is
 * untrusted (a checkpoint file): keys must be "<step>.<round>" in decimal
 * digits with start < step <= start + RL_RLVR_MAX_STALENESS and round <
 * RL_RLVR_MAX_ASYNC_ROUNDS, each value a packed DataProto in base64 with the
 * rollout's int64 weight-version column, every version in [1, version] (and
 * with RL_LM_TOKEN_VERSION, partial rollouts: beside the responses and
 * their lengths, every token's in [its row's, version]); else RL_EPROTO
 * naming the entry. A round that is sound but does not fit this
 * job — a step past start + a->staleness (trainer.staleness lowered), rows
 * or response width other than expected, or a sample older than the
 * staleness bound allows at its step — is dropped (counted in *dropped): its
 * step generates it again, from the same prompts. */
int rl_rlvr_async_restore(rl_rlvr_async *a, const json_t *saved, const rl_rlvr_async_expect *expect,
                          int *dropped);
void rl_rlvr_async_close(rl_rlvr_async *a);

#endif
