/* common/batch/lm_adv.h — the advantages of a language-model batch (the
 * rlvr recipe's adv phase): the per-token KL to the reference, then the
 * estimator of the table (common/batch/estimators.h) over outcome rewards
 * with the KL in the reward when asked, truncated importance sampling, and
 * the loss mask applied.
 *
 * Masks (common/batch/lm_batch.h): rewards and group baselines use every
 * sampled position (RL_LM_MASK_LENGTHS); the KL is taken where the policy
 * sampled (RL_LM_MASK_SAMPLED) and not at all on guided rows (their tokens
 * are not the policy's: k1/k2/k3 estimate nothing there); positions out of
 * the loss (RL_LM_MASK_LOSS) get advantage 0.
 *
 * Metrics:
 *   actor/reward_kl_penalty     mean KL over the counted positions (rl_lm_kl_tokens)
 *   critic/advantages/{mean,std}  over the loss positions
 *   tis/{weight_mean, ratio_mean, ratio_max, capped_frac, mismatch_kl}  with TIS
 *   and the estimator's own (adv/pro_max_*).
 * Ownership: rl_lm_kl owns its arrays (rl_lm_kl_free); the batch gains the
 * tensor L->advantages (B, R) and, with the KL in the reward, the double
 * column L->kl_penalty. */
#ifndef RLRT_BATCH_LM_ADV_H
#define RLRT_BATCH_LM_ADV_H

#include <stdint.h>

#include "common/algo/kl.h"
#include "common/batch/estimators.h"
#include "common/batch/lm_batch.h"
#include "common/metrics/metrics.h"
#include "rlrt/dataproto.h"

/* The per-token KL between L->old_logp and L->ref_logp. */
typedef struct rl_lm_kl {
    int64_t B, R;
    float *kl;      /* (B, R) the estimate at the positions of `mask` */
    float *sampled; /* (B, R) RL_LM_MASK_SAMPLED */
    float *mask;    /* (B, R) the positions counted: `sampled` without the guided rows */
    double sum, n;  /* the KL summed over `mask` (row order), and its positions */
} rl_lm_kl;

int rl_lm_kl_tokens(const rl_dataproto *dp, const rl_lm_names *L, rl_kl_kind kind, rl_lm_kl *out,
                    rl_metric_set *ms);
void rl_lm_kl_free(rl_lm_kl *k);

typedef struct rl_lm_adv_cfg {
    const rl_estimator *est;
    int64_t n;            /* samples per prompt */
    double gamma;         /* REINFORCE++'s discount */
    int norm_by_std;      /* GRPO: divide by the group std */
    int uniform_scale;    /* REINFORCE Pro Max */
    int kl_in_reward;     /* subtract kl_coef · KL from the token rewards */
    double tis_cap;       /* > 0: advantage × min(exp(old − rollout logp), cap) */
    const char *tis_what; /* how errors about TIS name it (its config key) */
} rl_lm_adv_cfg;

/* Writes L->advantages (B, R) from L->score and the groups L->group; `kl`
 * (NULL: none) with coefficient kl_coef when cfg->kl_in_reward. */
int rl_lm_advantages(rl_dataproto *dp, const rl_lm_names *L, const rl_lm_adv_cfg *cfg,
                     const rl_lm_kl *kl, double kl_coef, rl_metric_set *ms);

#endif
