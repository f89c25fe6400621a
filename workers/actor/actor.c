/* workers/actor/actor.c — the actor role (contract: workers/actor/actor.h): the
 * trainable policy and a frozen reference copy, both rl_models of the job's
 * model.type, and FSDP over the flat parameter buffer.
 *
 * FSDP (full shard) on W actor ranks: rank r owns the shard
 * rl_shard_range(P, W, r) of the AdamW state. Each step a rank runs forward
 * and backward on its part of the batch (dp_compute chunks it), then
 * reduce-scatter sums the gradients into its shard, the clip norm is
 * all-reduced, AdamW updates the shard, and all-gather rebuilds the full
 * parameters for the next forward. Losses are normalised by GLOBAL counts the
 * recipe passes, so W ranks compute the same update as one rank.
 *
 * The config (actor.*, rollout.temperature, trainer.seed) is read
 * and range-checked once, in init (rl_actor_config_read); calls carry only
 * per-call arguments. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workers/roles.h"
#include "common/algo/diffusion/diffusion.h"
#include "common/algo/policy_loss.h"
#include "common/nn/engine/checkpoint.h"
#include "rlrt/nn/model.h"
#include "common/nn/engine/optim.h"
#include "rlrt/error.h"
#include "rlrt/dtype.h"
#include "rlrt/nn/params.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "workers/actor/actor.h"
#include "rlrt/runtime/channel.h"
#include "rlrt/runtime/collective.h"
#include "workers/actor/actor_internal.h"
#include "workers/flow_rl.h"

typedef rl_actor_state s_actor;

rl_actor_state *rl_actor_get(rl_worker_ctx *ctx, const char *method)
{
    s_actor *a = ctx->user;
    if (!a || !a->policy) {
        rl_error_set(RL_ESTATE, "%s: init_model has not run on actor/%d", method, ctx->rank);
        return NULL;
    }
    return a;
}

static void s_free_models(s_actor *a)
{
    rl_model_free(a->policy);
    rl_model_free(a->ref);
    rl_comm_destroy(a->comm);
    free(a->shard_grad);
    rl_adamw_free(a->opt);
    rl_weight_sender_free(a->wsend);
    a->policy = a->ref = NULL;
    a->comm = NULL;
    a->shard_grad = NULL;
    a->opt = NULL;
    a->wsend = NULL;
}

/* Reads and checks the config (rl_actor_config_read: the same table the
 * driver checked before starting us). */
static int s_init(rl_worker_ctx *ctx)
{
    s_actor *a = calloc(1, sizeof *a);
    if (!a)
        return rl_error_set(RL_ENOMEM, "actor: out of memory");
    int rc = rl_actor_config_read(ctx->config, &a->o);
    if (rc) {
        free(a);
        return rc;
    }
    if (rl_config_has(ctx->config, "actor.clip_range")) {
        if ((rc = rl_actor_diffusion_config_read(ctx->config, &a->df))) {
            free(a);
            return rc;
        }
        a->diffusion = 1;
    }
    rl_ppo_loss_cfg_default(&a->loss);
    a->loss.agg = a->o.loss_agg;
    a->loss.kl_kind = a->o.kl_loss_type;
    a->loss.clip_ratio_low = a->o.clip_low;
    a->loss.clip_ratio_high = a->o.clip_high;
    a->loss.clip_ratio_c = a->o.clip_c;
    a->loss.entropy_coeff = a->o.entropy_coeff;
    a->loss.kl_loss_coef = a->o.use_kl_loss ? a->o.kl_loss_coef : 0.0;
    memset(&a->lr, 0, sizeof a->lr);
    a->lr.kind = a->o.lr_schedule;
    a->lr.base_lr = a->o.lr;
    a->lr.warmup_steps = a->o.warmup;
    a->lr.total_steps = a->o.total_training_steps;
    ctx->user = a;
    return RL_OK;
}

static void s_fini(rl_worker_ctx *ctx)
{
    s_actor *a = ctx->user;
    if (a)
        s_free_models(a);
    free(a);
    ctx->user = NULL;
}

/* ---- set-up ------------------------------------------------------------------------------ */

/* On rank 0 (as ncclGetUniqueId): the id of a communicator whose rendezvous
 * endpoint is on this host; the recipe hands its text to every rank. */
static int s_comm_id_create(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)ctx;
    const char *host = rl_dataproto_meta_str(in, RL_ACTOR_HOST, NULL);
    if (!host)
        return rl_error_code();
    char ep[300];
    snprintf(ep, sizeof ep, "tcp://%s", host);
    rl_comm_id id;
    if (rl_comm_id_create(&id, ep))
        return rl_error_code();
    *out = rl_dataproto_new_meta(json_pack("{s:s}", RL_ACTOR_COMM_ID, rl_comm_id_string(&id)));
    return *out ? RL_OK : rl_error_code();
}

/* lr × scale for the value head's views (rlrt/nn/model.h: value_head.*). */
static int s_set_value_lr(const rl_config *job, rl_adamw *opt, const rl_param_manifest *man, double scale)
{
    double *sc = malloc(sizeof(double) * ((size_t)man->count + 1));
    if (!sc)
        return rl_error_set(RL_ENOMEM, "out of memory");
    int found = 0;
    for (int i = 0; i < man->count; i++) {
        int v = strncmp(man->views[i].name, RL_MODEL_VALUE_HEAD_PREFIX, strlen(RL_MODEL_VALUE_HEAD_PREFIX)) == 0;
        sc[i] = v ? scale : 1.0;
        found += v;
    }
    int rc = found ? rl_adamw_set_lr_scale(opt, man, sc)
                   : rl_config_error_at(job, "actor.optim.value_lr", RL_ECONFIG,
                                        "a value head's lr, but the model has no value head (no view named %s*)",
                                        RL_MODEL_VALUE_HEAD_PREFIX);
    free(sc);
    return rc;
}


static int s_init_model(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_actor *a = ctx->user;
    s_free_models(a);
    const rl_config *job = ctx->config;
    a->policy = rl_model_build(job, (uint64_t)a->o.seed);
    a->ref = a->policy ? rl_model_build(job, (uint64_t)a->o.seed) : NULL;
    if (!a->ref)
        return rl_error_wrap(rl_error_code(), "actor/%d: building the model", ctx->rank);
    a->P = rl_model_num_params(a->policy);
    a->W = ctx->world_size;
    a->rank = ctx->rank;
    if (a->W > 1) {
        const char *id_text = rl_dataproto_meta_str(in, RL_ACTOR_COMM_ID, NULL);
        rl_comm_id id;
        if (!id_text)
            return rl_error_wrap(RL_EINVAL, "%d actor ranks need a communicator", a->W);
        if (rl_comm_id_parse(&id, id_text))
            return rl_error_code();
        rl_comm_options co;
        rl_comm_options_default(&co);
        co.timeout_s = a->o.comm_timeout_s;
        a->comm = rl_comm_init_rank(&id, a->W, a->rank, &co);
        if (!a->comm)
            return rl_error_wrap(rl_error_code(), "actor/%d: joining the FSDP communicator", a->rank);
    }
    rl_shard_range(a->P, a->W, a->rank, &a->begin, &a->end);
    a->shard_grad = malloc(sizeof(float) * (size_t)(a->end - a->begin + 1));
    if (!a->shard_grad)
        return rl_error_set(RL_ENOMEM, "actor/%d: out of memory for the gradient shard", a->rank);
    rl_adamw_config oc = rl_adamw_config_default();
    oc.weight_decay = a->o.weight_decay;
    oc.beta1 = a->o.beta1;
    oc.beta2 = a->o.beta2;
    oc.eps = a->o.eps;
    const rl_param_manifest *man = rl_model_manifest(a->policy);
    a->opt = rl_adamw_new(&oc, man, a->begin, a->end);
    if (!a->opt)
        return rl_error_code();
    int rc = rl_adamw_set_no_decay(a->opt, man, rl_param_pred_no_decay_1d, NULL);
    if (!rc && a->o.value_lr > 0) /* the critic's own lr (RLinf's value_lr): views value_head.* */
        rc = s_set_value_lr(job, a->opt, man, a->o.value_lr / a->o.lr);
    return rc;
}

/* After the gradients of one optimiser step are accumulated: reduce-scatter,
 * global clip at `clip` (0: off), AdamW on the shard, all-gather. */
int rl_actor_fsdp_step(rl_actor_state *a, double clip, double *grad_norm, double *lr_out)
{
    float *g = rl_model_grads(a->policy), *p = rl_model_params(a->policy);
    int64_t n = a->end - a->begin;
    float *gs = g + a->begin;
    int rc;
    if (a->comm) {
        if ((rc = rl_comm_reduce_scatter(a->comm, g, a->shard_grad, a->P, RL_REDUCE_SUM)))
            return rc;
        gs = a->shard_grad;
    }
    double sumsq = rl_grad_sumsq(gs, n);
    if (a->comm) { /* the shards' sums of squares, carried exactly as a float pair */
        float part[2] = {(float)sumsq, (float)(sumsq - (double)(float)sumsq)}, tot[2];
        if ((rc = rl_comm_all_reduce(a->comm, part, tot, 2, RL_REDUCE_SUM)))
            return rc;
        sumsq = (double)tot[0] + (double)tot[1];
    }
    float norm = 0;
    if ((rc = rl_grad_clip_apply(gs, n, sumsq, (float)clip, &norm)))
        return rc;
    double lr = rl_lr_at(&a->lr, a->opt->step);
    if ((rc = rl_adamw_step(a->opt, lr, p + a->begin, gs)))
        return rc;
    if (a->comm && (rc = rl_comm_all_gather(a->comm, p + a->begin, p, a->P)))
        return rc;
    rl_model_zero_grad(a->policy);
    *grad_norm = norm;
    *lr_out = lr;
    return RL_OK;
}

static rl_model_pass s_pass(const s_actor *a)
{
    rl_model_pass p = {.temperature = a->o.temperature, .micro_batch = a->o.micro_batch};
    return p;
}

/* ---- log-probs ------------------------------------------------------------------------------ */

static int s_compute_log_prob(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_COMPUTE_LOG_PROB);
    if (!a)
        return rl_error_code();
    const char *which = rl_dataproto_meta_str(in, RL_ACTOR_WHICH, RL_ACTOR_WHICH_POLICY);
    int64_t want_entropy;
    if (rl_dataproto_meta_int(in, RL_ACTOR_WANT_ENTROPY, 0, &want_entropy))
        return rl_error_code();
    rl_model *m;
    if (strcmp(which, RL_ACTOR_WHICH_POLICY) == 0)
        m = a->policy;
    else if (strcmp(which, RL_ACTOR_WHICH_REF) == 0)
        m = a->ref;
    else
        return rl_error_set(RL_EINVAL, "argument '%s' must be '%s' or '%s', got '%s'", RL_ACTOR_WHICH,
                            RL_ACTOR_WHICH_POLICY, RL_ACTOR_WHICH_REF, which);
    unsigned want = RL_Q_BIT(RL_Q_LOGP) | (want_entropy ? RL_Q_BIT(RL_Q_ENTROPY) : 0);
    rl_model_pass pass = s_pass(a);
    /* the forward's tensors are named like the contract's (logp, entropy) */
    return rl_model_forward(m, in, want, &pass, out);
}

/* ---- PPO update --------------------------------------------------------------------------- */

typedef struct s_ppo_ctx {
    const float *old_logp, *ref_logp, *adv; /* (B, K) of the whole call */
    int64_t K;
    rl_ppo_loss_cfg cfg;  /* with the whole mini-batch's divisor in cfg.norm */
    double m_pg, m_clip, m_kl, m_ent, m_klloss, m_dual, tokens;
} s_ppo_ctx;

static int s_ppo_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    s_ppo_ctx *c = arg;
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

static int s_update_actor(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_UPDATE);
    if (!a)
        return rl_error_code();
    s_ppo_ctx c;
    memset(&c, 0, sizeof c);
    c.cfg = a->loss;
    int64_t gtok, grows, gseqs;
    if (rl_dataproto_meta_get_int(in, RL_ACTOR_GLOBAL_TOKENS, 0, INT64_MAX, &gtok) ||
        rl_dataproto_meta_get_int(in, RL_ACTOR_GLOBAL_ROWS, 0, INT64_MAX, &grows) ||
        rl_dataproto_meta_get_int(in, RL_ACTOR_GLOBAL_SEQS, 0, INT64_MAX, &gseqs))
        return rl_error_code();
    /* verl's agg_loss divisors for the whole mini-batch: its valid tokens,
     * its non-empty rows (empty rows stay out of the sequence means) */
    if (c.cfg.agg == RL_AGG_TOKEN_MEAN)
        c.cfg.norm = (double)gtok;
    else if (c.cfg.agg != RL_AGG_SEQ_MEAN_TOKEN_SUM_NORM)
        c.cfg.norm = (double)gseqs;
    const rl_tensor *old = rl_dataproto_tensor_shaped(in, RL_ACTOR_OLD_LOGP, RL_F32, 2, NULL);
    const int64_t dims[2] = {-1, old ? old->shape[1] : -1};
    const rl_tensor *adv = old ? rl_dataproto_tensor_shaped(in, RL_ACTOR_ADVANTAGES, RL_F32, 2, dims)
                               : NULL;
    if (!adv)
        return rl_error_code();
    const rl_tensor *ref = NULL;
    if (c.cfg.kl_loss_coef != 0 &&
        !(ref = rl_dataproto_tensor_shaped(in, RL_ACTOR_REF_LOGP, RL_F32, 2, dims)))
        return rl_error_wrap(rl_error_code(), "actor.use_kl_loss");
    c.old_logp = rl_tensor_data(old);
    c.adv = rl_tensor_data(adv);
    c.ref_logp = ref ? rl_tensor_data(ref) : NULL;
    c.K = old->shape[1];
    double loss = 0, gnorm = 0, lr = 0;
    rl_model_pass pass = s_pass(a);
    int rc = rl_model_forward_backward(a->policy, in, RL_Q_BIT(RL_Q_LOGP) | RL_Q_BIT(RL_Q_ENTROPY),
                                       &pass, s_ppo_loss, &c, &loss);
    /* every rank takes part in the collectives, even with an empty chunk */
    if (!rc)
        rc = rl_actor_fsdp_step(a, a->o.grad_clip, &gnorm, &lr);
    if (rc)
        return rl_error_wrap(rc, "actor/%d", ctx->rank);
    /* partial sums: the recipe adds the ranks' values and divides by the
     * global token count; the aggregated terms are shares of the mini-batch's
     * value, so they go out times its tokens (their sum over the ranks over
     * gtok is the value itself) */
    double g = (double)gtok;
    *out = rl_dataproto_new_meta(json_pack(
        "{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", RL_ACTOR_M_LOSS, loss,
        RL_ACTOR_M_PG_LOSS_SUM, c.m_pg * g, RL_ACTOR_M_CLIPFRAC_SUM, c.m_clip, RL_ACTOR_M_PPO_KL_SUM,
        c.m_kl, RL_ACTOR_M_ENTROPY_SUM, c.m_ent * g, RL_ACTOR_M_KL_LOSS_SUM, c.m_klloss * g,
        RL_ACTOR_M_DUAL_CLIP_SUM, c.m_dual, RL_ACTOR_M_TOKENS, c.tokens, RL_ACTOR_M_GRAD_NORM,
        gnorm, RL_ACTOR_M_LR, lr));
    return *out ? RL_OK : rl_error_code();
}

/* ---- supervised step ---------------------------------------------------------------------------- */

typedef struct s_sft_ctx {
    double global_tokens, tokens;
} s_sft_ctx;

/* Masked NLL of the response positions, normalised by the global count. */
static int s_sft_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    s_sft_ctx *c = arg;
    int64_t n = out->rows * out->width[RL_Q_LOGP];
    const float *lp = out->q[RL_Q_LOGP], *mask = out->mask[RL_Q_LOGP];
    for (int64_t i = 0; i < n; i++) {
        if (!mask[i])
            continue;
        *loss -= lp[i] / c->global_tokens;
        grad->q[RL_Q_LOGP][i] = (float)(-1.0 / c->global_tokens);
        c->tokens += 1;
    }
    return RL_OK;
}

static int s_sft_step(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_SFT_STEP);
    if (!a)
        return rl_error_code();
    int64_t gtok;
    if (rl_dataproto_meta_get_int(in, RL_ACTOR_GLOBAL_TOKENS, 1, INT64_MAX, &gtok))
        return rl_error_code();
    s_sft_ctx c = {(double)gtok, 0};
    double loss = 0, gnorm = 0, lr = 0;
    rl_model_pass pass = {.temperature = 1.0, .micro_batch = a->o.micro_batch};
    int rc = rl_model_forward_backward(a->policy, in, RL_Q_BIT(RL_Q_LOGP), &pass, s_sft_loss, &c,
                                       &loss);
    if (!rc)
        rc = rl_actor_fsdp_step(a, a->o.grad_clip, &gnorm, &lr);
    if (rc)
        return rl_error_wrap(rc, "actor/%d", ctx->rank);
    *out = rl_dataproto_new_meta(json_pack("{s:f, s:f, s:f, s:f}", RL_ACTOR_M_LOSS, loss,
                                           RL_ACTOR_M_TOKENS, c.tokens, RL_ACTOR_M_GRAD_NORM, gnorm,
                                           RL_ACTOR_M_LR, lr));
    return *out ? RL_OK : rl_error_code();
}

/* ---- diffusion: flow matching and the per-timestep GRPO update ------------------------------------- */

static s_actor *s_get_diffusion(rl_worker_ctx *ctx, const char *method)
{
    s_actor *a = rl_actor_get(ctx, method);
    if (a && !a->diffusion) {
        rl_error_set(RL_ESTATE, "%s: the job has no diffusion section (actor.clip_range, ...: "
                                "RL_ACTOR_DIFFUSION_DEFAULTS)", method);
        return NULL;
    }
    return a;
}

int rl_actor_fm_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    rl_actor_fm_ctx *c = arg;
    int64_t D = out->width[RL_Q_VELOCITY], n = out->rows * D;
    if (D != c->D) /* the target is (B, c->D): indexed with the model's width it would be overread */
        return rl_error_set(RL_ESHAPE, "tensor '%s': expected %lld floats per row (the model's "
                                       "velocity), got %lld", c->name, (long long)D, (long long)c->D);
    const float *v = out->q[RL_Q_VELOCITY], *t = c->target + out->row0 * D;
    double s = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)v[i] - t[i];
        s += d * d;
        grad->q[RL_Q_VELOCITY][i] = (float)(2.0 * d / c->norm);
    }
    *loss += s / c->norm;
    return RL_OK;
}

static int s_flow_step(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = s_get_diffusion(ctx, RL_ACTOR_FLOW_STEP);
    if (!a)
        return rl_error_code();
    int64_t grows;
    if (rl_dataproto_meta_get_int(in, RL_ACTOR_GLOBAL_ROWS, 1, INT64_MAX, &grows))
        return rl_error_code();
    const int64_t dims[2] = {rl_dataproto_rows(in), -1};
    const rl_tensor *t = rl_dataproto_tensor_shaped(in, RL_ACTOR_VELOCITY_TARGET, RL_F32, 2, dims);
    if (!t)
        return rl_error_code();
    rl_actor_fm_ctx c = {rl_tensor_data((rl_tensor *)t), (double)grows * (double)t->shape[1],
                         t->shape[1], RL_ACTOR_VELOCITY_TARGET};
    for (int64_t i = 0; i < t->shape[0] * t->shape[1]; i++)
        if (!isfinite(c.target[i]))
            return rl_error_set(RL_ENUMERIC, "tensor '%s' holds %g at %lld", RL_ACTOR_VELOCITY_TARGET,
                                (double)c.target[i], (long long)i);
    double loss = 0, gnorm = 0, lr = 0;
    rl_model_pass pass = {.temperature = 1.0, .micro_batch = a->o.micro_batch};
    int rc = rl_model_forward_backward(a->policy, in, RL_Q_BIT(RL_Q_VELOCITY), &pass, rl_actor_fm_loss, &c,
                                       &loss);
    /* every rank takes part in the collectives, even after an error of its
     * own (then with no gradient: the call fails anyway) */
    if (rc)
        rl_model_zero_grad(a->policy);
    int rc2 = rl_actor_fsdp_step(a, a->df.max_grad_norm, &gnorm, &lr);
    if (rc || rc2)
        return rl_error_wrap(rc ? rc : rc2, "actor/%d", ctx->rank);
    *out = rl_dataproto_new_meta(json_pack("{s:f, s:f, s:f}", RL_ACTOR_M_LOSS, loss,
                                           RL_ACTOR_M_GRAD_NORM, gnorm, RL_ACTOR_M_LR, lr));
    return *out ? RL_OK : rl_error_code();
}

typedef struct s_dg_ctx {
    const float *old, *adv; /* (B, N), (B) of the whole call */
    int64_t N;
    double global, clip_range, adv_max;
    float *advx;            /* (rows·N) scratch: adv broadcast over the steps */
    double steps, clip, kl, ratio;
} s_dg_ctx;

/* The clipped GRPO loss of the trained steps of a micro-batch, normalised by
 * the global step count. */
static int s_dg_loss(void *arg, const rl_model_io *out, rl_model_io *grad, double *loss)
{
    s_dg_ctx *c = arg;
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
    double scale = m / c->global; /* local mean → share of the global mean */
    for (int64_t i = 0; i < n; i++)
        grad->q[RL_Q_LOGP][i] = (float)(grad->q[RL_Q_LOGP][i] * scale);
    *loss += mt.loss * scale;
    c->steps += m;
    c->clip += mt.clip_frac * m;
    c->kl += mt.approx_kl * m;
    c->ratio += mt.ratio_mean * m;
    return RL_OK;
}

static int s_update_diffusion(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = s_get_diffusion(ctx, RL_ACTOR_UPDATE_DIFFUSION);
    if (!a)
        return rl_error_code();
    int64_t gsteps, B = rl_dataproto_rows(in);
    if (rl_dataproto_meta_get_int(in, RL_ACTOR_GLOBAL_TOKENS, 1, INT64_MAX, &gsteps))
        return rl_error_code();
    const int64_t d2[2] = {B, -1}, d1[1] = {B};
    const rl_tensor *old = rl_dataproto_tensor_shaped(in, RL_ACTOR_OLD_LOGP, RL_F32, 2, d2);
    const rl_tensor *adv = old ? rl_dataproto_tensor_shaped(in, RL_ACTOR_ADVANTAGES, RL_F32, 1, d1)
                               : NULL;
    if (!adv)
        return rl_error_code();
    s_dg_ctx c = {.old = rl_tensor_data((rl_tensor *)old), .adv = rl_tensor_data((rl_tensor *)adv),
                  .N = old->shape[1], .global = (double)gsteps, .clip_range = a->df.clip_range,
                  .adv_max = a->df.adv_clip_max};
    int64_t mb = a->o.micro_batch > 0 && a->o.micro_batch < B ? a->o.micro_batch : (B ? B : 1);
    c.advx = malloc(sizeof(float) * (size_t)(mb * (c.N > 0 ? c.N : 1)));
    if (!c.advx)
        return rl_error_set(RL_ENOMEM, "actor/%d: out of memory", ctx->rank);
    double loss = 0, gnorm = 0, lr = 0;
    rl_model_pass pass = {.temperature = 1.0, .micro_batch = a->o.micro_batch};
    int rc = rl_model_forward_backward(a->policy, in, RL_Q_BIT(RL_Q_LOGP), &pass, s_dg_loss, &c,
                                       &loss);
    free(c.advx);
    double kl = 0; /* actor.use_kl_loss: + kl_loss_coef·KL to the reference, per trained step */
    if (!rc && a->o.use_kl_loss && a->o.kl_loss_coef > 0)
        rc = rl_actor_diffusion_kl(a, in, a->o.kl_loss_coef, (double)gsteps, &kl);
    if (rc)
        rl_model_zero_grad(a->policy);
    int rc2 = rl_actor_fsdp_step(a, a->df.max_grad_norm, &gnorm, &lr);
    if (rc || rc2)
        return rl_error_wrap(rc ? rc : rc2, "actor/%d", ctx->rank);
    *out = rl_dataproto_new_meta(json_pack(
        "{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", RL_ACTOR_M_LOSS, loss, RL_ACTOR_M_TOKENS,
        c.steps, RL_ACTOR_M_CLIPFRAC_SUM, c.clip, RL_ACTOR_M_PPO_KL_SUM, c.kl, RL_ACTOR_M_RATIO_SUM,
        c.ratio, RL_ACTOR_M_KL_LOSS_SUM, kl, RL_ACTOR_M_GRAD_NORM, gnorm, RL_ACTOR_M_LR, lr));
    return *out ? RL_OK : rl_error_code();
}

/* ---- weights ------------------------------------------------------------------------------------ */

static int s_weights_open(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_WEIGHTS_OPEN);
    if (!a)
        return rl_error_code();
    const char *host = rl_dataproto_meta_str(in, RL_ACTOR_HOST, NULL);
    if (!host)
        return rl_error_code();
    if (!a->wsend) {
        char bind[300];
        snprintf(bind, sizeof bind, "tcp://%s:*", host);
        a->wsend = rl_weight_sender_new(bind, 0);
        if (!a->wsend)
            return rl_error_code();
    }
    *out = rl_dataproto_new_meta(json_pack("{s:s, s:I}", RL_ACTOR_ENDPOINT,
                                           rl_weight_sender_endpoint(a->wsend), RL_ACTOR_COUNT,
                                           (json_int_t)a->P));
    return *out ? RL_OK : rl_error_code();
}

static int s_publish_weights(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_PUBLISH_WEIGHTS);
    if (!a)
        return rl_error_code();
    int64_t version, receivers;
    if (rl_dataproto_meta_get_int(in, RL_ACTOR_VERSION, 1, INT64_MAX, &version) ||
        rl_dataproto_meta_get_int(in, RL_ACTOR_RECEIVERS, 1, 1 << 20, &receivers))
        return rl_error_code();
    if (!a->wsend)
        return rl_error_set(RL_ESTATE, "%s before %s", RL_ACTOR_PUBLISH_WEIGHTS, RL_ACTOR_WEIGHTS_OPEN);
    return rl_weight_send(a->wsend, (uint64_t)version, rl_model_params(a->policy), a->P,
                          (int)receivers, (int)(a->o.comm_timeout_s * 1000));
}

/* ---- checkpoints ---------------------------------------------------------------------------------- */

/* The AdamW moments of every shard, gathered so a checkpoint does not depend
 * on the rank count (collective: every rank calls it). */
static int s_gather_moments(s_actor *a, float **m_out, float **v_out)
{
    float *m = malloc(sizeof(float) * (size_t)a->P), *v = malloc(sizeof(float) * (size_t)a->P);
    int rc = RL_OK;
    if (!m || !v)
        rc = rl_error_set(RL_ENOMEM, "actor/%d: out of memory for the optimiser moments", a->rank);
    else if (a->comm && !(rc = rl_comm_all_gather(a->comm, a->opt->m, m, a->P)))
        rc = rl_comm_all_gather(a->comm, a->opt->v, v, a->P);
    else if (!a->comm) {
        memcpy(m, a->opt->m, sizeof(float) * (size_t)a->P);
        memcpy(v, a->opt->v, sizeof(float) * (size_t)a->P);
    }
    if (rc) {
        free(m);
        free(v);
        return rc;
    }
    *m_out = m;
    *v_out = v;
    return RL_OK;
}

static int s_save_checkpoint(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_SAVE_CHECKPOINT);
    if (!a)
        return rl_error_code();
    const char *dir = rl_dataproto_meta_str(in, RL_ACTOR_DIR, NULL);
    int64_t step, pos, epoch;
    const json_t *extra = json_object_get(rl_dataproto_meta_const(in), RL_ACTOR_EXTRA);
    if (!dir || rl_dataproto_meta_get_int(in, RL_ACTOR_STEP, 0, INT64_MAX, &step) ||
        rl_dataproto_meta_get_int(in, RL_ACTOR_DATA_POSITION, 0, INT64_MAX, &pos) ||
        rl_dataproto_meta_get_int(in, RL_ACTOR_EPOCH, 0, INT64_MAX, &epoch))
        return rl_error_code();
    if (extra && !json_is_object(extra))
        return rl_error_set(RL_EINVAL, "argument '%s' must be a JSON object", RL_ACTOR_EXTRA);
    float *m, *v;
    int rc = s_gather_moments(a, &m, &v);
    if (rc)
        return rc;
    if (a->rank == 0) {
        rl_checkpoint_data d = {.manifest = rl_model_manifest(a->policy),
                                .params = rl_model_params(a->policy), .param_dtype = RL_F32,
                                .exp_avg = m, .exp_avg_sq = v, .adamw = a->opt->cfg,
                                .adamw_step = a->opt->step};
        rl_train_state st;
        memset(&st, 0, sizeof st);
        st.step = step;
        st.epoch = epoch;
        st.data_position = pos;
        st.lr_step = a->opt->step;
        st.lr = a->lr;
        st.extra = (json_t *)extra;
        rc = rl_checkpoint_save(dir, &d, &st);
        if (!rc) { /* the model's config file beside it for other tools */
            char path[4200];
            snprintf(path, sizeof path, "%s/step_%lld/config.json", dir, (long long)step);
            rc = rl_model_write_config(a->policy, path);
        }
    }
    free(m);
    free(v);
    return rc;
}

static int s_load_checkpoint(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_LOAD_CHECKPOINT);
    if (!a)
        return rl_error_code();
    const char *path = rl_dataproto_meta_str(in, RL_ACTOR_PATH, NULL);
    if (!path)
        return rl_error_code();
    float *m = malloc(sizeof(float) * (size_t)a->P), *v = malloc(sizeof(float) * (size_t)a->P);
    if (!m || !v) {
        free(m);
        free(v);
        return rl_error_set(RL_ENOMEM, "actor/%d: out of memory for the optimiser moments", a->rank);
    }
    float *p = rl_model_params(a->policy);
    rl_checkpoint_data d = {.manifest = rl_model_manifest(a->policy), .params = p,
                            .exp_avg = m, .exp_avg_sq = v};
    rl_train_state st;
    memset(&st, 0, sizeof st);
    char what[4200];
    snprintf(what, sizeof what, "%s/model.safetensors", path);
    int rc = rl_checkpoint_load(path, &d, &st);
    if (!rc)
        rc = rl_model_check_finite(a->policy, p, what);
    if (!rc && d.adamw_step != st.lr_step) /* the actor saves one number into both */
        rc = rl_error_set(RL_EPROTO, "%s/optimizer.safetensors: metadata 'step' = %lld, but "
                                     "trainer_state.json has lr_step %lld", path,
                          (long long)d.adamw_step, (long long)st.lr_step);
    if (!rc) {
        int64_t n = a->end - a->begin;
        memcpy(a->opt->m, m + a->begin, sizeof(float) * (size_t)n);
        memcpy(a->opt->v, v + a->begin, sizeof(float) * (size_t)n);
        a->opt->step = d.adamw_step;
        json_t *extra = st.extra ? st.extra : json_object();
        st.extra = NULL; /* stolen by the reply */
        *out = rl_dataproto_new_meta(json_pack(
            "{s:I, s:I, s:I, s:o}", RL_ACTOR_STEP, (json_int_t)st.step, RL_ACTOR_EPOCH,
            (json_int_t)st.epoch, RL_ACTOR_DATA_POSITION, (json_int_t)st.data_position,
            RL_ACTOR_EXTRA, extra));
        rc = *out ? RL_OK : rl_error_code();
    }
    json_decref(st.extra);
    free(m);
    free(v);
    return rc;
}

static int s_save_model(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_actor *a = rl_actor_get(ctx, RL_ACTOR_SAVE_MODEL);
    if (!a)
        return rl_error_code();
    const char *dir = rl_dataproto_meta_str(in, RL_ACTOR_PATH, NULL);
    if (!dir)
        return rl_error_code();
    return a->rank == 0 ? rl_model_save(a->policy, dir) : RL_OK;
}

static const rl_method s_methods[] = {
    {RL_ACTOR_COMM_ID_CREATE, s_comm_id_create},
    {RL_ACTOR_INIT_MODEL, s_init_model},
    {RL_ACTOR_COMPUTE_LOG_PROB, s_compute_log_prob},
    {RL_ACTOR_UPDATE, s_update_actor},
    {RL_ACTOR_SFT_STEP, s_sft_step},
    {RL_ACTOR_WEIGHTS_OPEN, s_weights_open},
    {RL_ACTOR_PUBLISH_WEIGHTS, s_publish_weights},
    {RL_ACTOR_SAVE_CHECKPOINT, s_save_checkpoint},
    {RL_ACTOR_LOAD_CHECKPOINT, s_load_checkpoint},
    {RL_ACTOR_SAVE_MODEL, s_save_model},
    {RL_ACTOR_FLOW_STEP, s_flow_step},
    {RL_ACTOR_UPDATE_DIFFUSION, s_update_diffusion},
    {RL_ACTOR_UPDATE_FLOW, rl_actor_update_flow},
    {RL_ACTOR_FLOW_VALUES, rl_actor_flow_values},
    {NULL, NULL},
};

const rl_worker_role rl_role_actor = {RL_ACTOR_ROLE, s_methods, s_init, s_fini};
