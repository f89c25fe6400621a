/* common/sde/diffusion_sde.h — the SDE sampling step of rectified-flow image
 * and clip generators (Flow-GRPO), below both the models that sample with it
 * (common/nn/models/clip_flow.c) and the losses that re-score it
 * (common/algo/diffusion).
 *
 * Conventions (Flow-GRPO): σ = 1 is pure noise, σ = 0 data; the sampler walks
 * a decreasing grid σ_0 = 1 > σ_1 > … > σ_N = 0 and dt = σ_next − σ < 0.
 * A latent is one row of D floats (C·H·W or T·C·H·W flattened).
 *
 * Errors: 0 or a negative rl_status with rl_error_message() naming the
 * argument; NaN/Inf inputs give RL_ENUMERIC naming the array and index.
 * Ownership: callers own every buffer; nothing is allocated or retained.
 */
#ifndef RLRT_SDE_DIFFUSION_SDE_H
#define RLRT_SDE_DIFFUSION_SDE_H

#include <stdint.h>

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

#endif
