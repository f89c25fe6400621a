/* common/algo/kl.h — per-token KL estimators and KL coefficient controllers.
 *
 * Purpose: the KL penalty between the policy and the reference policy on
 * sampled tokens, as used for KL-shaped rewards (advantage.h) and for the KL
 * loss (policy_loss.h), with its gradient w.r.t. the policy log-prob; and the
 * fixed / adaptive controllers of the KL coefficient (verl, OpenRLHF).
 *
 * Estimators on lr = logp − ref_logp (verl kl_penalty):
 *   K1  lr                      d/dlogp = 1
 *   ABS |lr|                    d/dlogp = sign(lr)   (0 at lr = 0)
 *   K2  ½·lr²      ("mse")      d/dlogp = lr
 *   K3  with k = clamp(ref − logp, −20, 20):
 *       clamp(exp(k) − k − 1, −10, 10)   ("low_var_kl")
 *                               d/dlogp = 1 − exp(k), 0 where a clamp binds
 * If clamp > 0 every estimator's value is also clamped to [−clamp, clamp]
 * (OpenRLHF clamps to ±10); the gradient is 0 where that clamp binds
 * (boundaries inclusive, as torch.clamp).
 *
 * Arrays are f32 (B, T) row-major; mask as in advantage.h (f32 0/1). Masked-
 * out positions get kl = 0 and grad = 0 and are not read.
 * Ownership: the caller owns every array and the controller struct.
 */
#ifndef RLRT_ALGO_KL_H
#define RLRT_ALGO_KL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rl_kl_kind {
    RL_KL_K1 = 0,   /* "kl", "k1" */
    RL_KL_ABS = 1,  /* "abs" */
    RL_KL_K2 = 2,   /* "mse", "k2" */
    RL_KL_K3 = 3    /* "low_var_kl", "k3" */
} rl_kl_kind;

/* Parses "kl"/"k1", "abs", "mse"/"k2", "low_var_kl"/"k3" (RL_EINVAL else). */
int rl_kl_kind_parse(const char *name, rl_kl_kind *out);
const char *rl_kl_kind_name(rl_kl_kind kind);

/* Value (and derivative w.r.t. logp in *dlogp when non-NULL) of one
 * estimator at one token; no mask, no checks. */
double rl_kl_token(rl_kl_kind kind, double logp, double ref_logp,
                   double clamp, double *dlogp);

/* kl (B, T) output; grad (B, T) or NULL: d kl / d logp. mask may be NULL
 * (all valid). RL_ENUMERIC names logp/ref_logp and the index of the first
 * NaN/Inf at a valid position. out/grad may not alias the inputs. */
int rl_kl_penalty(const float *logp, const float *ref_logp, const float *mask,
                  int64_t B, int64_t T, rl_kl_kind kind, double clamp,
                  float *kl, float *grad);

/* KL coefficient controller. Fixed: value never changes. Adaptive (Ziegler
 * et al., verl AdaptiveKLController): err = clip(cur/target − 1, −0.2, 0.2);
 * value *= 1 + err·n_steps/horizon. */
typedef struct rl_kl_ctl {
    int adaptive;
    double value;    /* current coefficient */
    double target;   /* target KL (adaptive) */
    double horizon;  /* horizon in steps (adaptive), > 0 */
} rl_kl_ctl;

int rl_kl_ctl_init_fixed(rl_kl_ctl *ctl, double value);
int rl_kl_ctl_init_adaptive(rl_kl_ctl *ctl, double init_value, double target,
                            double horizon);
/* current_kl: the measured mean KL; n_steps: samples (or steps) since the
 * last update. RL_ENUMERIC if current_kl is not finite (value unchanged). */
int rl_kl_ctl_update(rl_kl_ctl *ctl, double current_kl, int64_t n_steps);

#ifdef __cplusplus
}
#endif
#endif
