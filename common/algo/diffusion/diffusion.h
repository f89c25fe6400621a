/* common/algo/diffusion/diffusion.h — GRPO mathematics for diffusion / flow image and
 * video generators (seed 004 MMDanceGRPO; Flow-GRPO and DanceGRPO).
 *
 * Purpose: pure functions over f32 arrays: the shifted σ schedule, the SDE
 * sampling step with its Gaussian log-prob (and gradient w.r.t. the model
 * output), the step's KL to a reference model's step, group advantages, the clipped per-timestep GRPO loss with its
 * gradient w.r.t. the new log-prob, and the seeded random timestep subset.
 *
 * Conventions (Flow-GRPO): σ = 1 is pure noise, σ = 0 data; the sampler walks
 * a decreasing grid σ_0 = 1 > σ_1 > … > σ_N = 0 and dt = σ_next − σ < 0.
 * A latent is one row of D floats (C·H·W or T·C·H·W flattened).
 *
 * Errors: 0 or a negative rl_status with rl_error_message() naming the
 * argument; NaN/Inf inputs give RL_ENUMERIC naming the array and index.
 * Ownership: callers own every buffer; nothing is allocated or retained.
 */
#ifndef RLRT_ALGO_DIFFUSION_H
#define RLRT_ALGO_DIFFUSION_H

#include <stdint.h>

#include "common/sde/diffusion_sde.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Advantages from rewards (B).
 *   use_group != 0: per group (group[i] ∈ [0, n_groups), e.g. the prompt
 *     uid) A = (r − mean_g)/(std_g + eps), std unbiased (torch.std); a group
 *     whose mean < reward_threshold gets A = 0 (pass -INFINITY to disable).
 *   use_group == 0: one global z-score (r − mean)/(std + eps); the threshold
 *     is not applied (as the seed). group may be NULL.
 *   norm_by_std == 0: A = r − mean (group or global), not divided by the
 *     std (verl's norm_adv_by_std_in_grpo: false, Dr. GRPO): the weights of
 *     combined rewards keep their meaning in a group where one term is
 *     constant.
 * Documented edge: a group (or a global batch) of one row has no spread and
 * gets A = 0 (torch would give NaN). eps is 1e-8 in the seed.
 * adv (B) out. */
int rl_diffusion_grpo_advantages(const float *rewards, const int64_t *group,
                                 int64_t b, int64_t n_groups, int use_group,
                                 int norm_by_std, double reward_threshold, double eps,
                                 float *adv);

/* A reward term held at or above a floor by a Lagrange multiplier λ
 * (constrained RL by dual ascent; with kp > 0 the PI form of Stooke et
 * al.'s PID Lagrangian): the recipe pays r_b = base_b + λ·c_b for the
 * constrained term c. After each step, with e = floor − mean_c (that
 * step's batch mean),
 *   integral ← clamp(integral + ki·e, 0, lambda_max)
 *   λ        ← clamp(integral + kp·e, 0, lambda_max)
 * so λ grows while the term is under its floor and shrinks back while it
 * is above; the proportional part answers a drop at once and leaves with
 * it, where the integral alone overshoots and oscillates.
 * Errors: a non-finite value, ki, kp or lambda_max < 0 (RL_EINVAL naming
 * the value; the state is left as it was). */
typedef struct rl_constraint_pi {
    double integral; /* ≥ 0 */
    double lambda;   /* the multiplier of the next step, in [0, lambda_max] */
} rl_constraint_pi;

int rl_constraint_pi_update(rl_constraint_pi *st, double ki, double kp, double floor,
                            double mean_c, double lambda_max);

typedef struct rl_diffusion_grpo_metrics {
    double loss;
    double clip_frac;  /* share of kept rows where the clipped term won */
    double approx_kl;  /* mean ½(logp − old)² */
    double ratio_mean;
} rl_diffusion_grpo_metrics;

/* Clipped GRPO loss of one trained timestep over N rows (seed 004 §5.3):
 *   A = clamp(adv, ±adv_clip_max), ratio = exp(logp − old_logp)
 *   L = Σ m·max(−A·ratio, −A·clamp(ratio, 1 ± clip_range)) / Σ m
 * logp, old_logp, adv, mask: (N), mask may be NULL; grad_logp (N) out is
 * dL/dlogp (may be NULL). At a tie between the two terms the gradient is
 * split evenly, as torch.max does; since clamp passes the gradient inside
 * [1 − c, 1 + c], any row there gets the unclipped gradient −A·ratio/Σm.
 * Documented edge: Σ m = 0 gives loss 0 and a zero gradient. */
int rl_diffusion_grpo_loss(const float *logp, const float *old_logp,
                           const float *adv, const float *mask, int64_t n,
                           double clip_range, double adv_clip_max,
                           float *grad_logp,
                           rl_diffusion_grpo_metrics *metrics);

/* Random subset of the n_timesteps step indices to train on: the first
 * k = (int64)(n_timesteps·fraction) entries of a Philox-driven Fisher-Yates
 * permutation of stream (seed, stream) — use the row id as stream for a
 * per-sample subset (Flow-GRPO) or one stream for a shared subset (seed
 * 004). k is clamped to [1, n_timesteps] for fraction > 0. idx
 * (n_timesteps) out: idx[0..k) distinct, in draw order; *k_out = k.
 * Deterministic for (seed, stream, n_timesteps, fraction). */
int rl_diffusion_timestep_subset(uint64_t seed, uint64_t stream,
                                 int64_t n_timesteps, double fraction,
                                 int64_t *idx, int64_t *k_out);

#ifdef __cplusplus
}
#endif
#endif
