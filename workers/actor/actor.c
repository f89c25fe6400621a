/* workers/actor/actor.c — the actor role: the trainable policy, a frozen
 * reference copy, and FSDP over the flat parameter buffer.
 *
 * FSDP (full shard) on W actor ranks: rank r owns the shard
 * rl_param_shard_range(P, W, r) of the AdamW state. Each step a rank runs
 * forward/backward on its part of the batch (dp_compute chunks it), then
 * reduce-scatter sums the gradients into its shard, the clip norm is
 * all-reduced, AdamW updates the shard, and all-gather rebuilds the full
 * parameters for the next forward. Losses are normalised by GLOBAL counts the
 * driver passes in meta, so W ranks compute the same update as one rank.
 *
 * Methods (inputs are DataProtos; small arguments in meta):
 *   init_model        comm_id (W > 1): build policy + reference, join the comm
 *   compute_log_prob  prompts/responses → logp (B,R) [, entropy]; meta which:
 *                     "policy" | "ref"
 *   update_actor      one optimiser step on this mini-batch (PPO loss)
 *   sft_step          one optimiser step of masked NLL on response tokens
 *   weights_open / publish_weights   the weight channel to the rollout ranks
 *   save_checkpoint / load_checkpoint
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../lm_common.h"
#include "../roles.h"
#include "rlrt/rlrt.h"
#include "rlrt/algo/policy_loss.h"
#include "rlrt/nn/checkpoint.h"
#include "rlrt/nn/generate.h"
#include "rlrt/nn/optim.h"
#include "rlrt/nn/safetensors.h"
#include "rlrt/runtime/channel.h"
#include "rlrt/runtime/collective.h"

typedef struct s_actor {
    rl_lm *policy, *ref;
    int64_t P;           /* parameter count */
    rl_comm *comm;       /* NULL when W == 1 */
    int W, rank;
    int64_t begin, end;  /* owned shard */
    float *shard_grad;   /* (end - begin) */
    rl_adamw *opt;
    rl_lr_schedule lr;
    double grad_clip;
    int64_t micro_batch;
    rl_weight_sender *wsend;
} s_actor;

static s_actor *s_get(rl_worker_ctx *ctx)
{
    s_actor *a = ctx->user;
    if (!a || !a->policy)
        rl_error_set(RL_ESTATE, "actor/%d: init_model has not run", ctx->rank);
    return a && a->policy ? a : NULL;
}

static void s_free_actor(s_actor *a)
{
    if (!a)
        return;
    rl_lm_free(a->policy);
    rl_lm_free(a->ref);
    rl_comm_destroy(a->comm);
    free(a->shard_grad);
    rl_adamw_free(a->opt);
    rl_weight_sender_free(a->wsend);
    memset(a, 0, sizeof *a);
}

static int s_init(rl_worker_ctx *ctx)
{
    ctx->user = calloc(1, sizeof(s_actor));
    return ctx->user ? RL_OK : rl_error_set(RL_ENOMEM, "actor: out of memory");
}

static void s_fini(rl_worker_ctx *ctx)
{
    s_free_actor(ctx->user);
    free(ctx->user);
    ctx->user = NULL;
}

static int s_init_model(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_actor *a = ctx->user;
    s_free_actor(a);
    const rl_config *job = ctx->config;
    a->policy = rl_job_lm_build(job);
    a->ref = a->policy ? rl_job_lm_build(job) : NULL;
    if (!a->ref)
        return rl_error_wrap(rl_error_code(), "actor/%d: building the model", ctx->rank);
    a->P = rl_lm_num_params(a->policy);
    a->W = ctx->world_size;
    a->rank = ctx->rank;
    if (a->W > 1) {
        const char *id_text = rl_dataproto_meta_str(in, "comm_id", NULL);
        rl_comm_id id;
        if (!id_text)
            return rl_error_set(RL_EINVAL, "init_model: %d actor ranks need meta 'comm_id'", a->W);
        if (rl_comm_id_parse(&id, id_text))
            return rl_error_code();
        a->comm = rl_comm_init_rank(&id, a->W, a->rank, NULL);
        if (!a->comm)
            return rl_error_wrap(rl_error_code(), "actor/%d: joining the FSDP communicator", a->rank);
    }
    rl_shard_range(a->P, a->W, a->rank, &a->begin, &a->end);
    a->shard_grad = malloc(sizeof(float) * (size_t)(a->end - a->begin + 1));
    rl_adamw_config oc = rl_adamw_config_default();
    double lr, wd, b1, b2, eps, clip;
    int64_t warm, total, micro;
    const char *sched = "constant";
    if (rl_config_get_double_or(job, "actor.optim.lr", 1e-5, &lr) ||
        rl_config_get_double_or(job, "actor.optim.weight_decay", 0.0, &wd) ||
        rl_config_get_double_or(job, "actor.optim.beta1", 0.9, &b1) ||
        rl_config_get_double_or(job, "actor.optim.beta2", 0.999, &b2) ||
        rl_config_get_double_or(job, "actor.optim.eps", 1e-8, &eps) ||
        rl_config_get_int_or(job, "actor.optim.warmup_steps", 0, &warm) ||
        rl_config_get_int_or(job, "trainer.total_steps", 100, &total) ||
        rl_config_get_string_or(job, "actor.optim.lr_schedule", "constant", &sched) ||
        rl_config_get_double_or(job, "actor.grad_clip", 1.0, &clip) ||
        rl_config_get_int_or(job, "actor.ppo_micro_batch_size", 0, &micro))
        return rl_error_code();
    oc.weight_decay = wd;
    oc.beta1 = b1;
    oc.beta2 = b2;
    oc.eps = eps;
    a->opt = rl_adamw_new(&oc, rl_lm_manifest(a->policy), a->begin, a->end);
    if (!a->opt)
        return rl_error_code();
    rl_adamw_set_no_decay(a->opt, rl_lm_manifest(a->policy), rl_param_pred_no_decay_1d, NULL);
    memset(&a->lr, 0, sizeof a->lr);
    if (rl_lr_kind_parse(sched, &a->lr.kind))
        return rl_error_code();
    a->lr.base_lr = lr;
    a->lr.warmup_steps = warm;
    a->lr.total_steps = total;
    a->grad_clip = clip;
    a->micro_batch = micro;
    return RL_OK;
}

/* After gradients of one optimiser step are accumulated: reduce-scatter,
 * global clip, AdamW on the shard, all-gather. */
static int s_fsdp_step(s_actor *a, double *grad_norm, double *lr_out)
{
    float *g = rl_lm_grads(a->policy), *p = rl_lm_params(a->policy);
    int64_t n = a->end - a->begin;
    float *gs = g + a->begin;
    int rc;
    if (a->comm) {
        if ((rc = rl_comm_reduce_scatter(a->comm, g, a->shard_grad, a->P, RL_REDUCE_SUM)))
            return rc;
        gs = a->shard_grad;
    }
    double sumsq = rl_grad_sumsq(gs, n);
    if (a->comm) { /* sum of the shards' squares, exact enough in f32 pairs */
        float part[2] = {(float)sumsq, (float)(sumsq - (double)(float)sumsq)}, tot[2];
        if ((rc = rl_comm_all_reduce(a->comm, part, tot, 2, RL_REDUCE_SUM)))
            return rc;
        sumsq = (double)tot[0] + (double)tot[1];
    }
    float norm = 0;
    if ((rc = rl_grad_clip_apply(gs, n, sumsq, (float)a->grad_clip, &norm)))
        return rc;
    double lr = rl_lr_at(&a->lr, a->opt->step);
    if ((rc = rl_adamw_step(a->opt, lr, p + a->begin, gs)))
        return rc;
    if (a->comm && (rc = rl_comm_all_gather(a->comm, p + a->begin, p, a->P)))
        return rc;
    rl_lm_zero_grad(a->policy);
    *grad_norm = norm;
    *lr_out = lr;
    return RL_OK;
}

/* ---- log-probs ---------------------------------------------------------------------- */

static int s_compute_log_prob(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = s_get(ctx);
    if (!a)
        return rl_error_code();
    const char *which = rl_dataproto_meta_str(in, "which", "policy");
    rl_lm *m = strcmp(which, "ref") == 0 ? a->ref : a->policy;
    double temp;
    int64_t want_entropy;
    if (rl_dataproto_meta_double(in, "temperature", 1.0, &temp) ||
        rl_dataproto_meta_int(in, "entropy", 0, &want_entropy))
        return rl_error_code();
    rl_seq_batch s;
    int rc = rl_seq_batch_build(in, rl_lm_get_config(m)->pad_token_id, &s);
    if (rc)
        return rc;
    rl_dataproto *o = rl_dataproto_new();
    int64_t shape[2] = {s.B, s.R};
    rl_tensor *lp = rl_dataproto_new_tensor(o, "logp", RL_F32, 2, shape);
    rl_tensor *en = want_entropy ? rl_dataproto_new_tensor(o, "entropy", RL_F32, 2, shape) : NULL;
    int mb = a->micro_batch > 0 ? (int)a->micro_batch : s.B;
    float *full_lp = malloc(sizeof(float) * (size_t)mb * s.L);
    float *full_en = malloc(sizeof(float) * (size_t)mb * s.L);
    for (int r0 = 0; r0 < s.B && !rc; r0 += mb) {
        int rows = s.B - r0 < mb ? s.B - r0 : mb;
        rc = rl_lm_forward(m, rows, s.L, s.tokens + (size_t)r0 * s.L, s.mask + (size_t)r0 * s.L,
                           (float)temp, full_lp, en ? full_en : NULL, NULL);
        if (!rc) {
            rl_seq_gather(&s, full_lp, r0, rows, s.L, (float *)rl_tensor_data(lp) + (size_t)r0 * s.R);
            if (en)
                rl_seq_gather(&s, full_en, r0, rows, s.L,
                              (float *)rl_tensor_data(en) + (size_t)r0 * s.R);
        }
    }
    free(full_lp);
    free(full_en);
    rl_seq_batch_free(&s);
    if (rc) {
        rl_dataproto_free(o);
        return rc;
    }
    *out = o;
    return RL_OK;
}

/* ---- PPO update ----------------------------------------------------------------------- */

typedef struct {
    rl_seq_batch *s;
    const float *old_logp, *ref_logp, *adv; /* (B, R) */
    rl_ppo_loss_cfg cfg;
    double scale;           /* per micro-batch weight for the seq-mean modes */
    double global_tokens;
    float *lp, *ent, *mask, *glp, *gent; /* (mb, R) scratch */
    double m_pg, m_clip, m_kl, m_ent, m_klloss, m_dual, tokens;
} s_ppo_ctx;

static int s_ppo_loss_fn(void *arg, int row0, int B, int T, const float *logp,
                         const float *entropy, const float *values, float *dlogp,
                         float *dentropy, float *dvalues, double *loss)
{
    (void)values;
    (void)dvalues;
    s_ppo_ctx *c = arg;
    int R = c->s->R;
    rl_seq_gather(c->s, logp, row0, B, T, c->lp);
    rl_seq_gather(c->s, entropy, row0, B, T, c->ent);
    double toks = 0;
    for (int b = 0; b < B; b++)
        for (int j = 0; j < R; j++) {
            float v = j < c->s->rlen[row0 + b] ? 1.0f : 0.0f;
            c->mask[(size_t)b * R + j] = v;
            toks += v;
        }
    rl_ppo_loss_cfg cfg = c->cfg;
    if (cfg.agg == RL_AGG_TOKEN_MEAN)
        cfg.norm = c->global_tokens;
    rl_ppo_loss_out o;
    int rc = rl_ppo_policy_loss(&cfg, c->lp, c->old_logp + (size_t)row0 * R,
                                c->adv + (size_t)row0 * R, c->mask, c->ent,
                                c->ref_logp ? c->ref_logp + (size_t)row0 * R : NULL, B, R, c->glp,
                                cfg.entropy_coeff != 0 ? c->gent : NULL, &o);
    if (rc)
        return rc;
    double scale = cfg.agg == RL_AGG_TOKEN_MEAN ? 1.0 : c->scale * B;
    if (scale != 1.0)
        for (int64_t i = 0; i < (int64_t)B * R; i++) {
            c->glp[i] *= (float)scale;
            c->gent[i] *= (float)scale;
        }
    rl_seq_scatter(c->s, c->glp, row0, B, T, dlogp);
    if (cfg.entropy_coeff != 0)
        rl_seq_scatter(c->s, c->gent, row0, B, T, dentropy);
    *loss += o.loss * scale;
    /* metrics are token means over this micro-batch: weight by its tokens */
    c->m_pg += o.pg_loss * toks;
    c->m_clip += o.clipfrac * toks;
    c->m_kl += o.ppo_kl * toks;
    c->m_ent += o.entropy * toks;
    c->m_klloss += o.kl_loss * toks;
    c->m_dual += o.clipfrac_lower * toks;
    c->tokens += toks;
    return RL_OK;
}

static int s_loss_cfg_from(const rl_config *job, rl_ppo_loss_cfg *cfg)
{
    rl_ppo_loss_cfg_default(cfg);
    const char *agg = "token-mean", *klt = "low_var_kl";
    int use_kl = 0;
    double kl_coef = 0;
    if (rl_config_get_double_or(job, "actor.clip_ratio_low", 0.2, &cfg->clip_ratio_low) ||
        rl_config_get_double_or(job, "actor.clip_ratio_high", 0.2, &cfg->clip_ratio_high) ||
        rl_config_get_double_or(job, "actor.clip_ratio_c", 3.0, &cfg->clip_ratio_c) ||
        rl_config_get_string_or(job, "actor.loss_agg_mode", "token-mean", &agg) ||
        rl_config_get_double_or(job, "actor.entropy_coeff", 0.0, &cfg->entropy_coeff) ||
        rl_config_get_bool_or(job, "actor.use_kl_loss", 0, &use_kl) ||
        rl_config_get_double_or(job, "actor.kl_loss_coef", 0.001, &kl_coef) ||
        rl_config_get_string_or(job, "actor.kl_loss_type", "low_var_kl", &klt))
        return rl_error_code();
    if (rl_loss_agg_parse(agg, &cfg->agg) || rl_kl_kind_parse(klt, &cfg->kl_kind))
        return rl_error_code();
    cfg->kl_loss_coef = use_kl ? kl_coef : 0.0;
    return RL_OK;
}

/* meta: global_tokens (valid response tokens in the whole mini-batch over all
 * ranks), global_rows, temperature. Tensors: prompts, prompt_lens, responses,
 * response_lens, old_logp, advantages [, ref_logp]. */
static int s_update_actor(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = s_get(ctx);
    if (!a)
        return rl_error_code();
    s_ppo_ctx c;
    memset(&c, 0, sizeof c);
    double temp, gtok, grows;
    if (rl_dataproto_meta_double(in, "global_tokens", 0, &gtok) || rl_dataproto_meta_double(in, "global_rows", 0, &grows) ||
        rl_dataproto_meta_double(in, "temperature", 1.0, &temp) || s_loss_cfg_from(ctx->config, &c.cfg))
        return rl_error_code();
    rl_seq_batch s;
    int rc = rl_seq_batch_build(in, rl_lm_get_config(a->policy)->pad_token_id, &s);
    if (rc)
        return rc;
    const rl_tensor *old = rl_dataproto_tensor_typed(in, "old_logp", RL_F32);
    const rl_tensor *adv = old ? rl_dataproto_tensor_typed(in, "advantages", RL_F32) : NULL;
    const rl_tensor *ref = rl_dataproto_tensor(in, "ref_logp");
    if (!adv) {
        rl_seq_batch_free(&s);
        return rl_error_code();
    }
    if (c.cfg.kl_loss_coef != 0 && !ref) {
        rl_seq_batch_free(&s);
        return rl_error_set(RL_EINVAL, "update_actor: actor.use_kl_loss needs tensor 'ref_logp'");
    }
    c.s = &s;
    c.old_logp = rl_tensor_data(old);
    c.adv = rl_tensor_data(adv);
    c.ref_logp = ref ? rl_tensor_data(ref) : NULL;
    c.global_tokens = gtok > 0 ? gtok : (double)s.n_response_tokens;
    c.scale = grows > 0 ? 1.0 / grows : 1.0 / (s.B ? s.B : 1);
    int mb = a->micro_batch > 0 ? (int)a->micro_batch : (s.B ? s.B : 1);
    size_t n = (size_t)mb * (size_t)(s.R ? s.R : 1);
    c.lp = malloc(sizeof(float) * n);
    c.ent = malloc(sizeof(float) * n);
    c.mask = malloc(sizeof(float) * n);
    c.glp = calloc(n, sizeof(float));
    c.gent = calloc(n, sizeof(float));
    double loss = 0, gnorm = 0, lr = 0;
    if (s.B > 0)
        rc = rl_lm_forward_backward(a->policy, s.B, s.L, s.tokens, s.mask, (float)temp, mb,
                                    s_ppo_loss_fn, &c, &loss);
    /* every rank takes part in the collectives, even with an empty chunk */
    if (!rc)
        rc = s_fsdp_step(a, &gnorm, &lr);
    free(c.lp);
    free(c.ent);
    free(c.mask);
    free(c.glp);
    free(c.gent);
    rl_seq_batch_free(&s);
    if (rc)
        return rl_error_wrap(rc, "actor/%d update_actor", ctx->rank);
    /* partial sums: the driver adds the ranks' values and divides by the
     * global token count */
    *out = rl_dataproto_new_meta(json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "loss", loss,
                                   "pg_loss_sum", c.m_pg, "clipfrac_sum", c.m_clip, "ppo_kl_sum",
                                   c.m_kl, "entropy_sum", c.m_ent, "kl_loss_sum", c.m_klloss,
                                   "dual_clip_sum", c.m_dual, "tokens", c.tokens, "grad_norm",
                                   gnorm, "lr", lr));
    return RL_OK;
}

/* ---- supervised step ------------------------------------------------------------------------ */

typedef struct {
    rl_seq_batch *s;
    double global_tokens, tokens;
} s_sft_ctx;

static int s_sft_loss_fn(void *arg, int row0, int B, int T, const float *logp,
                         const float *entropy, const float *values, float *dlogp,
                         float *dentropy, float *dvalues, double *loss)
{
    (void)entropy;
    (void)values;
    (void)dentropy;
    (void)dvalues;
    s_sft_ctx *c = arg;
    for (int b = 0; b < B; b++) {
        int p = c->s->plen[row0 + b], r = c->s->rlen[row0 + b];
        for (int j = 0; j < r && p + j < T; j++) {
            size_t i = (size_t)b * T + p + j;
            *loss -= logp[i] / c->global_tokens;
            dlogp[i] = (float)(-1.0 / c->global_tokens);
            c->tokens += 1;
        }
    }
    return RL_OK;
}

/* Masked NLL of the response tokens (the worked solutions). meta:
 * global_tokens. */
static int s_sft_step(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = s_get(ctx);
    if (!a)
        return rl_error_code();
    double gtok;
    if (rl_dataproto_meta_double(in, "global_tokens", 0, &gtok))
        return rl_error_code();
    rl_seq_batch s;
    int rc = rl_seq_batch_build(in, rl_lm_get_config(a->policy)->pad_token_id, &s);
    if (rc)
        return rc;
    if (!s.rlen) {
        rl_seq_batch_free(&s);
        return rl_error_set(RL_EINVAL, "sft_step needs tensors 'responses' and 'response_lens'");
    }
    s_sft_ctx c = {&s, gtok > 0 ? gtok : (double)(s.n_response_tokens ? s.n_response_tokens : 1), 0};
    int mb = a->micro_batch > 0 ? (int)a->micro_batch : (s.B ? s.B : 1);
    double loss = 0, gnorm = 0, lr = 0;
    if (s.B > 0)
        rc = rl_lm_forward_backward(a->policy, s.B, s.L, s.tokens, s.mask, 1.0f, mb, s_sft_loss_fn,
                                    &c, &loss);
    if (!rc)
        rc = s_fsdp_step(a, &gnorm, &lr);
    rl_seq_batch_free(&s);
    if (rc)
        return rl_error_wrap(rc, "actor/%d sft_step", ctx->rank);
    *out = rl_dataproto_new_meta(json_pack("{s:f, s:f, s:f, s:f}", "loss", loss, "tokens", c.tokens,
                                   "grad_norm", gnorm, "lr", lr));
    return RL_OK;
}

/* ---- weights ---------------------------------------------------------------------------------- */

static int s_weights_open(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = s_get(ctx);
    if (!a)
        return rl_error_code();
    const char *host = rl_dataproto_meta_str(in, "host", "127.0.0.1");
    if (!a->wsend) {
        char bind[300];
        snprintf(bind, sizeof bind, "tcp://%s:*", host);
        a->wsend = rl_weight_sender_new(bind, 0);
        if (!a->wsend)
            return rl_error_code();
    }
    *out = rl_dataproto_new_meta(json_pack("{s:s, s:I}", "endpoint", rl_weight_sender_endpoint(a->wsend),
                                   "count", (json_int_t)a->P));
    return RL_OK;
}

static int s_publish_weights(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_actor *a = s_get(ctx);
    if (!a)
        return rl_error_code();
    int64_t version, receivers;
    if (rl_dataproto_meta_int(in, "version", 1, &version) || rl_dataproto_meta_int(in, "receivers", 1, &receivers))
        return rl_error_code();
    if (!a->wsend)
        return rl_error_set(RL_ESTATE, "publish_weights before weights_open");
    return rl_weight_send(a->wsend, (uint64_t)version, rl_lm_params(a->policy), a->P,
                          (int)receivers, 120000);
}

/* ---- checkpoints ------------------------------------------------------------------------------- */

/* meta: dir (step directory root), step, extra (JSON object for
 * trainer_state), data_position, epoch. The moments are gathered from the
 * shards (so a checkpoint does not depend on the rank count); rank 0
 * writes. */
static int s_save_checkpoint(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_actor *a = s_get(ctx);
    if (!a)
        return rl_error_code();
    const char *dir = rl_dataproto_meta_str(in, "dir", NULL);
    int64_t step, pos, epoch;
    if (!dir)
        return rl_error_set(RL_EINVAL, "save_checkpoint: meta 'dir' missing");
    if (rl_dataproto_meta_int(in, "step", 0, &step) || rl_dataproto_meta_int(in, "data_position", 0, &pos) ||
        rl_dataproto_meta_int(in, "epoch", 0, &epoch))
        return rl_error_code();
    float *m = malloc(sizeof(float) * (size_t)a->P), *v = malloc(sizeof(float) * (size_t)a->P);
    int rc = RL_OK;
    if (a->comm) {
        rc = rl_comm_all_gather(a->comm, a->opt->m, m, a->P);
        if (!rc)
            rc = rl_comm_all_gather(a->comm, a->opt->v, v, a->P);
    } else {
        memcpy(m, a->opt->m, sizeof(float) * (size_t)a->P);
        memcpy(v, a->opt->v, sizeof(float) * (size_t)a->P);
    }
    if (!rc && a->rank == 0) {
        rl_checkpoint_data d = {.manifest = rl_lm_manifest(a->policy), .params = rl_lm_params(a->policy),
                                .param_dtype = RL_F32, .exp_avg = m, .exp_avg_sq = v,
                                .adamw = a->opt->cfg, .adamw_step = a->opt->step};
        rl_train_state st;
        memset(&st, 0, sizeof st);
        st.step = step;
        st.epoch = epoch;
        st.data_position = pos;
        st.lr_step = a->opt->step;
        st.lr = a->lr;
        st.extra = (json_t *)json_object_get(rl_dataproto_meta_const(in), "extra");
        rc = rl_checkpoint_save(dir, &d, &st);
        if (!rc) { /* HF-style files beside the checkpoint for other tools */
            char path[4200];
            snprintf(path, sizeof path, "%s/step_%lld/config.json", dir, (long long)step);
            rc = rl_lm_config_to_hf_json(rl_lm_get_config(a->policy), path);
        }
    }
    free(m);
    free(v);
    return rc;
}

/* meta: path (a step directory). Returns meta {step, epoch, data_position,
 * extra}. */
static int s_load_checkpoint(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_actor *a = s_get(ctx);
    if (!a)
        return rl_error_code();
    const char *path = rl_dataproto_meta_str(in, "path", NULL);
    if (!path)
        return rl_error_set(RL_EINVAL, "load_checkpoint: meta 'path' missing");
    float *m = malloc(sizeof(float) * (size_t)a->P), *v = malloc(sizeof(float) * (size_t)a->P);
    rl_checkpoint_data d = {.manifest = rl_lm_manifest(a->policy), .params = rl_lm_params(a->policy),
                            .exp_avg = m, .exp_avg_sq = v};
    rl_train_state st;
    memset(&st, 0, sizeof st);
    int rc = rl_checkpoint_load(path, &d, &st);
    if (!rc) {
        int64_t n = a->end - a->begin;
        memcpy(a->opt->m, m + a->begin, sizeof(float) * (size_t)n);
        memcpy(a->opt->v, v + a->begin, sizeof(float) * (size_t)n);
        a->opt->step = d.adamw_step;
        *out = rl_dataproto_new_meta(json_pack("{s:I, s:I, s:I, s:o}", "step", (json_int_t)st.step, "epoch",
                                       (json_int_t)st.epoch, "data_position",
                                       (json_int_t)st.data_position, "extra",
                                       st.extra ? st.extra : json_object()));
    }
    free(m);
    free(v);
    return rc;
}

/* meta: path (directory). Writes model.safetensors + config.json (rank 0). */
static int s_save_model(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    (void)out;
    s_actor *a = s_get(ctx);
    if (!a)
        return rl_error_code();
    const char *dir = rl_dataproto_meta_str(in, "path", NULL);
    if (!dir)
        return rl_error_set(RL_EINVAL, "save_model: meta 'path' missing");
    if (a->rank != 0)
        return RL_OK;
    mkdir(dir, 0755);
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = rl_safetensors_write_params(path, rl_lm_manifest(a->policy), rl_lm_params(a->policy),
                                         RL_F32, NULL);
    snprintf(path, sizeof path, "%s/config.json", dir);
    return rc ? rc : rl_lm_config_to_hf_json(rl_lm_get_config(a->policy), path);
}

static const rl_method s_methods[] = {
    {"init_model", s_init_model},
    {"compute_log_prob", s_compute_log_prob},
    {"update_actor", s_update_actor},
    {"sft_step", s_sft_step},
    {"weights_open_actor", s_weights_open},
    {"publish_weights", s_publish_weights},
    {"save_checkpoint", s_save_checkpoint},
    {"load_checkpoint", s_load_checkpoint},
    {"save_model", s_save_model},
    {NULL, NULL},
};

const rl_worker_role rl_role_actor = {"actor", s_methods, s_init, s_fini};
