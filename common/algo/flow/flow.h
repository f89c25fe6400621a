/* common/algo/flow/flow.h — flow-matching action-policy RL mathematics (FlowIPO,
 * FlowSAR, EMA reference, self-annotation, flow SDE/ODE steps).
 *
 * Purpose: pure functions over f32 arrays with explicit shapes and masks, no
 * I/O and no model code. Every loss a model trains through also returns the
 * gradient w.r.t. its trainable input (the velocity v_θ or a log-prob), so a
 * caller chains it into its own backward pass. Accumulation is in double.
 *
 * Conventions (RLinf / π0, seeds 000 and 001):
 *   t = 0 is data, t = 1 is noise; x_t = (1 − t)·a + t·ε; u = ε − a.
 *   A "chunk" is one policy action chunk of C × A floats; D = C·A.
 *   Episode arrays are step-major: x[s * B + b] is step s of episode b.
 *   Masks are f32, 0 = ignore, non-zero = keep; NULL mask = keep everything.
 *
 * Errors: 0 on success, or a negative rl_status with rl_error_message()
 * naming the argument. NaN/Inf inputs give RL_ENUMERIC naming the array and
 * the first bad flat index; outputs are then unspecified. Inputs that are
 * masked out are not checked (their values never reach a result).
 *
 * Ownership: callers own every buffer; nothing is allocated or retained.
 * Outputs may not alias inputs unless stated.
 */
#ifndef RLRT_ALGO_FLOW_H
#define RLRT_ALGO_FLOW_H

#include <stdint.h>

#include "common/sde/flow_step.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- shared flow-matching helpers ------------------------------------- */

/* x_t = (1 − t)·a + t·ε and u = ε − a for N samples of D floats, one t per
 * sample. a, eps, x_t, u are (N, D); t is (N). x_t or u may be NULL. */
int rl_flow_interp(const float *a, const float *eps, const float *t,
                   int64_t n, int64_t d, float *x_t, float *u);

/* Self-annotation reconstruction error (FlowSAR phase 2):
 * â = x_mid − v·t_mid, e[i] = Σ_j (a − â)²_ij.
 * a, x_mid, v are (N, D) (x_mid = (1 − t_mid)·a + t_mid·ε, v the EMA
 * model's velocity at x_mid); e is (N). */
int rl_flow_recon_error(const float *a, const float *x_mid, const float *v,
                        float t_mid, int64_t n, int64_t d, float *e);

/* Clips the n floats of a to [lo, hi] in place (the env's action clip, so a
 * trained action chunk is the one the env executed); returns how many were
 * out of range. NaN stays NaN (the losses report it). */
int64_t rl_flow_clip_actions(float *a, int64_t n, float lo, float hi);

/* Episode reward for the credit weights (seed 001 §2.6.4): the per-step,
 * per-action-step rewards summed over steps and chunk, clamped to [0, 1].
 * step_rewards: (S, B, C) step-major; out: (B). */
int rl_flow_episode_rewards(const float *step_rewards, int64_t s, int64_t b, int64_t c,
                            float *out);

/* ---- EMA reference parameters ----------------------------------------- */

typedef enum rl_flow_ema_schedule {
    RL_FLOW_EMA_FIXED = 0,  /* β = beta_fixed (FlowIPO beta_ref 0.995) */
    RL_FLOW_EMA_LINEAR = 1  /* DiffusionNFT: β_i = min(eta_rate·i, eta_max) */
} rl_flow_ema_schedule;

/* β for update number `step` (0-based count of EMA updates so far, as
 * RLinf's count_update). Returns NaN for an unknown schedule. */
double rl_flow_ema_beta(rl_flow_ema_schedule schedule, double beta_fixed,
                        double eta_rate, double eta_max, int64_t step);

/* ref ← β·ref + (1 − β)·cur over n floats (a flat parameter buffer).
 * β must lie in [0, 1]. cur may not alias ref. */
int rl_flow_ema_update(float *ref, const float *cur, int64_t n, double beta);

/* ---- FlowIPO (seed 001) ------------------------------------------------ */

typedef struct rl_flow_ipo_weight_stats {
    double weight_mean; /* mean w over kept steps ("mean_weight") */
    double delta_mean;  /* mean δ over kept steps */
} rl_flow_ipo_weight_stats;

/* Credit weights.
 *   actions, ref_actions: (S, B, D) step-major, D = chunk × action_dim
 *   rewards: (B) episode reward (the caller clamps to [0, 1]); sign = 2R − 1
 *   step_mask: (S, B) or NULL; masked steps get w = 0 and take no part in
 *     the z-score
 *   w: (S, B) out; stats may be NULL.
 * δ[s,b] = ‖a − a_ref‖₂ over D; per episode A = sign·(δ − mean)/(std + eps)
 * across kept steps, std unbiased (torch.std). w = sigmoid(alpha·A) ∈ (0,1)
 * (in f32 a weight can round to exactly 0 or 1 once alpha·|A| > ~17, which
 * needs episodes of > 70 steps at alpha = 2).
 * Documented edge: an episode with one kept step has no spread, A = 0 and
 * w = 0.5 (torch would give NaN from the unbiased std of one value). */
int rl_flow_ipo_weights(const float *actions, const float *ref_actions,
                        const float *rewards, const float *step_mask,
                        int64_t s, int64_t b, int64_t d, double alpha,
                        double eps, float *w, rl_flow_ipo_weight_stats *stats);

/* Interpolated velocity target ṽ = w·u + (1 − w)·v_ref.
 * u, v_ref, target are (N, D); w is (N). target may alias u or v_ref. */
int rl_flow_ipo_target(const float *u, const float *v_ref, const float *w,
                       int64_t n, int64_t d, float *target);

typedef struct rl_flow_ipo_metrics {
    double loss;         /* actor/flow_ipo_loss */
    double velocity_mse; /* actor/velocity_mse: unmasked mean of (v − ṽ)² */
} rl_flow_ipo_metrics;

/* L = Σ m·(v_θ − ṽ)² / Σ m with the mask broadcast to (N, D), i.e. the mean
 * over kept elements (seed: (mse·mask).sum()/mask.sum() on a full mask).
 *   v_theta, target: (N, D); grad_v: (N, D) out, dL/dv_θ (may be NULL)
 *   mask: (N, mk) or NULL; mk divides D and each entry covers D/mk
 *     consecutive floats (mk = 1 per chunk, mk = C per action step,
 *     mk = D per element).
 * Documented edge: Σ m = 0 gives loss 0 and a zero gradient. */
int rl_flow_ipo_loss(const float *v_theta, const float *target,
                     const float *mask, int64_t n, int64_t d, int64_t mk,
                     float *grad_v, rl_flow_ipo_metrics *metrics);

/* ---- FlowSAR (seed 000) ------------------------------------------------ */

/* Credit weights.
 *   recon_errors: (S, B) step-major e_i; rewards: (B) R ∈ [0, 1]
 *   step_mask: (S, B) or NULL (masked steps get w = 0, excluded from the
 *     softmax)
 *   weights: (S, B) out; labels: (B) out, y = 2R − 1 (may be NULL)
 * Per trajectory b: w = softmax_s(±e/T) (+ if R ≥ 0.5, − otherwise; R is
 * 0/1 in the seed). If w_min > 0 or w_max < 1, w = clip(w, w_min, w_max)
 * then renormalised to sum 1 (one pass, as the seed). Weights of every
 * trajectory with a kept step sum to 1; a trajectory with none is all 0. */
int rl_flow_sar_weights(const float *recon_errors, const float *rewards,
                        const float *step_mask, int64_t s, int64_t b,
                        double temperature, double w_min, double w_max,
                        float *weights, float *labels);

/* As rl_flow_sar_weights, and clipped[0] / clipped[1] (may be NULL) count
 * the kept steps whose softmax weight fell below w_min / above w_max
 * (where the clip binds; 0 without a clip). */
int rl_flow_sar_weights_ex(const float *recon_errors, const float *rewards,
                           const float *step_mask, int64_t s, int64_t b,
                           double temperature, double w_min, double w_max,
                           float *weights, float *labels, int64_t clipped[2]);

/* ---- diagnostics of the credit and of the update (issue 43) ----------- */

typedef struct rl_flow_credit_stats {
    /* mean over episodes with >= 2 kept steps of H(p)/log(n), p = w/Σw over
     * the episode's n kept steps: 1 = uniform (no step singled out), 0 =
     * all weight on one step; NaN when no episode has 2 kept steps */
    double entropy;
    /* kept steps with w < 0.05 or w > 0.95 over kept steps (FlowIPO's
     * sigmoid weights at their ends) */
    double saturated;
    double pos_frac;  /* episodes with R >= 0.5 over episodes with a kept step */
    int64_t episodes, steps; /* episodes with a kept step; kept steps */
} rl_flow_credit_stats;

/* Statistics of credit weights w (S, B) step-major with episode rewards
 * (B) and step_mask (S, B) or NULL (layout of rl_flow_sar_weights). */
int rl_flow_credit_stats_get(const float *w, const float *rewards, const float *step_mask, int64_t s,
                             int64_t b, rl_flow_credit_stats *out);

/* Two gradients that add up: g_a (the first) and g_b = g_total − g_a,
 * over n floats: their norms and cos(g_a, g_b) (NaN when a norm is 0). */
typedef struct rl_flow_grad_split {
    double norm_a, norm_b, cos;
} rl_flow_grad_split;
int rl_flow_grad_split_get(const float *g_a, const float *g_total, int64_t n, rl_flow_grad_split *out);

typedef enum rl_flow_sar_variant {
    RL_FLOW_SAR_MSE_BRANCH = 0,  /* DiffusionNFT: w·[R·E⁺ + (1−R)·E⁻] */
    RL_FLOW_SAR_SOFTPLUS_KL = 1  /* π-StepNFT: w·softplus(½y(E⁺−E⁻)) + λ‖v_θ−v_old‖² */
} rl_flow_sar_variant;

typedef enum rl_flow_sar_energy {
    RL_FLOW_SAR_ENERGY_MSE = 0,  /* E = ‖v − u‖² */
    RL_FLOW_SAR_ENERGY_SDE = 1   /* E = ‖v − u‖² / (2t); t must be > 0 */
} rl_flow_sar_energy;

typedef struct rl_flow_sar_config {
    double beta;                /* mirror trust region β (seed default 1.0) */
    rl_flow_sar_variant variant;
    rl_flow_sar_energy energy;
    double kl_coeff;            /* λ, softplus_kl only (seed default 0.5 / 1.0) */
    /* 0: ‖·‖² is the sum over the D floats of a chunk (the seed's formula);
     * 1: the mean over D (per-element scale, as DiffusionNFT's MSE). */
    int energy_mean;
} rl_flow_sar_config;

/* Defaults of seed 000 §2.2: β 1, mse_branch, mse energy, λ 0.5, sum. */
rl_flow_sar_config rl_flow_sar_config_default(void);

typedef struct rl_flow_sar_metrics {
    double loss;          /* actor/flow_sar_loss */
    double e_pos;         /* actor/flow_sar_E_pos: mean E⁺ (after 1/(2t)) */
    double e_neg;         /* actor/flow_sar_E_neg */
    double weight_mean;   /* actor/flow_sar_weight_mean */
    double energy_type;   /* 1 sde, 0 mse */
    double loss_variant;  /* 1 softplus_kl, 0 mse_branch */
    /* softplus_kl only (NaN for mse_branch): mean w·softplus(·) and mean
     * λ‖v_θ − v_old‖²; loss = contrastive + kl_penalty. */
    double contrastive;
    double kl_penalty;
    double success_ratio; /* mse_branch only (NaN otherwise): mean R */
    double label_pos;     /* mean R = (1 + y)/2 over kept chunks (both variants) */
    /* softplus_kl only (NaN for mse_branch), z = ½y(E⁺ − E⁻): the mean of
     * sigmoid(z), the factor softplus puts on a chunk's gradient (its
     * largest 1), and the fraction of chunks in softplus's flat part,
     * sigmoid(z) < 0.05 (z < −2.94: the margin is met and the chunk's
     * contrastive gradient is below 5% of its largest) */
    double softplus_grad_scale;
    double softplus_flat;
} rl_flow_sar_metrics;

/* L = Σ_i m_i·ℓ_i / Σ_i m_i over N chunks (means in the metrics are over
 * kept chunks too).
 *   v_theta, v_old, u: (N, D); weights, labels, mask: (N) (mask may be NULL;
 *   labels y ∈ {−1, +1}, R = (1 + y)/2); flow_t: (N), needed for the sde
 *   energy only (may be NULL with mse).
 *   grad_v: (N, D) out, dL/dv_θ (may be NULL); metrics may be NULL.
 * Errors: RL_ERANGE when the sde energy meets t ≤ 0 in a kept chunk (1/(2t)
 * has no value there; t = 1 is fine and halves the energy).
 * Documented edge: Σ m = 0 gives loss 0, zero gradient, NaN means.
 * Speed: on x86-64 CPUs with AVX2+FMA the chunk kernels use them (the
 * environment variable RLRT_NO_SIMD=1 forces the portable code). */
int rl_flow_sar_loss(const float *v_theta, const float *v_old, const float *u,
                     const float *weights, const float *labels,
                     const float *flow_t, const float *mask, int64_t n,
                     int64_t d, const rl_flow_sar_config *cfg, float *grad_v,
                     rl_flow_sar_metrics *metrics);

#ifdef __cplusplus
}
#endif
#endif
