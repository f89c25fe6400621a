/* common/sde/flow_step.h — one flow-matching ODE/SDE denoising step with its
 * per-step Gaussian log-prob (RLinf's openpi sampler), below both the flow
 * policy that samples with it (common/nn/models/flow_policy.c) and the
 * embodied losses that re-score it (common/algo/flow).
 *
 * Conventions (RLinf / π0): t = 0 is data, t = 1 is noise; a chunk is D
 * floats. Errors: 0 or a negative rl_status with rl_error_message() naming
 * the argument; NaN/Inf inputs give RL_ENUMERIC. Ownership: callers own
 * every buffer.
 */
#ifndef RLRT_SDE_FLOW_STEP_H
#define RLRT_SDE_FLOW_STEP_H

#include <stdint.h>

/* ---- flow SDE / ODE steps with per-step Gaussian log-probs --------------
 * One denoising step from grid time t to t_next < t (Δ = t − t_next > 0) of
 * the RLinf openpi sampler:
 *   x0 = x_t − v·t, x1 = x_t + v·(1 − t)
 *   SDE: σ = noise_level·sqrt(t/(1 − t')), t' = t_next when t = 1 else t;
 *        mean = x0·(1 − t_next) + x1·(t_next − σ²Δ/(2t)), std = sqrt(Δ)·σ
 *   ODE: mean = x_t − Δ·v, std = noise_level·sqrt(Δ) (0: deterministic)
 *   logp = Σ over the D floats of a chunk of the Gaussian log-density
 *          −log std − ½log 2π − ½((x − mean)/std)²
 * A step with std = 0 (ODE with noise_level 0, or SDE at t_next = t) is
 * deterministic and reports logp = 0 (RLinf's gaussian_logprob convention).
 * t, t_next: (N), one grid point per sample, 0 ≤ t_next < t ≤ 1. */
typedef enum rl_flow_step_method {
    RL_FLOW_STEP_ODE = 0,
    RL_FLOW_STEP_SDE = 1
} rl_flow_step_method;

/* Samples x_next = mean + std·noise. x_t, v, noise, x_next are (N, D);
 * noise is the caller's N(0, 1) draws (rl_rng_normal), may be NULL when
 * std is 0; logp (N) out may be NULL. */
int rl_flow_step_sample(rl_flow_step_method method, const float *x_t,
                        const float *v, const float *t, const float *t_next,
                        double noise_level, const float *noise, int64_t n,
                        int64_t d, float *x_next, float *logp);

/* Log-prob of a recorded x_next under velocity v (the PPO/GRPO re-scoring
 * pass) and its gradient: grad_v[i,j] = grad_logp[i]·∂logp_i/∂v_ij
 * (grad_logp NULL means 1). logp (N) out; grad_v (N, D) out, may be NULL. */
int rl_flow_step_logprob(rl_flow_step_method method, const float *x_t,
                         const float *v, const float *x_next, const float *t,
                         const float *t_next, double noise_level, int64_t n,
                         int64_t d, float *logp, const float *grad_logp,
                         float *grad_v);

#endif
