/* common/algo/policy_loss.h — PPO clipped policy loss with its gradient.
 *
 * Purpose: the actor loss of verl (compute_policy_loss + agg_loss), with
 * separate lower/upper clip ratios, dual-clip, the four loss aggregation
 * modes, an entropy bonus and a KL loss, returning the loss, the gradient
 * w.r.t. the new log-probs (and w.r.t. the entropy when an entropy term is
 * used) and the usual metrics.
 *
 * Per token (nk = clamp(logp − old_logp, −20, 20), ratio = exp(nk)):
 *   L1 = −A·ratio, L2 = −A·clamp(ratio, 1 − clip_low, 1 + clip_high),
 *   Lc = max(L1, L2); with dual-clip (clip_ratio_c > 1) and A < 0:
 *   L = min(−A·c, Lc); else L = Lc.
 * Full loss = agg(L) − entropy_coeff·agg(entropy) + kl_loss_coef·agg(kl)
 * where kl is an estimator of kl.h on (logp, ref_logp).
 * Aggregations over the mask m (f32 0/1, (B, T)), as verl's agg_loss
 * (verl/trainer/ppo/core_algos.py); n_b = Σ_t m[b, t], and a row with
 * n_b = 0 (all padding) is left out of the sequence means:
 *   TOKEN_MEAN            Σ L·m / N,  N = norm, else Σ m       (N = 0 → 0)
 *   SEQ_MEAN_TOKEN_SUM    Σ_{b: n_b>0} Σ_t L·m / S
 *   SEQ_MEAN_TOKEN_MEAN   Σ_{b: n_b>0} (Σ_t L·m / (n_b + 1e-8)) / S
 *                         S = norm, else #{b : n_b > 0}        (S = 0 → 0)
 *   SEQ_MEAN_TOKEN_SUM_NORM  Σ_b Σ_t L·m / norm  (norm = T unless given)
 * norm = 0 means "this batch's own count". A caller that splits one
 * mini-batch over micro-batches or ranks and SUMS the gradients passes the
 * count of the whole mini-batch: its valid tokens for TOKEN_MEAN (verl's
 * batch_num_tokens), its row count for the seq-mean modes (verl's
 * global_batch_size, which verl's trainer sets to the mini-batch's rows,
 * padding rows included; pass the mini-batch's non-empty rows instead to
 * keep padding rows out of the divisor too). verl multiplies by dp_size
 * because its data-parallel gradients are averaged; rlrt's FSDP
 * reduce-scatter sums, so no such factor exists here.
 *
 * Gradients follow torch autograd conventions: clamp passes the gradient at
 * its inclusive bounds, a tie in max/min splits it in half. Metrics are
 * token means over valid positions, whatever the aggregation (verl):
 * clipfrac = mean[L2 > L1], ppo_kl = mean[−nk], clipfrac_lower (dual-clip
 * fraction) = mean[Lc > −A·c and A < 0].
 *
 * Masked-out positions are not read and get gradient 0. NaN/Inf at a valid
 * position of any input → RL_ENUMERIC naming the array and [b, t].
 * Per-token arithmetic of the PPO loss is f32 (exp with < 2e-7 relative
 * error); every sum is in double, per row, then over rows in row order. The
 * token loop is built for AVX2 and for baseline x86-64 and one is chosen at
 * load time, so results are bit-identical for any OpenMP thread count on one
 * machine and agree across machines to f32 rounding.
 * Ownership: the caller owns every array; nothing is retained.
 */
#ifndef RLRT_ALGO_POLICY_LOSS_H
#define RLRT_ALGO_POLICY_LOSS_H

#include <stdint.h>

#include "common/algo/kl.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum rl_loss_agg {
    RL_AGG_TOKEN_MEAN = 0,
    RL_AGG_SEQ_MEAN_TOKEN_SUM = 1,
    RL_AGG_SEQ_MEAN_TOKEN_MEAN = 2,
    RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM = 3
} rl_loss_agg;

/* Parses "token-mean", "seq-mean-token-sum", "seq-mean-token-mean",
 * "seq-mean-token-sum-norm". */
int rl_loss_agg_parse(const char *name, rl_loss_agg *out);

typedef struct rl_ppo_loss_cfg {
    double clip_ratio_low;   /* default 0.2 */
    double clip_ratio_high;  /* default 0.2 */
    double clip_ratio_c;     /* dual-clip c > 1 (default 3); 0 disables */
    rl_loss_agg agg;
    double norm;             /* 0: default divisor (see above) */
    double entropy_coeff;    /* 0: no entropy term (entropy may be NULL) */
    double kl_loss_coef;     /* 0: no KL loss (ref_logp may be NULL) */
    rl_kl_kind kl_kind;      /* estimator of the KL loss (default K3) */
    double kl_clamp;         /* see kl.h; 0: none */
} rl_ppo_loss_cfg;

void rl_ppo_loss_cfg_default(rl_ppo_loss_cfg *cfg);

typedef struct rl_ppo_loss_out {
    double loss;            /* the full loss */
    double pg_loss;         /* agg(L) */
    double entropy;         /* agg(entropy) (0 when unused) */
    double kl_loss;         /* agg(kl) (0 when unused) */
    double clipfrac;
    double ppo_kl;
    double clipfrac_lower;  /* dual-clip fraction */
    double n_tokens;        /* Σ m */
} rl_ppo_loss_out;

/* logp, old_logp, adv, mask: (B, T). entropy (B, T) or NULL; ref_logp
 * (B, T) or NULL. grad_logp (B, T) output: d loss / d logp. grad_entropy
 * (B, T) or NULL: d loss / d entropy. out: loss and metrics. */
int rl_ppo_policy_loss(const rl_ppo_loss_cfg *cfg, const float *logp,
                       const float *old_logp, const float *adv,
                       const float *mask, const float *entropy,
                       const float *ref_logp, int64_t B, int64_t T,
                       float *grad_logp, float *grad_entropy,
                       rl_ppo_loss_out *out);

/* Aggregates a (B, T) per-token value with one mode (the agg_loss of verl);
 * weights (B, T) or NULL receives d result / d value[b, t]. */
int rl_loss_aggregate(const float *value, const float *mask, int64_t B,
                      int64_t T, rl_loss_agg agg, double norm, double *result,
                      float *weights);

/* Clipped value (critic) loss of PPO (verl compute_value_loss):
 * vclip = clamp(vpred, values − cliprange, values + cliprange),
 * L = max((vpred − returns)², (vclip − returns)²), loss = ½·agg(L).
 * vpred, values, returns, mask (B, T); grad_vpred (B, T) output; *loss and
 * *clipfrac (token mean of [(vclip − R)² > (vpred − R)²]) outputs.
 * cliprange ≤ 0 disables clipping. NaN/Inf at a valid position →
 * RL_ENUMERIC naming the array. */
int rl_value_loss(const float *vpred, const float *values, const float *returns,
                  const float *mask, int64_t B, int64_t T, double cliprange,
                  rl_loss_agg agg, double norm, double *loss, double *clipfrac,
                  float *grad_vpred);

/* Entropy of each row of logits (the entropy the bonus is computed from):
 * H = logsumexp(z) − Σ_v softmax(z)_v·z_v. logits (N, V), entropy (N).
 * RL_ENUMERIC names the first non-finite logit. */
int rl_entropy_from_logits(const float *logits, int64_t N, int64_t V, float *entropy);

/* Backward of rl_entropy_from_logits: grad_logits[n, v] =
 * grad_entropy[n] · (−p_v·(z_v − Σ_u p_u·z_u)). grad_logits (N, V) is
 * overwritten (not accumulated). */
int rl_entropy_backward(const float *logits, const float *grad_entropy, int64_t N,
                        int64_t V, float *grad_logits);

#ifdef __cplusplus
}
#endif
#endif
