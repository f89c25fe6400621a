/* workers/actor/lm_ppo.c — the language-model track's PPO loss (loss op
 * "ppo", method update_actor; contract: workers/actor/actor.h): the batch
 * of the model kind's layout + old_logp, advantages (B, K) f32 [+ ref_logp
 * with actor.use_kl_loss], the whole mini-batch's divisors in meta
 * (common/algo/policy_loss.h), the forward at the sampling temperature. */
#include <stdint.h>
#include <string.h>

#include "common/algo/policy_loss.h"
#include "rlrt/error.h"
#include "rlrt/tensor.h"
#include "workers/actor/actor_internal.h"

typedef struct s_ppo {
    const float *old_logp, *ref_logp, *adv; /* (B, K) of the whole call */
    int64_t K;
    double global_tokens;
    rl_ppo_loss_cfg cfg;  /* with the whole mini-batch's divisor in cfg.norm */
    double m_pg, m_clip, m_kl, m_ent, m_klloss, m_dual, tokens;
} s_ppo;

static int s_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    s_ppo *c = arg;
    int64_t B = out->rows, K = out->width[RL_Q_LOGP], row0 = out->row0;
    if (K != c->K)
        return rl_error_set(RL_ESHAPE, "%s: the batch tensors have %lld positions per row, the "
                                       "model's log-probs %lld", RL_ACTOR_UPDATE, (long long)c->K,
                            (long long)K);
    const float *mask = out->mask[RL_Q_LOGP];
    double toks = 0;
    for (int64_t i = 0; i < B * K; i++)
        toks += mask[i];
    const rl_ppo_loss_cfg cfg = c->cfg;
    rl_ppo_loss_out o;
    float *gent = grad->q[RL_Q_ENTROPY];
    int rc = rl_ppo_policy_loss(&cfg, out->q[RL_Q_LOGP], c->old_logp + row0 * K, c->adv + row0 * K,
                                mask, out->q[RL_Q_ENTROPY],
                                c->ref_logp ? c->ref_logp + row0 * K : NULL, B, K,
                                grad->q[RL_Q_LOGP], cfg.entropy_coeff != 0 ? gent : NULL, &o);
    if (rc)
        return rc;
    /* Every mode's divisor is the whole mini-batch's (cfg.norm: its tokens
     * or sequences; sum-norm: Σ over rows / T, with no row divisor), so the
     * micro-batches' and ranks' losses and gradients add up to the mini-
     * batch's: W ranks and any micro-batching give one update. */
    *loss += o.loss;
    /* the aggregated terms are this micro-batch's share of the mini-batch's
     * value; clipfrac and ppo_kl are token means over this micro-batch */
    c->m_pg += o.pg_loss;
    c->m_ent += o.entropy;
    c->m_klloss += o.kl_loss;
    c->m_clip += o.clipfrac * toks;
    c->m_kl += o.ppo_kl * toks;
    c->m_dual += o.clipfrac_lower * toks;
    c->tokens += toks;
    return RL_OK;
}

static int s_prepare(rl_actor_step *s)
{
    s_ppo *c = s->ctx;
    const rl_actor_state *a = s->a;
    const rl_dataproto *in = s->in;
    c->cfg = a->loss;
    int64_t gtok, grows, gseqs;
    if (rl_dataproto_meta_get_int(in, RL_ACTOR_GLOBAL_TOKENS, 0, INT64_MAX, &gtok) ||
        rl_dataproto_meta_get_int(in, RL_ACTOR_GLOBAL_ROWS, 0, INT64_MAX, &grows) ||
        rl_dataproto_meta_get_int(in, RL_ACTOR_GLOBAL_SEQS, 0, INT64_MAX, &gseqs))
        return rl_error_code();
    /* verl's agg_loss divisors for the whole mini-batch: its valid tokens,
     * its non-empty rows (empty rows stay out of the sequence means) */
    if (c->cfg.agg == RL_AGG_TOKEN_MEAN)
        c->cfg.norm = (double)gtok;
    else if (c->cfg.agg != RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM)
        c->cfg.norm = (double)gseqs;
    c->global_tokens = (double)gtok;
    const rl_tensor *old = rl_dataproto_tensor_shaped(in, RL_ACTOR_OLD_LOGP, RL_F32, 2, NULL);
    const int64_t dims[2] = {-1, old ? old->shape[1] : -1};
    const rl_tensor *adv = old ? rl_dataproto_tensor_shaped(in, RL_ACTOR_ADVANTAGES, RL_F32, 2, dims)
                               : NULL;
    if (!adv)
        return rl_error_code();
    const rl_tensor *ref = NULL;
    if (c->cfg.kl_loss_coef != 0 &&
        !(ref = rl_dataproto_tensor_shaped(in, RL_ACTOR_REF_LOGP, RL_F32, 2, dims)))
        return rl_error_wrap(rl_error_code(), "%s", RL_CFG_PATH(&rl_actor_section, rl_actor_config, use_kl_loss));
    c->old_logp = rl_tensor_data(old);
    c->adv = rl_tensor_data(adv);
    c->ref_logp = ref ? rl_tensor_data(ref) : NULL;
    c->K = old->shape[1];
    s->want = RL_Q_BIT(RL_Q_LOGP) | RL_Q_BIT(RL_Q_ENTROPY);
    s->pass.temperature = a->temperature;
    s->loss = s_loss;
    return RL_OK;
}

/* Partial sums: the recipe adds the ranks' values and divides by the
 * global token count; the aggregated terms are shares of the mini-batch's
 * value, so they go out times its tokens (their sum over the ranks over
 * global_tokens is the value itself). */
static json_t *s_reply(const rl_actor_step *s)
{
    const s_ppo *c = s->ctx;
    double g = c->global_tokens;
    return json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", RL_ACTOR_M_PG_LOSS_SUM, c->m_pg * g,
                     RL_ACTOR_M_CLIPFRAC_SUM, c->m_clip, RL_ACTOR_M_PPO_KL_SUM, c->m_kl,
                     RL_ACTOR_M_ENTROPY_SUM, c->m_ent * g, RL_ACTOR_M_KL_LOSS_SUM, c->m_klloss * g,
                     RL_ACTOR_M_DUAL_CLIP_SUM, c->m_dual, RL_ACTOR_M_TOKENS, c->tokens);
}

const rl_actor_loss_op rl_actor_loss_ppo = {RL_ACTOR_LOSS_PPO, RL_ACTOR_UPDATE, sizeof(s_ppo), 0,
    .prepare = s_prepare, .reply = s_reply};
