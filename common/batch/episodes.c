/* episodes.c — batch transforms of the embodied track
 * (common/batch/episodes.h). */
#include "common/batch/episodes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/algo/advantage.h"
#include "common/algo/flow/embodied.h"
#include "common/algo/flow/flow.h"
#include "common/core/rng.h"
#include "rlrt/error.h"

static int s_oom(void) { return rl_error_set(RL_ENOMEM, "out of memory"); }

/* ---- one round's envs ---------------------------------------------------------------------------- */

void rl_episode_envs_free(rl_episode_envs *e)
{
    free(e->rewards);
    free(e->valid);
    free(e->success);
    free(e->task);
    free(e->offset);
    memset(e, 0, sizeof *e);
}

int64_t rl_episode_envs_steps(const rl_episode_envs *e)
{
    int64_t n = 0;
    for (int64_t i = 0; e->valid && i < e->B * e->K; i++)
        n += e->valid[i] != 0;
    return n;
}

int rl_episode_envs_gather(rl_dataproto *const *env, int E, int64_t K, const rl_episode_cols *cols,
                           rl_episode_envs *e)
{
    memset(e, 0, sizeof *e);
    e->K = K;
    if (!(e->offset = calloc((size_t)E + 1, sizeof(int64_t))))
        return s_oom();
    for (int i = 0; i < E; i++)
        e->offset[i + 1] = e->offset[i] + rl_dataproto_rows(env[i]);
    int64_t B = e->B = e->offset[E];
    e->rewards = malloc(sizeof(float) * (size_t)(B * K + 1));
    e->valid = malloc((size_t)(B * K + 1));
    e->success = malloc((size_t)B + 1);
    e->task = malloc(sizeof(int64_t) * (size_t)(B + 1));
    if (!e->rewards || !e->valid || !e->success || !e->task)
        return s_oom();
    for (int i = 0; i < E; i++) {
        const rl_dataproto *b = env[i];
        int64_t n = rl_dataproto_rows(b), o = e->offset[i];
        const rl_tensor *tr = rl_dataproto_tensor_shaped(b, cols->rewards, RL_F32, 2, (int64_t[]){n, K});
        const rl_tensor *tv = tr ? rl_dataproto_tensor_shaped(b, cols->valid, RL_U8, 2, (int64_t[]){n, K}) : NULL;
        const rl_tensor *tt = tv ? rl_dataproto_tensor_shaped(b, cols->task, RL_I64, 2, (int64_t[]){n, K + 1})
                                 : NULL;
        const rl_tensor *ts = tt ? rl_dataproto_tensor_shaped(b, cols->success, RL_U8, 2, (int64_t[]){n, K + 1})
                                 : NULL;
        if (!ts)
            return rl_error_wrap(rl_error_code(), "env/%d interact reply", i);
        memcpy(e->rewards + o * K, rl_tensor_data(tr), sizeof(float) * (size_t)(n * K));
        memcpy(e->valid + o * K, rl_tensor_data(tv), (size_t)(n * K));
        const int64_t *T = rl_tensor_data(tt);
        const uint8_t *S = rl_tensor_data(ts);
        for (int64_t g = 0; g < n; g++) {
            e->task[o + g] = T[g * (K + 1)];
            e->success[o + g] = S[g * (K + 1) + K] != 0;
            if (e->task[o + g] < 0 || e->task[o + g] >= RL_ENV_MAX_TASKS)
                return rl_error_set(RL_EPROTO, "env/%d: task id %lld of env %lld is out of range", i,
                                    (long long)e->task[o + g], (long long)g);
        }
    }
    return RL_OK;
}

/* ---- the training batch ---------------------------------------------------------------------------- */

void rl_episode_batch_free(rl_episode_batch *b)
{
    rl_dataproto_free(b->rows);
    free(b->row_sb);
    free(b->step_mask);
    free(b->chunk_rewards);
    free(b->step_rewards);
    free(b->ep_reward);
    free(b->ep_task);
    memset(b, 0, sizeof *b);
}

/* The records' rows of the kept (chunk step, env) pairs, in step-major
 * order, into b->rows and b->row_sb. */
static int s_join(rl_episode_batch *b, const rl_episode_envs *e, rl_dataproto *const *rec, int E,
                  const rl_episode_cols *cols)
{
    const int64_t S = b->S, B = b->B;
    int64_t *where = malloc(sizeof(int64_t) * (size_t)(S * B + 1)), *idx = NULL;
    rl_dataproto *all = NULL;
    int rc = where ? RL_OK : s_oom();
    for (int64_t i = 0; !rc && i < S * B; i++)
        where[i] = -1;
    if (!rc && !(all = rl_dataproto_concat(rec, E)))
        rc = rl_error_wrap(rl_error_code(), "the rollout's records");
    int64_t base = 0;
    for (int i = 0; !rc && i < E; i++) {
        int64_t n = rl_dataproto_rows(rec[i]), nenv = e->offset[i + 1] - e->offset[i];
        const rl_tensor *te = rl_dataproto_tensor_shaped(rec[i], cols->env_row, RL_I64, 1, (int64_t[]){n});
        const rl_tensor *tc = te ? rl_dataproto_tensor_shaped(rec[i], cols->chunk_step, RL_I64, 1, (int64_t[]){n})
                                 : NULL;
        if (!tc) {
            rc = rl_error_wrap(rl_error_code(), "rollout/%d records", i);
            break;
        }
        const int64_t *er = rl_tensor_data(te), *cs = rl_tensor_data(tc);
        for (int64_t k = 0; !rc && k < n; k++) {
            if (er[k] < 0 || er[k] >= nenv || cs[k] < 0 || cs[k] >= S)
                rc = rl_error_set(RL_EPROTO, "rollout/%d record %lld: env_row %lld / chunk_step %lld out of "
                                             "range (%lld envs, %lld steps)", i, (long long)k, (long long)er[k],
                                  (long long)cs[k], (long long)nenv, (long long)S);
            else
                where[cs[k] * B + e->offset[i] + er[k]] = base + k;
        }
        base += n;
    }
    int64_t kept = 0;
    if (!rc && (!(idx = malloc(sizeof(int64_t) * (size_t)(S * B + 1))) ||
                !(b->row_sb = malloc(sizeof(int64_t) * (size_t)(S * B + 1)))))
        rc = s_oom();
    for (int64_t i = 0; !rc && i < S * B; i++) {
        if (b->step_mask[i] == 0.0f)
            continue;
        if (where[i] < 0) {
            rc = rl_error_set(RL_EPROTO, "no record of chunk step %lld of env %lld, which the env stepped",
                              (long long)(i / B), (long long)(i % B));
            break;
        }
        idx[kept] = where[i];
        b->row_sb[kept++] = i;
    }
    if (!rc && !(b->rows = rl_dataproto_index(all, idx, kept)))
        rc = rl_error_code();
    free(where);
    free(idx);
    rl_dataproto_free(all);
    return rc;
}

/* flow_action (the chunk as the env ran it), seeds and mask of the rows. */
static int s_row_columns(rl_episode_batch *b, const rl_episode_cols *cols, uint64_t seed, int64_t step,
                         int clip_actions, rl_metric_set *ms)
{
    const int64_t n = rl_dataproto_rows(b->rows), D = b->D;
    const rl_tensor *ta = rl_dataproto_tensor_shaped(b->rows, cols->action, RL_F32, 3, (int64_t[]){n, b->C, 7});
    if (!ta)
        return rl_error_wrap(rl_error_code(), "the rollout's records");
    rl_tensor *tf = rl_dataproto_new_tensor(b->rows, cols->flow_action, RL_F32, 2, (int64_t[]){n, D});
    rl_tensor *ts = tf ? rl_dataproto_new_tensor(b->rows, cols->seeds, RL_I64, 1, (int64_t[]){n}) : NULL;
    rl_tensor *tm = ts ? rl_dataproto_new_tensor(b->rows, cols->mask, RL_F32, 1, (int64_t[]){n}) : NULL;
    if (!tm)
        return rl_error_code();
    memcpy(rl_tensor_data(tf), rl_tensor_data(ta), sizeof(float) * (size_t)(n * D));
    /* the env ran the chunk clipped to [-1, 1]: FlowSAR / FlowIPO train on
     * that action (the warm start's own samples reach |a| ~ 30, and flow
     * matching on them pulls the policy off the demonstrations) */
    if (clip_actions)
        rl_metric_set_put(ms, "rollout/action_clip_frac",
                          (double)rl_flow_clip_actions(rl_tensor_data(tf), n * D, -1.0f, 1.0f) /
                              (double)(n * D > 0 ? n * D : 1));
    int64_t *sd = rl_tensor_data(ts);
    float *m = rl_tensor_data(tm);
    for (int64_t k = 0; k < n; k++) {
        sd[k] = (int64_t)(rl_splitmix64(seed ^ rl_splitmix64(0x5a4ull + (uint64_t)step)) ^
                          rl_splitmix64((uint64_t)b->row_sb[k])) >> 1;
        m[k] = 1.0f;
    }
    return RL_OK;
}

int rl_episode_batch_build(const rl_episode_envs *e, rl_dataproto *const *rec, int E, int64_t S, int64_t C,
                           const rl_episode_cols *cols, uint64_t seed, int64_t step, int clip_actions,
                           rl_episode_batch *b, rl_metric_set *ms)
{
    memset(b, 0, sizeof *b);
    const int64_t B = e->B;
    b->S = S, b->B = B, b->C = C, b->D = C * 7;
    b->step_mask = malloc(sizeof(float) * (size_t)(S * B + 1));
    b->chunk_rewards = malloc(sizeof(float) * (size_t)(S * B + 1));
    b->step_rewards = malloc(sizeof(float) * (size_t)(S * B * C + 1));
    b->ep_reward = malloc(sizeof(float) * (size_t)(B + 1));
    b->ep_task = malloc(sizeof(int64_t) * (size_t)(B + 1));
    if (!b->step_mask || !b->chunk_rewards || !b->step_rewards || !b->ep_reward || !b->ep_task)
        return s_oom();
    if (e->K != S * C)
        return rl_error_set(RL_EINVAL, "the envs ran %lld steps, not %lld chunk steps of %lld", (long long)e->K,
                            (long long)S, (long long)C);
    rl_embodied_chunk_arrays(e->rewards, e->valid, B, S, C, b->step_rewards, b->chunk_rewards, b->step_mask);
    int rc = rl_flow_episode_rewards(b->step_rewards, S, B, C, b->ep_reward);
    memcpy(b->ep_task, e->task, sizeof(int64_t) * (size_t)B);
    if (!rc)
        rc = s_join(b, e, rec, E, cols);
    if (!rc)
        rc = s_row_columns(b, cols, seed, step, clip_actions, ms);
    if (rc)
        return rc;
    double succ = 0, len = 0;
    for (int64_t i = 0; i < B; i++)
        succ += e->success[i];
    for (int64_t i = 0; i < S * B; i++)
        len += b->step_mask[i];
    rl_metric_set_put(ms, "env/success_once", B ? succ / B : 0);
    rl_metric_set_put(ms, "env/episode_chunks", B ? len / B : 0);
    rl_metric_set_put(ms, "env/episodes", (double)B);
    rl_metric_set_put(ms, "rollout/rows", (double)rl_dataproto_rows(b->rows));
    return RL_OK;
}

/* ---- credit ---------------------------------------------------------------------------------------- */

/* The (n) or (n, D) f32 column `name` of the rows, or NULL + message. */
static const float *s_col(const rl_episode_batch *b, const char *name, int64_t D)
{
    int64_t n = rl_dataproto_rows(b->rows);
    const rl_tensor *t = D ? rl_dataproto_tensor_shaped(b->rows, name, RL_F32, 2, (int64_t[]){n, D})
                           : rl_dataproto_tensor_shaped(b->rows, name, RL_F32, 1, (int64_t[]){n});
    return t ? rl_tensor_data(t) : NULL;
}

/* A new (n) f32 column `name` of the rows, or NULL + message. */
static float *s_new_col(rl_episode_batch *b, const char *name)
{
    rl_tensor *t = rl_dataproto_new_tensor(b->rows, name, RL_F32, 1, (int64_t[]){rl_dataproto_rows(b->rows)});
    return t ? rl_tensor_data(t) : NULL;
}

/* The credit's diagnostics (issue 43): the weights' normalised entropy per
 * episode, their saturation, the share of successful episodes and, for
 * FlowSAR (clipped non-NULL), how often its clip bounds bind. */
static void s_credit_stats_put(const float *w, const rl_episode_batch *b, const int64_t *clipped,
                               rl_metric_set *ms)
{
    rl_flow_credit_stats st;
    if (rl_flow_credit_stats_get(w, b->ep_reward, b->step_mask, b->S, b->B, &st))
        return;
    if (isfinite(st.entropy))
        rl_metric_set_put(ms, "actor/credit_entropy", st.entropy);
    if (st.steps > 0)
        rl_metric_set_put(ms, "actor/credit_saturated_frac", st.saturated);
    if (st.episodes > 0)
        rl_metric_set_put(ms, "actor/credit_pos_frac", st.pos_frac);
    if (clipped && st.steps > 0) {
        rl_metric_set_put(ms, "actor/credit_clip_low_frac", (double)clipped[0] / (double)st.steps);
        rl_metric_set_put(ms, "actor/credit_clip_high_frac", (double)clipped[1] / (double)st.steps);
    }
}

/* FlowSAR: softmax credit weights and labels of the recon errors; with
 * flow_sar_credit success, the successful episodes' rows only. */
static int s_credit_sar(rl_episode_batch *b, const rl_episode_cols *cols, const rl_flow_rl_config *alg,
                        float *sb, float *w, float *lab, rl_metric_set *ms)
{
    const int64_t S = b->S, B = b->B;
    int64_t n = rl_dataproto_rows(b->rows);
    const float *e = s_col(b, cols->recon, 0);
    float *wc = e ? s_new_col(b, cols->weights) : NULL, *lc = wc ? s_new_col(b, cols->labels) : NULL;
    if (!lc)
        return rl_error_code();
    for (int64_t i = 0; i < S * B; i++)
        sb[i] = 0;
    for (int64_t k = 0; k < n; k++)
        sb[b->row_sb[k]] = e[k];
    int64_t clipped[2];
    int rc = rl_flow_sar_weights_ex(sb, b->ep_reward, b->step_mask, S, B, alg->sar_temperature, alg->sar_w_min,
                                    alg->sar_w_max, w, lab, clipped);
    if (rc)
        return rc;
    s_credit_stats_put(w, b, clipped, ms);
    double em = 0;
    for (int64_t k = 0; k < n; k++) {
        wc[k] = w[b->row_sb[k]];
        lc[k] = lab[b->row_sb[k] % B];
        em += e[k];
    }
    rl_metric_set_put(ms, "actor/recon_error_mean", n ? em / n : 0);
    if (alg->sar_balance && alg->sar_credit != 1) {
        /* label balance: the positive and the negative rows' weights scaled
         * to half the step's total each (the total, the episodes, kept);
         * a step of one label only is left as it is */
        double pos = 0, neg = 0;
        for (int64_t k = 0; k < n; k++)
            *(lc[k] > 0 ? &pos : &neg) += wc[k];
        if (pos > 0 && neg > 0) {
            const float sp = (float)((pos + neg) / (2 * pos)), sn = (float)((pos + neg) / (2 * neg));
            for (int64_t k = 0; k < n; k++)
                wc[k] *= lc[k] > 0 ? sp : sn;
        }
    }
    if (alg->sar_neg_coef != 1.0 && alg->sar_credit != 1)
        /* the negative branch's share (issue 43): the failed episodes'
         * weights scaled, the successes' as they are */
        for (int64_t k = 0; k < n; k++)
            if (lc[k] < 0)
                wc[k] *= (float)alg->sar_neg_coef;
    if (alg->sar_credit != 1)
        return RL_OK;
    /* success-filtered self-imitation: every chunk of a successful episode
     * with w = 1, R = 1 (with mse_branch and β = 1 the loss is plain flow
     * matching on it); the failed episodes' rows leave the batch, so the
     * loss is a mean over the successes' chunks */
    int64_t *keep = malloc(sizeof(int64_t) * (size_t)(n + 1)), m = 0;
    if (!keep)
        return s_oom();
    for (int64_t k = 0; k < n; k++)
        if (b->ep_reward[b->row_sb[k] % B] >= 0.5f) {
            wc[k] = 1.0f;
            lc[k] = 1.0f;
            b->row_sb[m] = b->row_sb[k];
            keep[m++] = k;
        }
    rl_dataproto *sub = rl_dataproto_index(b->rows, keep, m);
    free(keep);
    if (!sub)
        return rl_error_code();
    rl_dataproto_free(b->rows);
    b->rows = sub;
    rl_metric_set_put(ms, "actor/trained_rows", (double)m);
    return RL_OK;
}

/* FlowIPO: sigmoid weights of the actions against the reference's. */
static int s_credit_ipo(rl_episode_batch *b, const rl_episode_cols *cols, const rl_flow_rl_config *alg,
                        int clip_actions, float *w, rl_metric_set *ms)
{
    const int64_t S = b->S, B = b->B, D = b->D, n = rl_dataproto_rows(b->rows);
    const float *ref = s_col(b, cols->ref_action, D), *act = ref ? s_col(b, cols->flow_action, D) : NULL;
    float *wc = act ? s_new_col(b, cols->weights) : NULL;
    if (!wc)
        return rl_error_code();
    float *A = calloc((size_t)(S * B * D + 1), sizeof(float)), *R = calloc((size_t)(S * B * D + 1), sizeof(float));
    int rc = A && R ? RL_OK : s_oom();
    for (int64_t k = 0; !rc && k < n; k++) {
        memcpy(A + b->row_sb[k] * D, act + k * D, sizeof(float) * (size_t)D);
        memcpy(R + b->row_sb[k] * D, ref + k * D, sizeof(float) * (size_t)D);
    }
    if (!rc && clip_actions) /* compared with the executed (clipped) actions */
        (void)rl_flow_clip_actions(R, S * B * D, -1.0f, 1.0f);
    rl_flow_ipo_weight_stats st = {0};
    if (!rc)
        rc = rl_flow_ipo_weights(A, R, b->ep_reward, b->step_mask, S, B, D, alg->ipo_alpha, 1e-8, w, &st);
    for (int64_t k = 0; !rc && k < n; k++)
        wc[k] = w[b->row_sb[k]];
    if (!rc) {
        rl_metric_set_put(ms, "actor/mean_weight", st.weight_mean);
        rl_metric_set_put(ms, "actor/delta_mean", st.delta_mean);
        s_credit_stats_put(w, b, NULL, ms);
    }
    free(A);
    free(R);
    return rc;
}

/* GRPO over the env groups of env.group_size (global env b is in group
 * b / G), or over the episodes of a task when it is 1. */
static int s_credit_grpo(rl_episode_batch *b, const rl_episode_cols *cols, const rl_flow_rl_config *alg,
                         int64_t G, rl_metric_set *ms)
{
    const int64_t B = b->B, n = rl_dataproto_rows(b->rows);
    float *adv = s_new_col(b, cols->advantages), *ea = adv ? malloc(sizeof(float) * (size_t)(B + 1)) : NULL;
    if (!ea)
        return adv ? s_oom() : rl_error_code();
    int64_t *grp = G > 1 ? malloc(sizeof(int64_t) * (size_t)(B + 1)) : NULL, kept = 0;
    int rc = G > 1 && !grp ? s_oom() : RL_OK;
    for (int64_t i = 0; !rc && grp && i < B; i++)
        grp[i] = i / G;
    if (!rc)
        rc = rl_embodied_grpo_advantages(b->ep_reward, grp ? grp : b->ep_task, B,
                                         grp ? (B + G - 1) / G : RL_ENV_MAX_TASKS, alg->filter_rewards,
                                         alg->rewards_lower, alg->rewards_upper, ea, &kept);
    for (int64_t k = 0; !rc && k < n; k++)
        adv[k] = ea[b->row_sb[k] % B];
    if (!rc)
        rl_metric_set_put(ms, "critic/kept_groups", (double)kept);
    free(grp);
    free(ea);
    return rc;
}

/* PPO: GAE over the chunk steps of each episode, (B, S). */
static int s_credit_gae(rl_episode_batch *b, const rl_episode_cols *cols, const rl_flow_rl_config *alg,
                        float *rr)
{
    const int64_t S = b->S, B = b->B, n = rl_dataproto_rows(b->rows);
    const float *val = s_col(b, cols->values, 0);
    float *adv = val ? s_new_col(b, cols->advantages) : NULL;
    float *ret = adv ? s_new_col(b, cols->returns) : NULL, *ov = ret ? s_new_col(b, cols->old_values) : NULL;
    if (!ov)
        return rl_error_code();
    float *rw = calloc((size_t)(4 * S * B + 1), sizeof(float));
    if (!rw)
        return s_oom();
    float *vv = rw + S * B, *mm = vv + S * B, *aa = mm + S * B;
    for (int64_t i = 0; i < S * B; i++) {
        int64_t t = i / B, e = i % B;
        rw[e * S + t] = b->chunk_rewards[i];
        mm[e * S + t] = b->step_mask[i];
    }
    for (int64_t k = 0; k < n; k++)
        vv[b->row_sb[k] % B * S + b->row_sb[k] / B] = val[k];
    int rc = rl_adv_gae(rw, vv, mm, B, S, alg->gamma, alg->gae_lambda, alg->normalize_adv, aa, rr);
    for (int64_t k = 0; !rc && k < n; k++) {
        int64_t at = b->row_sb[k] % B * S + b->row_sb[k] / B;
        adv[k] = aa[at];
        ret[k] = rr[at];
        ov[k] = val[k];
    }
    free(rw);
    return rc;
}

/* actor.loss_agg_mode seq-mean-token-mean: every episode weighs the same
 * in the loss, however many chunk steps it ran. */
static int s_seq_mean(rl_episode_batch *b, const rl_episode_cols *cols)
{
    const int64_t n = rl_dataproto_rows(b->rows);
    float *adv = rl_tensor_data(rl_dataproto_tensor(b->rows, cols->advantages));
    int64_t *ep = malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!ep)
        return s_oom();
    for (int64_t k = 0; k < n; k++)
        ep[k] = b->row_sb[k] % b->B;
    int rc = rl_embodied_seq_mean_scale(ep, n, b->B, adv);
    free(ep);
    return rc;
}

/* The sampler's log-probs are the old ones. */
static int s_old_logp(rl_episode_batch *b, const rl_episode_cols *cols)
{
    const int64_t n = rl_dataproto_rows(b->rows);
    const rl_tensor *lp = rl_dataproto_tensor_shaped(b->rows, cols->sample_logp, RL_F32, 2, (int64_t[]){n, -1});
    rl_tensor *ot = lp ? rl_dataproto_new_tensor(b->rows, cols->old_logp, RL_F32, 2, (int64_t[]){n, lp->shape[1]})
                       : NULL;
    if (!ot)
        return rl_error_code();
    memcpy(rl_tensor_data(ot), rl_tensor_data(lp), sizeof(float) * (size_t)(n * lp->shape[1]));
    return RL_OK;
}

int rl_episode_credit(rl_episode_batch *b, const rl_episode_cols *cols, const rl_flow_rl_config *alg,
                      const rl_estimator *est, const rl_env_config *env, rl_metric_set *ms)
{
    const int64_t S = b->S, B = b->B;
    float *sb = malloc(sizeof(float) * (size_t)(S * B + 1)), *w = malloc(sizeof(float) * (size_t)(S * B + 1));
    float *lab = malloc(sizeof(float) * (size_t)(B + 1));
    int rc = sb && w && lab ? RL_OK : s_oom();
    double succ = 0;
    for (int64_t i = 0; i < B; i++)
        succ += b->ep_reward[i];
    const int pg = alg->loss >= RL_FLOW_LOSS_GRPO;
    if (!rc && alg->loss == RL_FLOW_LOSS_SAR)
        rc = s_credit_sar(b, cols, alg, sb, w, lab, ms);
    else if (!rc && alg->loss == RL_FLOW_LOSS_IPO)
        rc = s_credit_ipo(b, cols, alg, env->clip_actions, w, ms);
    else if (!rc && est->id == RL_EST_GRPO)
        rc = s_credit_grpo(b, cols, alg, env->group_size, ms);
    else if (!rc && est->id == RL_EST_GAE)
        rc = s_credit_gae(b, cols, alg, w);
    else if (!rc)
        rc = rl_error_set(RL_EINVAL, "the embodied track has no credit for estimator '%s'", est->name);
    if (!rc && !pg) { /* the seeds' dummy advantages: zeros, so the data keeps its shape */
        float *adv = s_new_col(b, cols->advantages);
        if (!adv)
            rc = rl_error_code();
        else
            memset(adv, 0, sizeof(float) * (size_t)rl_dataproto_rows(b->rows));
    }
    if (!rc && pg && alg->seq_mean)
        rc = s_seq_mean(b, cols);
    if (!rc && pg)
        rc = s_old_logp(b, cols);
    if (!rc)
        rl_metric_set_put(ms, "critic/rewards/mean", B ? succ / B : 0);
    free(sb);
    free(w);
    free(lab);
    return rc;
}

/* ---- the update ------------------------------------------------------------------------------------- */

void rl_episode_shuffle(uint64_t seed, int64_t step, int64_t epoch, int64_t *perm, int64_t n)
{
    rl_rng g;
    rl_rng_init(&g, seed ^ 0x1b3e70ull, (uint64_t)step * 1000u + (uint64_t)epoch);
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)rl_rng_below(&g, (uint64_t)i + 1), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
}

void rl_episode_update_put(const rl_episode_update *u, const char *const *names, const rl_flow_rl_config *alg,
                           rl_metric_set *ms)
{
    const double *tot = u->sum, rows = tot[RL_FUS_ROWS] > 0 ? tot[RL_FUS_ROWS] : 1;
    if (alg->loss == RL_FLOW_LOSS_SAR) {
        for (int k = RL_FUS_SAR_LOSS; k <= RL_FUS_SAR_WEIGHT; k++)
            rl_metric_set_put(ms, names[k], tot[k] / rows);
        rl_metric_set_put(ms, "actor/flow_sar_energy_type", alg->sar_energy ? 1.0 : 0.0);
        rl_metric_set_put(ms, "actor/flow_sar_loss_variant", alg->sar_variant ? 1.0 : 0.0);
        rl_metric_set_put(ms, names[RL_FUS_SAR_LABEL_POS], tot[RL_FUS_SAR_LABEL_POS] / rows);
        if (alg->sar_variant) {
            rl_metric_set_put(ms, names[RL_FUS_SAR_CONTRASTIVE], tot[RL_FUS_SAR_CONTRASTIVE] / rows);
            rl_metric_set_put(ms, names[RL_FUS_SAR_KL], tot[RL_FUS_SAR_KL] / rows);
            rl_metric_set_put(ms, names[RL_FUS_SAR_SP_SCALE], tot[RL_FUS_SAR_SP_SCALE] / rows);
            rl_metric_set_put(ms, names[RL_FUS_SAR_SP_FLAT], tot[RL_FUS_SAR_SP_FLAT] / rows);
        } else {
            rl_metric_set_put(ms, names[RL_FUS_SAR_SUCCESS], tot[RL_FUS_SAR_SUCCESS] / rows);
        }
    } else if (alg->loss == RL_FLOW_LOSS_IPO) {
        rl_metric_set_put(ms, names[RL_FUS_IPO_LOSS], tot[RL_FUS_IPO_LOSS] / rows);
        rl_metric_set_put(ms, names[RL_FUS_VELOCITY_MSE], tot[RL_FUS_VELOCITY_MSE] / rows);
        rl_metric_set_put(ms, names[RL_FUS_IPO_GAP], tot[RL_FUS_IPO_GAP] / rows);
    } else if (tot[RL_FUS_STEPS] > 0) {
        for (int k = RL_FUS_PG_LOSS; k <= RL_FUS_RATIO; k++)
            rl_metric_set_put(ms, names[k], tot[k] / tot[RL_FUS_STEPS]);
        rl_metric_set_put(ms, names[RL_FUS_STEPS], tot[RL_FUS_STEPS]);
        if (alg->loss == RL_FLOW_LOSS_PPO)
            rl_metric_set_put(ms, names[RL_FUS_VALUE_LOSS], tot[RL_FUS_VALUE_LOSS] / rows);
    }
    if (u->demo_rows > 0) {
        rl_metric_set_put(ms, names[RL_FUS_DEMO], tot[RL_FUS_DEMO] / u->demo_rows);
        if (alg->loss == RL_FLOW_LOSS_SAR || alg->loss == RL_FLOW_LOSS_IPO)
            for (int k = RL_FUS_G_RL; k <= RL_FUS_G_COS; k++)
                rl_metric_set_put(ms, names[k], tot[k] / rows);
    }
    rl_metric_set_put(ms, "actor/updates", u->updates);
    rl_metric_set_put(ms, "actor/grad_norm", u->updates ? u->grad_norm / u->updates : 0);
    rl_metric_set_put(ms, "actor/lr", u->lr);
}

/* ---- evaluation ----------------------------------------------------------------------------------------- */

int64_t rl_episode_eval_rounds(const rl_env_config *env, int64_t per_task)
{
    int64_t per_env_task = env->total_num_envs / env->num_tasks;
    if (per_env_task < 1)
        per_env_task = 1;
    return (per_task + per_env_task - 1) / per_env_task;
}

static void s_tally_add(rl_episode_tally *t, int64_t task, int ok)
{
    t->ok[task] += ok;
    t->n[task]++;
    t->all_ok += ok;
    t->all++;
}

void rl_episode_tally_round(rl_episode_tally *t, const rl_episode_envs *e, const rl_env_config *env,
                            int64_t round, int64_t per_task)
{
    for (int64_t g = 0; g < e->B; g++) {
        const rl_env_place p = rl_env_place_of(env, g, 1);
        if (p.k + round * p.sharing < per_task) /* only the first per_task states */
            s_tally_add(t, e->task[g], e->success[g]);
    }
}

void rl_episode_tally_first(rl_episode_tally *t, const rl_episode_envs *e, int64_t limit)
{
    for (int64_t g = 0; g < e->B && t->all < limit; g++)
        s_tally_add(t, e->task[g], e->success[g]);
}

void rl_episode_tally_put(const rl_episode_tally *t, const char *overall, rl_metric_set *ms, char *line,
                          size_t size)
{
    size_t n = line && size ? strlen(line) : 0;
    for (int k = 0; k < RL_ENV_MAX_TASKS; k++)
        if (t->n[k]) {
            char key[64];
            double v = (double)t->ok[k] / (double)t->n[k];
            snprintf(key, sizeof key, "eval/success_task_%d", k);
            rl_metric_set_put(ms, key, v);
            if (line && n < size)
                n += (size_t)snprintf(line + n, size - n, " %d:%.2f", k, v);
        }
    rl_metric_set_put(ms, overall, t->all ? (double)t->all_ok / (double)t->all : 0.0);
    rl_metric_set_put(ms, "eval/episodes", (double)t->all);
}
