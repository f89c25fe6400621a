/* common/batch/episodes.h — batch transforms of the embodied track
 * (libero_rl, flow_warmstart): the env ranks' episode arrays and the rollout
 * ranks' records of one round become the step's training batch, its credit
 * (FlowSAR, FlowIPO, flow-SDE GRPO, PPO's GAE) and the evaluation's success
 * counts. Pure functions over DataProtos and arrays; each puts its own
 * metrics into the rl_metric_set it is given (NULL: none).
 *
 * Layout: S chunk steps (policy calls) × B episodes (one per env, global
 * env order: rank 0's envs first), step-major x[s·B + b]; C actions of 7 per
 * chunk, D = C·7; K = S·C env steps. The batch's rows are the kept policy
 * calls (the chunk's first action was taken), in step-major order; row k is
 * chunk step row_sb[k] / B of episode row_sb[k] % B.
 *
 * Column names: the env's, the rollout's and the actor's contracts name the
 * tensors (workers/env/env.h, workers/rollout/rollout.h, workers/flow_rl.h,
 * workers/actor/actor.h); the recipe binds them once in an rl_episode_cols.
 * Every tensor that comes from another process is checked (dtype, shape,
 * ranges) before use: an error names the rank and the row.
 *
 * Errors: 0 or a negative rl_status with the message set.
 * Ownership: the structs own their arrays (the _free functions); DataProtos
 * passed in are borrowed. */
#ifndef RLRT_BATCH_EPISODES_H
#define RLRT_BATCH_EPISODES_H

#include <stddef.h>
#include <stdint.h>

#include "common/batch/estimators.h"
#include "common/metrics/metrics.h"
#include "common/schema/env.h"
#include "common/schema/flow_rl.h"
#include "rlrt/dataproto.h"

typedef struct rl_episode_cols {
    /* env interact replies: (N, K) f32, (N, K) u8, (N, K+1) i64, (N, K+1) u8 */
    const char *rewards, *valid, *task, *success;
    /* rollout records: (n) i64 env row of the rank, (n) i64 chunk step,
     * (n, C, 7) f32 the action chunk, (n, N) f32 the sampler's log-probs */
    const char *env_row, *chunk_step, *action, *sample_logp;
    /* annotations the credit reads: (n) f32, (n, D) f32, (n) f32 */
    const char *recon, *ref_action, *values;
    /* written: (n, D) f32, (n) i64, (n) f32, (n) f32, (n) f32, (n) f32,
     * (n) f32, (n) f32, (n, N) f32 */
    const char *flow_action, *seeds, *mask, *weights, *labels, *advantages, *returns, *old_values,
        *old_logp;
} rl_episode_cols;

/* ---- one round's envs ------------------------------------------------------------------------- */

typedef struct rl_episode_envs {
    int64_t B, K;
    float *rewards;   /* (B, K) */
    uint8_t *valid;   /* (B, K) */
    int64_t *task;    /* (B) the task of each env's episode (its first step's) */
    uint8_t *success; /* (B) success_once after the last step */
    int64_t *offset;  /* (E + 1) the first global env of each env rank */
} rl_episode_envs;

/* The interact replies of E env ranks (K env steps each), rank order. */
int rl_episode_envs_gather(rl_dataproto *const *env, int E, int64_t K, const rl_episode_cols *cols,
                           rl_episode_envs *e);
void rl_episode_envs_free(rl_episode_envs *e);
/* The env (control) steps the round took: the sum of its episodes' lengths,
 * the valid steps of every env (libero_rl's rollout/env_steps). */
int64_t rl_episode_envs_steps(const rl_episode_envs *e);

/* ---- the training batch ------------------------------------------------------------------------ */

typedef struct rl_episode_batch {
    int64_t S, B, C, D;
    rl_dataproto *rows; /* the kept rows, step-major */
    int64_t *row_sb;    /* (n) s·B + b of row k */
    float *step_mask;   /* (S, B) 1 where the chunk's first action was taken */
    float *chunk_rewards, *step_rewards; /* (S, B), (S, B, C) */
    float *ep_reward;   /* (B) the episode's reward (rl_flow_episode_rewards) */
    int64_t *ep_task;   /* (B) */
} rl_episode_batch;

/* The rollout ranks' records rec[0..E) (rank r served env rank r) joined to
 * the envs by (env_row, chunk_step): the kept rows with the records' tensors
 * plus flow_action (n, D) (the chunk the env ran: clipped to [-1, 1] with
 * env.clip_actions, metric rollout/action_clip_frac), seeds (n) (a row's
 * draws: a function of (seed, step, s·B + b)) and mask (n) = 1. Metrics
 * env/success_once, env/episode_chunks, env/episodes, rollout/rows. */
int rl_episode_batch_build(const rl_episode_envs *e, rl_dataproto *const *rec, int E, int64_t S, int64_t C,
                           const rl_episode_cols *cols, uint64_t seed, int64_t step, int clip_actions,
                           rl_episode_batch *b, rl_metric_set *ms);
void rl_episode_batch_free(rl_episode_batch *b);

/* The credit of the method (alg->loss; est: its estimator,
 * rl_flow_rl_estimator) over the annotated rows, columns added:
 *   flow_sar  weights, labels: softmax credit (rl_flow_sar_weights) of the
 *             recon errors (with flow_sar_label_balance, rescaled so the
 *             positive and the negative rows weigh half the total each;
 *             then, with flow_sar_negative_coef c != 1, the negative rows'
 *             weights × c);
 *             flow_sar_credit success keeps only the
 *             successful episodes' rows with w = 1, R = 1
 *             (actor/trained_rows); actor/recon_error_mean,
 *             actor/credit_clip_low_frac / _high_frac (kept steps whose
 *             softmax weight the clip bounds moved)
 *   flow_ipo  weights: rl_flow_ipo_weights of the actions against the
 *             reference's (clipped like the env's with env.clip_actions);
 *             actor/mean_weight, actor/delta_mean
 *   both also actor/credit_entropy, actor/credit_saturated_frac and
 *             actor/credit_pos_frac (rl_flow_credit_stats_get)
 *   grpo      advantages: GRPO over the env groups of env.group_size (same
 *             task and initial state), or the episodes of a task when it is
 *             1, with algorithm.filter_rewards (critic/kept_groups)
 *   gae       advantages, returns, old_values: GAE over each episode's chunk
 *             steps (rl_adv_gae)
 * The flow_* losses get zero advantages (the seeds' dummies). actor /
 * actor_critic: seq-mean-token-mean scales the advantages per episode
 * (rl_embodied_seq_mean_scale), old_logp = the sampler's log-probs. Metric
 * critic/rewards/mean. */
int rl_episode_credit(rl_episode_batch *b, const rl_episode_cols *cols, const rl_flow_rl_config *alg,
                      const rl_estimator *est, const rl_env_config *env, rl_metric_set *ms);

/* ---- the update --------------------------------------------------------------------------------- */

/* The row order of epoch `epoch` of step `step`: a permutation of 0..n-1
 * drawn by (seed, step, epoch). */
void rl_episode_shuffle(uint64_t seed, int64_t step, int64_t epoch, int64_t *perm, int64_t n);

/* update_flow's partial sums (workers/flow_rl.h), summed over the
 * mini-batches, by index; names[] holds their meta names in this order
 * (RL_FLOW_UPDATE_SUMS of the recipe). */
enum {
    RL_FUS_LOSS, RL_FUS_ROWS,
    RL_FUS_SAR_LOSS, RL_FUS_SAR_E_POS, RL_FUS_SAR_E_NEG, RL_FUS_SAR_WEIGHT, RL_FUS_SAR_CONTRASTIVE,
    RL_FUS_SAR_KL, RL_FUS_SAR_SUCCESS, RL_FUS_IPO_LOSS, RL_FUS_VELOCITY_MSE, RL_FUS_PG_LOSS,
    RL_FUS_PG_CLIPFRAC, RL_FUS_PPO_KL, RL_FUS_RATIO, RL_FUS_STEPS, RL_FUS_VALUE_LOSS, RL_FUS_IPO_GAP,
    RL_FUS_DEMO,
    RL_FUS_SAR_LABEL_POS, RL_FUS_SAR_SP_SCALE, RL_FUS_SAR_SP_FLAT, RL_FUS_G_RL, RL_FUS_G_DEMO, RL_FUS_G_COS,
    RL_FUS_COUNT
};

typedef struct rl_episode_update {
    double sum[RL_FUS_COUNT];
    double demo_rows, grad_norm, lr;
    int updates;
} rl_episode_update;

/* The update's metrics (the method's means per row or trained step, the
 * anchor's, actor/updates, actor/grad_norm, actor/lr): names[k] is the
 * metric of sum k (for k >= RL_FUS_SAR_LOSS). */
void rl_episode_update_put(const rl_episode_update *u, const char *const *names, const rl_flow_rl_config *alg,
                           rl_metric_set *ms);

/* ---- evaluation ------------------------------------------------------------------------------------ */

typedef struct rl_episode_tally {
    int64_t ok[RL_ENV_MAX_TASKS], n[RL_ENV_MAX_TASKS], all_ok, all;
} rl_episode_tally;

/* libero_rl's evaluation: ungrouped rounds 0, 1, … give env g the initial
 * state k + round·sharing of its task (rl_env_place_of, ungrouped); the
 * rounds it needs for per_task episodes of every task, and the episodes of
 * round `round` from the first per_task initial states of their task added
 * to t. */
int64_t rl_episode_eval_rounds(const rl_env_config *env, int64_t per_task);
void rl_episode_tally_round(rl_episode_tally *t, const rl_episode_envs *e, const rl_env_config *env,
                            int64_t round, int64_t per_task);
/* flow_warmstart's evaluation: the envs in order until `limit` episodes. */
void rl_episode_tally_first(rl_episode_tally *t, const rl_episode_envs *e, int64_t limit);
/* eval/success_task_<k> per task evaluated, `overall` (the success rate) and
 * eval/episodes; " k:rate" per task appended to line[0..size). */
void rl_episode_tally_put(const rl_episode_tally *t, const char *overall, rl_metric_set *ms, char *line,
                          size_t size);

#endif
