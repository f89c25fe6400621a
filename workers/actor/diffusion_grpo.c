/* workers/actor/diffusion_grpo.c — the diffusion track's clipped
 * per-timestep GRPO loss (loss op "diffusion_grpo", method update_diffusion;
 * rl_diffusion_grpo_loss, seed 004; contract: workers/actor/actor.h): the
 * kind's recorded chain (step_mask = the trained timesteps) + the sampler's
 * old_logp (B, N) and the advantages (B), normalised by the trained steps
 * of the whole mini-batch (meta RL_ACTOR_GLOBAL_TOKENS); with
 * actor.use_kl_loss the KL to the reference (diffusion_kl.c) adds its
 * gradients before the one FSDP step. */
#include <stdint.h>
#include <stdlib.h>

#include "common/algo/diffusion/diffusion.h"
#include "rlrt/error.h"
#include "rlrt/tensor.h"
#include "workers/actor/actor_internal.h"

typedef struct s_dg {
    const float *old, *adv; /* (B, N), (B) of the whole call */
    int64_t N;
    double global, clip_range, adv_max;
    float *advx;            /* (rows·N) scratch: adv broadcast over the steps */
    double steps, clip, kl, ratio, kl_loss;
} s_dg;

/* The clipped GRPO loss of the trained steps of a micro-batch, normalised by
 * the global step count. */
static int s_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    s_dg *c = arg;
    int64_t N = out->width[RL_Q_LOGP], rows = out->rows, n = rows * N;
    if (N != c->N)
        return rl_error_set(RL_ESHAPE, "%s: %s has %lld steps per row, the chain %lld",
                            RL_ACTOR_UPDATE_DIFFUSION, RL_ACTOR_OLD_LOGP, (long long)c->N,
                            (long long)N);
    const float *mask = out->mask[RL_Q_LOGP];
    double m = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < N; k++) {
            c->advx[r * N + k] = c->adv[out->row0 + r];
            m += mask[r * N + k];
        }
    rl_diffusion_grpo_metrics mt;
    int rc = rl_diffusion_grpo_loss(out->q[RL_Q_LOGP], c->old + out->row0 * N, c->advx, mask, n,
                                    c->clip_range, c->adv_max, grad->q[RL_Q_LOGP], &mt);
    if (rc)
        return rc;
    rl_actor_share(grad->q[RL_Q_LOGP], n, mt.loss, m, c->global, loss);
    c->steps += m;
    c->clip += mt.clip_frac * m;
    c->kl += mt.approx_kl * m;
    c->ratio += mt.ratio_mean * m;
    return RL_OK;
}

static int s_prepare(rl_actor_step *s)
{
    s_dg *c = s->ctx;
    const rl_actor_state *a = s->a;
    int64_t gsteps, B = rl_dataproto_rows(s->in);
    if (rl_dataproto_meta_get_int(s->in, RL_ACTOR_GLOBAL_TOKENS, 1, INT64_MAX, &gsteps))
        return rl_error_code();
    const int64_t d2[2] = {B, -1}, d1[1] = {B};
    const rl_tensor *old = rl_dataproto_tensor_shaped(s->in, RL_ACTOR_OLD_LOGP, RL_F32, 2, d2);
    const rl_tensor *adv = old ? rl_dataproto_tensor_shaped(s->in, RL_ACTOR_ADVANTAGES, RL_F32, 1, d1)
                               : NULL;
    if (!adv)
        return rl_error_code();
    *c = (s_dg){.old = rl_tensor_data(old), .adv = rl_tensor_data(adv), .N = old->shape[1],
                .global = (double)gsteps, .clip_range = a->df.clip_range, .adv_max = a->df.adv_clip_max};
    int64_t mb = a->o.micro_batch > 0 && a->o.micro_batch < B ? a->o.micro_batch : (B ? B : 1);
    if (!(c->advx = malloc(sizeof(float) * (size_t)(mb * (c->N > 0 ? c->N : 1)))))
        return rl_error_set(RL_ENOMEM, "actor/%d: out of memory", a->rank);
    s->want = RL_Q_BIT(RL_Q_LOGP);
    s->loss = s_loss;
    return RL_OK;
}

/* actor.use_kl_loss: + kl_loss_coef·KL to the reference, per trained step */
static int s_extra(rl_actor_step *s)
{
    s_dg *c = s->ctx;
    const rl_actor_state *a = s->a;
    if (!a->o.use_kl_loss || !(a->o.kl_loss_coef > 0))
        return RL_OK;
    return rl_actor_diffusion_kl(s->a, s->in, a->o.kl_loss_coef, c->global, &c->kl_loss);
}

static json_t *s_reply(const rl_actor_step *s)
{
    const s_dg *c = s->ctx;
    return json_pack("{s:f, s:f, s:f, s:f, s:f}", RL_ACTOR_M_TOKENS, c->steps, RL_ACTOR_M_CLIPFRAC_SUM,
                     c->clip, RL_ACTOR_M_PPO_KL_SUM, c->kl, RL_ACTOR_M_RATIO_SUM, c->ratio,
                     RL_ACTOR_M_KL_LOSS_SUM, c->kl_loss);
}

static void s_release(void *ctx)
{
    free(((s_dg *)ctx)->advx);
}

const rl_actor_loss_op rl_actor_loss_diffusion_grpo = {
    RL_ACTOR_LOSS_DIFFUSION_GRPO, RL_ACTOR_UPDATE_DIFFUSION, sizeof(s_dg), 1,
    .prepare = s_prepare, .extra = s_extra, .reply = s_reply, .release = s_release};
