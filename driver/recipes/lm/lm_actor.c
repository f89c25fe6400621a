/* lm_actor.c — the LM recipes' calls of the actor ranks: log-probs, the
 * PPO update over mini-batches, the supervised step (lm_common.h). */
#include "driver/recipes/lm/lm_common.h"

#include <stdlib.h>
#include <string.h>

#include "rlrt/dataproto.h"
#include "rlrt/error.h"
#include "rlrt/tensor.h"

int rl_lm_job_log_prob(rl_lm_job *j, rl_dataproto *dp, const char *which, const char *logp_as,
                       const char *entropy_as)
{
    static const char *const keep[4] = {RL_LM_PROMPTS, RL_LM_PROMPT_LENS, RL_LM_RESPONSES,
                                        RL_LM_RESPONSE_LENS};
    json_t *args = entropy_as ? json_pack("{s:s, s:i}", RL_ACTOR_WHICH, which, RL_ACTOR_WANT_ENTROPY, 1)
                              : json_pack("{s:s}", RL_ACTOR_WHICH, which);
    rl_dataproto *req = rl_dataproto_request(dp, keep, 4, NULL, 0, args), *out = NULL;
    int rc = req ? rl_group_call_sync(j->a.actor, RL_ACTOR_COMPUTE_LOG_PROB, RL_DISPATCH_DP_COMPUTE,
                                      req, &out)
                 : rl_error_code();
    rl_dataproto_free(req);
    const rl_tensor *resp = rc ? NULL : rl_dataproto_tensor(dp, RL_LM_RESPONSES);
    int64_t shape[2] = {rl_dataproto_rows(dp), resp ? resp->shape[1] : 0};
    for (int q = 0; !rc && q < (entropy_as ? 2 : 1); q++) {
        rl_tensor *t = rl_dataproto_tensor_shaped(out, q ? RL_ACTOR_ENTROPY : RL_ACTOR_LOGP, RL_F32,
                                                  2, shape);
        rc = t ? rl_dataproto_add_tensor(dp, q ? entropy_as : logp_as, t)
               : rl_error_wrap(rl_error_code(), "%s reply", RL_ACTOR_COMPUTE_LOG_PROB);
    }
    rl_dataproto_free(out);
    return rc;
}

/* The sums the actor ranks return for one mini-batch. */
typedef struct s_update_sums {
    double tokens, pg, clip, kl, klloss, dual, gnorm, lr;
} s_update_sums;

static int s_add_reply(const rl_dataproto *o, int W, s_update_sums *u)
{
    static const char *const keys[6] = {RL_ACTOR_M_TOKENS, RL_ACTOR_M_PG_LOSS_SUM,
                                        RL_ACTOR_M_CLIPFRAC_SUM, RL_ACTOR_M_PPO_KL_SUM,
                                        RL_ACTOR_M_KL_LOSS_SUM, RL_ACTOR_M_DUAL_CLIP_SUM};
    double v[6], gnorm, lr;
    for (int k = 0; k < 6; k++)
        if (rl_dataproto_meta_get_double(o, keys[k], -1e300, 1e300, &v[k]))
            return rl_error_code();
    if (rl_dataproto_meta_get_double(o, RL_ACTOR_M_GRAD_NORM, 0, 1e300, &gnorm) ||
        rl_dataproto_meta_get_double(o, RL_ACTOR_M_LR, 0, 1e300, &lr))
        return rl_error_code();
    u->tokens += v[0];
    u->pg += v[1];
    u->clip += v[2];
    u->kl += v[3];
    u->klloss += v[4];
    u->dual += v[5];
    u->gnorm += gnorm / W; /* the ranks' mean */
    u->lr = lr;
    return RL_OK;
}

/* One mini-batch, rows [r0, r0 + rows) of the batch, on the actor ranks. */
static int s_update_one(rl_lm_job *j, const rl_dataproto *batch, const char *const *keep, int nkeep,
                        const int32_t *lens, int64_t r0, int64_t rows, s_update_sums *u)
{
    rl_group *actor = j->a.actor;
    int W = rl_group_size(actor);
    int64_t gt = 0, seqs = 0;
    for (int64_t b = r0; b < r0 + rows; b++) {
        gt += lens[b];
        seqs += lens[b] > 0;
    }
    rl_dataproto *mb = rl_dataproto_slice(batch, r0, r0 + rows);
    rl_dataproto *req = mb ? rl_dataproto_request(mb, keep, nkeep, NULL, 0,
                                                  json_pack("{s:I, s:I, s:I}", RL_ACTOR_GLOBAL_TOKENS,
                                                            (json_int_t)gt, RL_ACTOR_GLOBAL_ROWS,
                                                            (json_int_t)rows, RL_ACTOR_GLOBAL_SEQS,
                                                            (json_int_t)seqs))
                           : NULL;
    rl_dataproto_free(mb);
    rl_future *f = req ? rl_group_call(actor, RL_ACTOR_UPDATE, RL_DISPATCH_DP_COMPUTE, req) : NULL;
    int rc = f ? rl_future_wait(f, -1) : rl_error_code();
    for (int k = 0; !rc && k < W; k++) {
        rl_dataproto *out = NULL;
        rc = rl_future_take_rank(f, k, &out);
        if (!rc)
            rc = out ? s_add_reply(out, W, u)
                     : rl_error_set(RL_EPROTO, "actor/%d returned no %s result", k, RL_ACTOR_UPDATE);
        if (rc)
            rc = rl_error_wrap(rc, "actor/%d %s reply", k, RL_ACTOR_UPDATE);
        rl_dataproto_free(out);
    }
    rl_future_free(f);
    rl_dataproto_free(req);
    return rc;
}

int rl_lm_ppo_update(rl_lm_job *j, const rl_dataproto *batch, rl_metric_set *ms)
{
    int64_t B = rl_dataproto_rows(batch), mb_rows = j->a.actor_cfg.mini_batch * j->rollout_cfg.n;
    const char *keep[8] = {RL_LM_PROMPTS, RL_LM_PROMPT_LENS, RL_LM_RESPONSES, RL_LM_RESPONSE_LENS,
                           RL_ACTOR_OLD_LOGP, RL_ACTOR_ADVANTAGES};
    int nkeep = 6;
    if (rl_dataproto_tensor(batch, RL_ACTOR_REF_LOGP))
        keep[nkeep++] = RL_ACTOR_REF_LOGP;
    /* with a loss mask (tool output, filtered rows) the divisors count its
     * positions; without one, the response lengths (the same numbers) */
    if (rl_dataproto_tensor(batch, RL_LM_RESPONSE_MASK))
        keep[nkeep++] = RL_LM_RESPONSE_MASK;
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)(B > 0 ? B : 1));
    int rc = lens ? rl_lm_loss_tokens(batch, &rl_lm_batch_names, lens)
                  : rl_error_set(RL_ENOMEM, "update: out of memory");
    s_update_sums u = {0};
    int updates = 0;
    for (int64_t e = 0; !rc && e < j->a.actor_cfg.epochs; e++)
        for (int64_t r0 = 0; !rc && r0 + mb_rows <= B; r0 += mb_rows, updates++)
            rc = s_update_one(j, batch, keep, nkeep, lens, r0, mb_rows, &u);
    free(lens);
    if (rc)
        return rc;
    if (u.tokens > 0) {
        rl_metric_set_put(ms, "actor/pg_loss", u.pg / u.tokens);
        rl_metric_set_put(ms, "actor/pg_clipfrac", u.clip / u.tokens);
        rl_metric_set_put(ms, RL_M_PPO_KL, u.kl / u.tokens);
        rl_metric_set_put(ms, "actor/pg_clipfrac_lower", u.dual / u.tokens);
        if (j->a.actor_cfg.use_kl_loss)
            rl_metric_set_put(ms, RL_M_KL_LOSS, u.klloss / u.tokens);
    }
    rl_metric_set_put(ms, "actor/grad_norm", updates ? u.gnorm / updates : 0);
    rl_metric_set_put(ms, "actor/lr", u.lr);
    return RL_OK;
}

int rl_lm_sft_step(rl_lm_job *j, const rl_dataproto *batch, rl_metric_set *ms)
{
    static const char *const keep[5] = {RL_LM_PROMPTS, RL_LM_PROMPT_LENS, RL_LM_RESPONSES,
                                        RL_LM_RESPONSE_LENS, RL_LM_RESPONSE_MASK};
    int64_t B = rl_dataproto_rows(batch), tokens = 0;
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)(B > 0 ? B : 1));
    int rc = lens ? rl_lm_loss_tokens(batch, &rl_lm_batch_names, lens)
                  : rl_error_set(RL_ENOMEM, "sft: out of memory");
    for (int64_t b = 0; !rc && b < B; b++)
        tokens += lens[b];
    free(lens);
    int mask = rl_dataproto_tensor(batch, RL_LM_RESPONSE_MASK) != NULL;
    rl_dataproto *req = rc ? NULL
                           : rl_dataproto_request(batch, keep, mask ? 5 : 4, NULL, 0,
                                                  json_pack("{s:I}", RL_ACTOR_GLOBAL_TOKENS,
                                                            (json_int_t)(tokens > 0 ? tokens : 1)));
    static const char *const sums[1] = {RL_ACTOR_M_LOSS};
    double loss = 0, gnorm = 0, lr = 0;
    if (!rc)
        rc = req ? rl_actor_job_actor_step(&j->a, RL_ACTOR_SFT_STEP, req, sums, 1, &loss, &gnorm, &lr)
                 : rl_error_code();
    rl_dataproto_free(req);
    if (rc)
        return rc;
    rl_metric_set_put(ms, "sft/loss", loss);
    rl_metric_set_put(ms, "actor/grad_norm", gnorm);
    rl_metric_set_put(ms, "actor/lr", lr);
    return RL_OK;
}
