/* common/batch/diffusion.h — the batch transforms of the diffusion track
 * (seed 004, MMDanceGRPO; driver/recipes/diffusion/): pure functions over
 * the arrays of a step's batch that compute what a phase computes and put
 * their own metrics into the rl_metric_set they are given.
 *
 *   rows        the prompts, groups and seeds of a GRPO step (drawn by
 *               (seed, step)) or of the fixed evaluation rows
 *   constraint  algorithm.constraint: the constrained term paid λ, its
 *               metrics, the PI update of λ, its checkpoint state
 *   advantages  through the estimator table (common/batch/estimators.h)
 *   step mask   the seeded per-sample subset of timesteps trained
 *   metrics     score statistics, means of reward columns, the optimiser
 *               steps' sums
 *   pairs       flow matching's noisy inputs and targets (pretraining)
 *
 * Every random draw is a function of (seed, step, row), so a resumed or
 * replayed step computes the same batch. Callers own every buffer; nothing
 * is retained. Errors: 0 or a negative rl_status with the message set. */
#ifndef RLRT_BATCH_DIFFUSION_H
#define RLRT_BATCH_DIFFUSION_H

#include <jansson.h>
#include <stdint.h>

#include "common/algo/diffusion/diffusion.h"
#include "common/batch/estimators.h"
#include "common/metrics/metrics.h"
#include "rlrt/dataproto.h"

/* ---- rows ------------------------------------------------------------------------------------------ */

/* The rows of GRPO step `step`: P prompts drawn from [0, n_prompts), each
 * repeated n times (rows p·n .. p·n + n − 1 are group p); a row's initial
 * noise seed (one per group when same_noise) and its SDE seed.
 * ids (P·n) i32, group (P·n) i64, noise_seed (P·n) i64, row_seed (P·n) i64. */
void rl_diffusion_train_rows(uint64_t seed, int64_t step, int64_t P, int64_t n, int n_prompts,
                             int same_noise, int32_t *ids, int64_t *group, int64_t *noise_seed,
                             int64_t *row_seed);
/* The evaluation rows, the same at every step: every prompt `per` times,
 * seeds from (seed, salt, row); `salt` tells evaluations apart.
 * ids, noise_seed, row_seed (n_prompts·per); noise_seed == row_seed. */
void rl_diffusion_eval_rows(uint64_t seed, uint64_t salt, int n_prompts, int64_t per, int32_t *ids,
                            int64_t *noise_seed, int64_t *row_seed);

/* ---- algorithm.constraint -------------------------------------------------------------------------- */

/* The reward ranks weigh the constrained term c with its reward_model
 * weight w; the step pays λ instead: score_b += coeff·(λ − w)·c_b. */
typedef struct rl_diffusion_constraint {
    rl_constraint_pi pi;              /* λ and the integral */
    double weight, coeff;             /* w; reward.reward_coeff (scores are scaled by it) */
    double floor, ki, kp, lambda_max; /* algorithm.constraint.{min, ki, kp, lambda_max} */
} rl_diffusion_constraint;

/* λ = integral = init (>= 0), or w when init is -1. */
void rl_diffusion_constraint_init(rl_diffusion_constraint *c, double weight, double coeff, double floor,
                                  double ki, double kp, double init, double lambda_max);
/* score (B) += coeff·(λ − w)·term (B); puts constraint/lambda (the λ paid),
 * constraint/mean (the batch's mean of the term) and constraint/shortfall
 * (floor − mean); then moves λ (rl_constraint_pi_update). */
int rl_diffusion_constraint_step(rl_diffusion_constraint *c, const float *term, float *score, int64_t B,
                                 rl_metric_set *ms);
/* The state in a checkpoint's extra object: constraint_lambda,
 * constraint_integral. Restoring from the extra of checkpoint `step`: a
 * checkpoint without both (saved by a run without the constraint) keeps
 * the starting λ with a warning; one with a missing or negative value is
 * RL_EIO. */
int rl_diffusion_constraint_save(const rl_diffusion_constraint *c, json_t *extra);
int rl_diffusion_constraint_restore(rl_diffusion_constraint *c, const json_t *extra, int64_t step);

/* ---- advantages ------------------------------------------------------------------------------------ */

typedef struct rl_diffusion_adv_cfg {
    const rl_estimator *est; /* algorithm.adv_estimator: rl_estimator_find(name, RL_TRACK_DIFFUSION) */
    int use_group;           /* per prompt group (0: one global z-score) */
    int norm_by_std;         /* divide by the std */
    double reward_threshold; /* a group whose mean is below gets A = 0 */
    int64_t n_groups;
} rl_diffusion_adv_cfg;

/* adv (B) from score (B) and group (B) by the estimator (grpo:
 * rl_diffusion_grpo_advantages, eps 1e-8); puts critic/advantages/{mean,
 * std}. */
int rl_diffusion_advantages(const rl_diffusion_adv_cfg *cfg, const float *score, const int64_t *group,
                            int64_t B, float *adv, rl_metric_set *ms);

/* ---- the trained timesteps -------------------------------------------------------------------------- */

/* mask (B, N) 0/1: per row b the steps of rl_diffusion_timestep_subset
 * (fraction of N, stream step·1000003 + b of the job's seed). */
int rl_diffusion_step_mask(uint64_t seed, int64_t step, double fraction, int64_t B, int64_t N,
                           float *mask);

/* ---- the reward's images ------------------------------------------------------------------------------ */

/* out (B, F): frame `frame` (F floats a frame, (frame + 1)·F <= D) of each
 * row's scored image: the chain's last latent, latents (B, N+1, D)[:, N],
 * when final_mean is NULL (data.reward_image 'sample'), else the row of
 * final_mean (B, D), the last step's ODE mean ('mean'). */
int rl_diffusion_reward_images(const float *latents, const float *final_mean, int64_t B, int64_t N,
                               int64_t D, int64_t frame, int64_t F, float *out);

/* ---- metrics ---------------------------------------------------------------------------------------- */

/* critic/score/{mean, max, min} of score (B). */
int rl_diffusion_score_metrics(const float *score, int64_t B, rl_metric_set *ms);

/* A mean metric of a column: the f32 (B) tensor `tensor` → "<prefix><metric>". */
typedef struct rl_batch_mean {
    const char *tensor, *metric;
} rl_batch_mean;

/* Puts the mean of each f32 (B) tensor of dp named in cols[0..n) (a
 * tensor dp lacks puts nothing). */
void rl_diffusion_column_means(const rl_dataproto *dp, const rl_batch_mean *cols, int n,
                               const char *prefix, rl_metric_set *ms);

/* The optimiser steps of a GRPO step: the sums over the actor ranks and the
 * mini-batches of the update's loss, trained timesteps, clipped steps, ½
 * (logp − old)², ratio and KL to the reference (sums[0..6), the order of
 * the actor's update_diffusion reply), `updates` optimiser steps, the sum
 * of their grad norms and the last lr. Puts actor/pg_loss (mean per
 * update), actor/pg_clipfrac, actor/ppo_kl, actor/ratio_mean (per trained
 * step), actor/trained_steps, actor/kl_loss (kl_on), actor/grad_norm
 * (mean) and actor/lr. */
void rl_diffusion_update_metrics(const double sums[6], int updates, double grad_norm_sum, double lr,
                                 int kl_on, rl_metric_set *ms);

/* ---- flow-matching pretraining ----------------------------------------------------------------------- */

/* Training pairs of step `step` from clean clips x0 (B, D): per row σ ~
 * U(0, 1) and ε ~ N(0, I) (stream step·1000003 + b); x (B, D) = (1 − σ)·x0
 * + σ·ε, target (B, D) = ε − x0, sigma (B). */
void rl_flow_matching_pairs(uint64_t seed, int64_t step, const float *x0, int64_t B, int64_t D, float *x,
                            float *target, float *sigma);

#endif
