/* rlrt/algo/diffusion.h — GRPO mathematics for diffusion / flow image and
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

#ifdef __cplusplus
extern "C" {
#endif

/* sigmas (n_steps + 1) out: σ_k = s·t_k/(1 + (s − 1)·t_k) over
 * t_k = linspace(1, 0, n_steps + 1); shift s > 0 (s = 1 is the identity). */
int rl_diffusion_sigmas(int64_t n_steps, double shift, float *sigmas);

/* One SDE step from σ to σ_next < σ (per row), Flow-GRPO:
 *   std_t = noise_level·sqrt(σ/(1 − σ')), σ' = σ_next when σ = 1 else σ
 *   mean  = x·(1 + std_t²/(2σ)·dt) + v·(1 + std_t²(1 − σ)/(2σ))·dt
 *   x_next = mean + std_t·sqrt(−dt)·ε
 *   logp  = mean over the D floats of −(x_next − mean)²/(2s²) − log s
 *           − log √(2π), s = std_t·sqrt(−dt)
 * x, v, noise, x_next: (B, D); sigma, sigma_next: (B); logp (B) out, may be
 * NULL. noise is the caller's N(0, 1) draws (rl_rng_normal). */
int rl_diffusion_sde_step(const float *x, const float *v, const float *sigma,
                          const float *sigma_next, double noise_level,
                          const float *noise, int64_t b, int64_t d,
                          float *x_next, float *logp);

/* Log-prob of a recorded x_next (the training re-scoring pass) and
 * grad_v[i,j] = grad_logp[i]·∂logp_i/∂v_ij (grad_logp NULL means 1).
 * logp (B) out; grad_v (B, D) out, may be NULL. Requires s > 0, i.e.
 * noise_level > 0 and σ_next < σ < … (σ = 0 rows have no density). */
int rl_diffusion_sde_logprob(const float *x, const float *v,
                             const float *x_next, const float *sigma,
                             const float *sigma_next, double noise_level,
                             int64_t b, int64_t d, float *logp,
                             const float *grad_logp, float *grad_v);

/* KL of the policy's SDE step to the reference's (Flow-GRPO's KL loss):
 * both are Gaussians N(mean, s²I) of the same std s = std_t·sqrt(−dt) whose
 * means differ only through the velocity (rl_diffusion_sde_step), so
 *   kl_i = mean over the D floats of (mean_ij − mean_ref_ij)² / (2s²)
 *        = cv²·mean_j (v_ij − v_ref_ij)² / (2s²),  cv = (1 + std_t²(1 − σ)/(2σ))·dt
 * (x drops out). The mean over D matches the log-prob's normalisation.
 * grad_v[i,j] = grad_kl[i]·∂kl_i/∂v_ij = grad_kl[i]·cv²(v_ij − v_ref_ij)/(D s²)
 * (grad_kl NULL means 1). v, v_ref: (B, D); sigma, sigma_next: (B); kl (B)
 * out; grad_v (B, D) out, may be NULL. Same requirements as
 * rl_diffusion_sde_logprob (noise_level > 0, σ_next < σ <= 1). */
int rl_diffusion_sde_kl(const float *v, const float *v_ref, const float *sigma,
                        const float *sigma_next, double noise_level, int64_t b, int64_t d,
                        float *kl, const float *grad_kl, float *grad_v);

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
