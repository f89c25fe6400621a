/* lm_adv.c — the KL to the reference and the advantages of a language-model
 * batch (common/batch/lm_adv.h). */
#include "common/batch/lm_adv.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/algo/offpolicy.h"
#include "rlrt/error.h"
#include "rlrt/tensor.h"

void rl_lm_kl_free(rl_lm_kl *k)
{
    if (k->mask != k->sampled)
        free(k->mask);
    free(k->sampled);
    free(k->kl);
    memset(k, 0, sizeof *k);
}

int rl_lm_kl_tokens(const rl_dataproto *dp, const rl_lm_names *L, rl_kl_kind kind, rl_lm_kl *out,
                    rl_metric_set *ms)
{
    memset(out, 0, sizeof *out);
    int64_t B, R;
    float *smask = rl_lm_mask(dp, L, RL_LM_MASK_SAMPLED, &B, &R);
    const float *old = smask ? rl_lm_tokens_f32(dp, L->old_logp, R) : NULL;
    const float *ref = old ? rl_lm_tokens_f32(dp, L->ref_logp, R) : NULL;
    if (!ref) {
        free(smask);
        return rl_error_code();
    }
    *out = (rl_lm_kl){.B = B, .R = R, .sampled = smask, .mask = smask};
    /* a guided row's tokens were not sampled from the policy: no KL there */
    const rl_column *gc = rl_dataproto_column(dp, L->guided);
    if (rl_lm_guided_rows(dp, L) > 0 && !(out->mask = malloc(sizeof(float) * (size_t)(B * R)))) {
        out->mask = smask;
        rl_lm_kl_free(out);
        return rl_error_set(RL_ENOMEM, "out of memory for the KL");
    }
    for (int64_t b = 0; out->mask != smask && b < B; b++) {
        int g = rl_column_i64(gc, b) != 0;
        for (int64_t t = 0; t < R; t++)
            out->mask[b * R + t] = g ? 0.0f : smask[b * R + t];
    }
    if (!(out->kl = malloc(sizeof(float) * (size_t)(B * R > 0 ? B * R : 1)))) {
        rl_lm_kl_free(out);
        return rl_error_set(RL_ENOMEM, "out of memory for the KL");
    }
    int rc = rl_kl_penalty(old, ref, out->mask, B, R, kind, 0, out->kl, NULL);
    for (int64_t i = 0; !rc && i < B * R; i++)
        if (out->mask[i]) {
            out->sum += out->kl[i];
            out->n++;
        }
    if (!rc && out->n > 0)
        rl_metric_set_put(ms, RL_M_KL_PENALTY, out->sum / out->n);
    if (rc)
        rl_lm_kl_free(out);
    return rc;
}

/* Truncated importance sampling (verl's TIS): each token's advantage times
 * min(exp(old_logp − rollout_logp), cap), which equals weighting its policy
 * loss (common/algo/offpolicy.h). */
static int s_tis(const rl_dataproto *dp, const rl_lm_names *L, const rl_lm_adv_cfg *cfg,
                 const float *mask, float *adv, int64_t B, int64_t R, rl_metric_set *ms)
{
    const float *old = rl_lm_tokens_f32(dp, L->old_logp, R);
    const float *roll = old ? rl_lm_tokens_f32(dp, L->rollout_logp, R) : NULL;
    float *w = roll ? malloc(sizeof(float) * (size_t)(B * R > 0 ? B * R : 1)) : NULL;
    if (!roll)
        return rl_error_wrap(rl_error_code(), "%s", cfg->tis_what);
    if (!w)
        return rl_error_set(RL_ENOMEM, "TIS: out of memory");
    rl_tis_stats st;
    int rc = rl_tis_weights(old, roll, mask, B, R, cfg->tis_cap, w, &st);
    for (int64_t i = 0; !rc && i < B * R; i++)
        adv[i] *= w[i];
    free(w);
    if (rc)
        return rc;
    rl_metric_set_put(ms, "tis/weight_mean", st.mean);
    rl_metric_set_put(ms, "tis/ratio_mean", st.raw_mean);
    rl_metric_set_put(ms, "tis/ratio_max", st.raw_max);
    rl_metric_set_put(ms, "tis/capped_frac", st.capped_frac);
    rl_metric_set_put(ms, "tis/mismatch_kl", st.mismatch_kl);
    return RL_OK;
}

/* Each row's KL term in the reward (for the sample dumps). */
static int s_kl_column(rl_dataproto *dp, const rl_lm_names *L, const rl_lm_kl *k, double kl_coef)
{
    rl_column *kc = rl_dataproto_new_column(dp, L->kl_penalty, RL_COL_DOUBLE);
    int rc = kc ? RL_OK : rl_error_code();
    for (int64_t b = 0; !rc && b < k->B; b++) {
        double s = 0;
        for (int64_t t = 0; t < k->R; t++)
            s += (double)k->sampled[b * k->R + t] * k->kl[b * k->R + t];
        rc = rl_column_set_f64(kc, b, kl_coef * s);
    }
    return rc;
}

int rl_lm_advantages(rl_dataproto *dp, const rl_lm_names *L, const rl_lm_adv_cfg *cfg,
                     const rl_lm_kl *kl, double kl_coef, rl_metric_set *ms)
{
    int64_t B, R;
    float *mask = rl_lm_mask(dp, L, RL_LM_MASK_LENGTHS, &B, &R);
    float *lmask = mask && rl_dataproto_tensor(dp, L->loss_mask)
                       ? rl_lm_mask(dp, L, RL_LM_MASK_LOSS, &B, &R)
                       : mask;
    const float *score = lmask ? rl_lm_rows_f32(dp, L->score) : NULL;
    int64_t *group = score ? rl_lm_column_i64(dp, L->group) : NULL;
    rl_tensor *at = group ? rl_dataproto_new_tensor(dp, L->advantages, RL_F32, 2, (int64_t[]){B, R})
                          : NULL;
    int rc = at ? RL_OK : rl_error_code();
    float *adv = at ? rl_tensor_data(at) : NULL;
    if (!rc) {
        rl_adv_input in = {.scores = score, .kl = kl ? kl->kl : NULL,
                           .kl_coef = cfg->kl_in_reward ? kl_coef : 0.0, .mask = mask,
                           .group = group, .B = B, .R = R, .n = cfg->n, .gamma = cfg->gamma,
                           .norm_by_std = cfg->norm_by_std, .uniform_scale = cfg->uniform_scale};
        rc = cfg->est->run(&in, adv, ms);
    }
    if (!rc && cfg->kl_in_reward && kl)
        rc = s_kl_column(dp, L, kl, kl_coef);
    if (!rc && cfg->tis_cap > 0)
        rc = s_tis(dp, L, cfg, lmask, adv, B, R, ms);
    for (int64_t i = 0; !rc && lmask != mask && i < B * R; i++)
        adv[i] *= lmask[i];
    double s = 0, s2 = 0, n = 0;
    for (int64_t i = 0; !rc && i < B * R; i++)
        if (lmask[i]) {
            s += adv[i];
            s2 += (double)adv[i] * adv[i];
            n++;
        }
    if (!rc && n > 0) {
        rl_metric_set_put(ms, "critic/advantages/mean", s / n);
        rl_metric_set_put(ms, "critic/advantages/std", sqrt(fmax(s2 / n - (s / n) * (s / n), 0)));
    }
    free(group);
    if (lmask != mask)
        free(lmask);
    free(mask);
    return rc;
}
