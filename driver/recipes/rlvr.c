/* rlvr.c — language-model RL with verifiable rewards, in verl's order:
 *   prompts → repeat n (uid per prompt) → rollout generates tokens, log-probs
 *   and entropies → reward → old log-probs (actor) and reference log-probs
 *   (frozen copy on the actor ranks, when a KL term is used) → KL in the
 *   reward or as a loss → advantages → actor update (ppo_epochs ×
 *   mini-batches, micro-batches and FSDP inside the actor) → weight sync
 *   actor → rollout → metrics → validation and checkpoint every k steps.
 * Estimators: grpo, rloo, reinforce_plus_plus, reinforce_plus_plus_baseline,
 * reinforce_pro_max (algorithm.uniform_scale). Online filtering of groups by
 * the mean of algorithm.filter_key. trainer.resume continues from the latest
 * checkpoint with the same batches (data position and weights restored). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm_common.h"
#include "rlrt/algo/advantage.h"
#include "rlrt/algo/aepo.h"
#include "rlrt/algo/filter.h"
#include "rlrt/algo/kl.h"
#include "rlrt/nn/checkpoint.h"
#include "rlrt/rlrt.h"

typedef struct {
    const char *estimator;
    int norm_by_std, uniform_scale, use_kl_in_reward, use_kl_loss, filtering;
    int64_t n, batch, mini_batch, epochs, steps, val_every, save_every, max_tries;
    double gamma, kl_coef, filter_low, filter_high;
    const char *kl_penalty, *filter_key, *out_dir, *kl_ctrl_type;
    double kl_target, kl_horizon;
    int resume;
    uint64_t seed;
    /* ARES/AEPO */
    int aepo, dynamic_kl, bootstrap;
    int64_t window, bootstrap_size;
    double percentile, tau_decay;
} s_opts;

static int s_read_opts(const rl_config *job, s_opts *o)
{
    memset(o, 0, sizeof *o);
    int64_t seed;
    if (rl_config_get_string(job, "algorithm.adv_estimator", &o->estimator) ||
        rl_config_get_bool(job, "algorithm.norm_adv_by_std_in_grpo", &o->norm_by_std) ||
        rl_config_get_bool(job, "algorithm.uniform_scale", &o->uniform_scale) ||
        rl_config_get_bool(job, "algorithm.use_kl_in_reward", &o->use_kl_in_reward) ||
        rl_config_get_string(job, "algorithm.kl_penalty", &o->kl_penalty) ||
        rl_config_get_double(job, "algorithm.kl_ctrl.kl_coef", &o->kl_coef) ||
        rl_config_get_string(job, "algorithm.kl_ctrl.type", &o->kl_ctrl_type) ||
        rl_config_get_double(job, "algorithm.kl_ctrl.target_kl", &o->kl_target) ||
        rl_config_get_double(job, "algorithm.kl_ctrl.horizon", &o->kl_horizon) ||
        rl_config_get_double(job, "algorithm.gamma", &o->gamma) ||
        rl_config_get_bool(job, "algorithm.online_filtering", &o->filtering) ||
        rl_config_get_string(job, "algorithm.filter_key", &o->filter_key) ||
        rl_config_get_double(job, "algorithm.filter_low", &o->filter_low) ||
        rl_config_get_double(job, "algorithm.filter_high", &o->filter_high) ||
        rl_config_get_int(job, "algorithm.max_try_make_batch", &o->max_tries) ||
        rl_config_get_bool(job, "actor.use_kl_loss", &o->use_kl_loss) ||
        rl_config_get_int(job, "actor.ppo_mini_batch_size", &o->mini_batch) ||
        rl_config_get_int(job, "actor.ppo_epochs", &o->epochs) ||
        rl_config_get_int(job, "rollout.n", &o->n) ||
        rl_config_get_int(job, "data.train_batch_size", &o->batch) ||
        rl_config_get_int(job, "trainer.total_steps", &o->steps) ||
        rl_config_get_int(job, "trainer.val_every", &o->val_every) ||
        rl_config_get_int(job, "trainer.save_every", &o->save_every) ||
        rl_config_get_string(job, "trainer.output_dir", &o->out_dir) ||
        rl_config_get_bool(job, "trainer.resume", &o->resume) ||
        rl_config_get_int(job, "trainer.seed", &seed) ||
        rl_config_get_bool(job, "algorithm.aepo.enable", &o->aepo) ||
        rl_config_get_bool(job, "algorithm.aepo.dynamic_kl", &o->dynamic_kl) ||
        rl_config_get_double(job, "algorithm.aepo.percentile", &o->percentile) ||
        rl_config_get_double(job, "algorithm.aepo.tau_decay", &o->tau_decay) ||
        rl_config_get_int(job, "rollout.window_size", &o->window) ||
        rl_config_get_bool(job, "data.bootstrap", &o->bootstrap) ||
        rl_config_get_int(job, "data.bootstrap_size", &o->bootstrap_size))
        return rl_error_code();
    o->seed = (uint64_t)seed;
    if (strcmp(o->kl_ctrl_type, "fixed") != 0 && strcmp(o->kl_ctrl_type, "adaptive") != 0)
        return rl_error_set(RL_ECONFIG, "algorithm.kl_ctrl.type: expected fixed or adaptive, got '%s'",
                            o->kl_ctrl_type);
    static const char *known[] = {"grpo", "rloo", "reinforce_plus_plus",
                                  "reinforce_plus_plus_baseline", "reinforce_pro_max"};
    int ok = 0;
    for (int i = 0; i < 5; i++)
        ok |= strcmp(o->estimator, known[i]) == 0;
    if (!ok)
        return rl_error_set(RL_ECONFIG, "algorithm.adv_estimator: unknown estimator '%s' (known: "
                                        "grpo, rloo, reinforce_plus_plus, reinforce_plus_plus_baseline, "
                                        "reinforce_pro_max)", o->estimator);
    if (o->mini_batch <= 0 || o->batch % o->mini_batch)
        return rl_error_set(RL_ECONFIG, "actor.ppo_mini_batch_size %lld must divide "
                                        "data.train_batch_size %lld", (long long)o->mini_batch,
                            (long long)o->batch);
    if (o->n < 1 || (strcmp(o->estimator, "reinforce_plus_plus") != 0 && o->n < 2))
        return rl_error_set(RL_ECONFIG, "rollout.n = %lld: %s needs at least 2 samples per prompt",
                            (long long)o->n, o->estimator);
    return RL_OK;
}

static double s_meta_num(const rl_dataproto *dp, const char *key)
{
    return json_number_value(json_object_get(rl_dataproto_meta_const(dp), key));
}

/* splitmix64: distinct per-row seeds from (seed, step, row) */
static uint64_t s_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* One round of generation: `prompts` prompt rows repeated n times (uid =
 * the prompt's global_id), sampled and scored. */
static int s_generate_round(rl_lm_job *j, const s_opts *o, int64_t step, int64_t round,
                            int64_t prompts, rl_dataproto **out, double *gen_s, double *rew_s)
{
    rl_dataproto *p = NULL;
    int rc = rl_data_iter_next(j->it, prompts, &p);
    if (rc)
        return rc;
    rl_dataproto *dp = rl_dataproto_repeat(p, o->n, 1);
    rl_dataproto_free(p);
    if (!dp)
        return rl_error_code();
    int64_t B = rl_dataproto_rows(dp);
    int64_t shape[1] = {B};
    int64_t *seeds = rl_tensor_data(rl_dataproto_new_tensor(dp, "row_seeds", RL_I64, 1, shape));
    for (int64_t b = 0; b < B; b++)
        seeds[b] = (int64_t)s_mix(o->seed ^ s_mix((uint64_t)step * 1000003u + (uint64_t)round) ^
                                  s_mix((uint64_t)b));
    rc = rl_lm_job_encode_prompts(j, dp);
    if (!rc)
        rc = rl_lm_job_rollout(j, &dp, 0, gen_s, rew_s);
    if (rc) {
        rl_dataproto_free(dp);
        return rc;
    }
    *out = dp;
    return RL_OK;
}

/* Keeps the groups whose mean filter_key lies in (low, high). */
static int s_filter(const s_opts *o, rl_dataproto **dp, int64_t *kept_groups)
{
    int64_t B = rl_dataproto_rows(*dp);
    const rl_tensor *m = rl_dataproto_tensor_typed(*dp, o->filter_key, RL_F32);
    const rl_column *gid = m ? rl_dataproto_column(*dp, "global_id") : NULL;
    if (!gid)
        return rl_error_wrap(RL_ENOTFOUND, "algorithm.filter_key '%s'", o->filter_key);
    int64_t *group = malloc(sizeof(int64_t) * (size_t)B), *rows = malloc(sizeof(int64_t) * (size_t)B);
    uint8_t *keep = malloc((size_t)B);
    for (int64_t b = 0; b < B; b++)
        group[b] = rl_column_i64(gid, b);
    int64_t kept = 0;
    rl_filter_result res;
    int rc = rl_filter_groups(rl_tensor_data(m), group, B, o->filter_low, o->filter_high, keep,
                              &kept, &res);
    int64_t n = 0;
    for (int64_t b = 0; !rc && b < B; b++)
        if (keep[b])
            rows[n++] = b;
    rl_dataproto *f = rc ? NULL : rl_dataproto_index(*dp, rows, n);
    free(group);
    free(rows);
    free(keep);
    if (rc || !f)
        return rc ? rc : rl_error_code();
    rl_dataproto_free(*dp);
    *dp = f;
    *kept_groups = n / o->n;
    return RL_OK;
}

/* (B, R) response mask from response_lens. */
static float *s_response_mask(const rl_dataproto *dp, int64_t *B, int64_t *R)
{
    const rl_tensor *t = rl_dataproto_tensor(dp, "responses");
    const int32_t *len = rl_tensor_data(rl_dataproto_tensor(dp, "response_lens"));
    *B = t->shape[0];
    *R = t->shape[1];
    float *mask = calloc((size_t)((*B) * (*R) > 0 ? (*B) * (*R) : 1), sizeof(float));
    for (int64_t b = 0; b < *B; b++)
        for (int64_t k = 0; k < len[b]; k++)
            mask[b * *R + k] = 1.0f;
    return mask;
}

static int s_log_prob(rl_lm_job *j, rl_dataproto *dp, const char *which, const char *name)
{
    const char *keep[4] = {"prompts", "prompt_lens", "responses", "response_lens"};
    rl_dataproto *req = rl_dataproto_select(dp, keep, 4, NULL, 0), *out = NULL;
    json_object_set_new(rl_dataproto_meta(req), "which", json_string(which));
    int rc = rl_group_call_sync(j->actor, "compute_log_prob", RL_DISPATCH_DP_COMPUTE, req, &out);
    rl_dataproto_free(req);
    if (rc)
        return rc;
    rl_tensor *lp = rl_dataproto_tensor(out, "logp");
    rc = rl_dataproto_add_tensor(dp, name, lp);
    rl_dataproto_free(out);
    return rc;
}

/* Advantages (B, R) into tensor "advantages"; metrics about them. */
static int s_advantages(const s_opts *o, rl_dataproto *dp, const float *kl, rl_metric_set *ms)
{
    int64_t B, R;
    float *mask = s_response_mask(dp, &B, &R);
    const float *score = rl_tensor_data(rl_dataproto_tensor(dp, "score"));
    const rl_column *gid = rl_dataproto_column(dp, "global_id");
    int64_t *group = malloc(sizeof(int64_t) * (size_t)(B ? B : 1));
    for (int64_t b = 0; b < B; b++)
        group[b] = rl_column_i64(gid, b);
    int64_t shape[2] = {B, R};
    float *adv = rl_tensor_data(rl_dataproto_new_tensor(dp, "advantages", RL_F32, 2, shape));
    float *tok = calloc((size_t)(B * R > 0 ? B * R : 1), sizeof(float));
    double kl_coef = o->use_kl_in_reward ? o->kl_coef : 0.0;
    int rc = RL_OK;
    if (strcmp(o->estimator, "reinforce_pro_max") == 0) {
        rl_pro_max_cfg cfg;
        rl_pro_max_cfg_default(&cfg, o->n);
        cfg.kl_coef = kl_coef;
        cfg.uniform_scale = o->uniform_scale;
        cfg.gamma = o->gamma;
        rl_pro_max_result res;
        rc = rl_adv_pro_max(&cfg, score, kl_coef > 0 ? kl : NULL, mask, NULL, group, B, R, adv,
                            NULL, &res);
        if (!rc) {
            if (res.warnings & RL_PM_WARN_GAMMA_FORCED)
                rl_log_warn("reinforce_pro_max: algorithm.gamma %g ignored, gamma = 1 is used", o->gamma);
            rl_metric_set_put(ms, "adv/pro_max_normalized_groups", (double)res.n_normalized);
            rl_metric_set_put(ms, "adv/pro_max_fallback_groups",
                              (double)(res.n_same_sign + res.n_small_sum + res.n_nonfinite));
            rl_metric_set_put(ms, "adv/pro_max_uniform_groups", (double)res.n_uniform);
        }
    } else {
        /* token rewards: the score at the last valid token, − kl_coef·kl */
        rc = rl_token_rewards_kl(score, kl_coef > 0 ? kl : NULL, mask, B, R, kl_coef, tok);
        if (!rc) {
            if (strcmp(o->estimator, "grpo") == 0)
                rc = rl_adv_grpo(tok, mask, group, B, R, RL_GRPO_EPS, o->norm_by_std, adv, NULL);
            else if (strcmp(o->estimator, "rloo") == 0)
                rc = rl_adv_rloo(tok, mask, group, B, R, adv);
            else if (strcmp(o->estimator, "reinforce_plus_plus") == 0)
                rc = rl_adv_reinforce_pp(tok, mask, B, R, o->gamma, adv, NULL);
            else
                rc = rl_adv_reinforce_pp_baseline(tok, mask, group, B, R, adv);
        }
    }
    double s = 0, s2 = 0, n = 0;
    for (int64_t i = 0; !rc && i < B * R; i++)
        if (mask[i]) {
            s += adv[i];
            s2 += (double)adv[i] * adv[i];
            n++;
        }
    if (n > 0) {
        rl_metric_set_put(ms, "critic/advantages/mean", s / n);
        rl_metric_set_put(ms, "critic/advantages/std", sqrt(fmax(s2 / n - (s / n) * (s / n), 0)));
    }
    free(tok);
    free(group);
    free(mask);
    return rc;
}

/* ppo_epochs × mini-batches of the batch (in order), one actor step each. */
static int s_update(rl_lm_job *j, const s_opts *o, rl_dataproto *dp, rl_metric_set *ms)
{
    int W = rl_group_size(j->actor);
    int64_t B = rl_dataproto_rows(dp), mb_rows = o->mini_batch * o->n;
    if (mb_rows % W)
        return rl_error_set(RL_ECONFIG, "a mini-batch of %lld rows (actor.ppo_mini_batch_size × "
                                        "rollout.n) must be a multiple of the %d actor ranks",
                            (long long)mb_rows, W);
    const char *keep[7] = {"prompts", "prompt_lens", "responses", "response_lens", "old_logp",
                           "advantages", "ref_logp"};
    int nkeep = rl_dataproto_tensor(dp, "ref_logp") ? 7 : 6;
    const int32_t *lens = rl_tensor_data(rl_dataproto_tensor(dp, "response_lens"));
    double tokens = 0, pg = 0, clip = 0, kl = 0, klloss = 0, dual = 0, gnorm = 0, lr = 0;
    int updates = 0;
    for (int64_t e = 0; e < o->epochs; e++) {
        for (int64_t r0 = 0; r0 + mb_rows <= B; r0 += mb_rows) {
            rl_dataproto *mb = rl_dataproto_slice(dp, r0, r0 + mb_rows);
            rl_dataproto *req = mb ? rl_dataproto_select(mb, keep, nkeep, NULL, 0) : NULL;
            rl_dataproto_free(mb);
            if (!req)
                return rl_error_code();
            int64_t gt = 0;
            for (int64_t b = r0; b < r0 + mb_rows; b++)
                gt += lens[b];
            json_object_set_new(rl_dataproto_meta(req), "global_tokens", json_integer(gt));
            json_object_set_new(rl_dataproto_meta(req), "global_rows", json_integer(mb_rows));
            rl_future *f = rl_group_call(j->actor, "update_actor", RL_DISPATCH_DP_COMPUTE, req);
            int rc = rl_future_wait(f, -1);
            for (int r = 0; !rc && r < W; r++) {
                rl_dataproto *out = NULL;
                rl_future_take_rank(f, r, &out);
                tokens += s_meta_num(out, "tokens");
                pg += s_meta_num(out, "pg_loss_sum");
                clip += s_meta_num(out, "clipfrac_sum");
                kl += s_meta_num(out, "ppo_kl_sum");
                klloss += s_meta_num(out, "kl_loss_sum");
                dual += s_meta_num(out, "dual_clip_sum");
                gnorm += s_meta_num(out, "grad_norm") / W;
                lr = s_meta_num(out, "lr");
                rl_dataproto_free(out);
            }
            rl_future_free(f);
            rl_dataproto_free(req);
            if (rc)
                return rc;
            updates++;
        }
    }
    if (tokens > 0) {
        rl_metric_set_put(ms, "actor/pg_loss", pg / tokens);
        rl_metric_set_put(ms, "actor/pg_clipfrac", clip / tokens);
        rl_metric_set_put(ms, RL_M_PPO_KL, kl / tokens);
        rl_metric_set_put(ms, "actor/pg_clipfrac_lower", dual / tokens);
        if (o->use_kl_loss)
            rl_metric_set_put(ms, RL_M_KL_LOSS, klloss / tokens);
    }
    rl_metric_set_put(ms, "actor/grad_norm", updates ? gnorm / updates : 0);
    rl_metric_set_put(ms, "actor/lr", lr);
    return RL_OK;
}

static void s_batch_metrics(const rl_dataproto *dp, rl_metric_set *ms)
{
    int64_t B = rl_dataproto_rows(dp), R = rl_dataproto_tensor(dp, "responses")->shape[1];
    const float *score = rl_tensor_data(rl_dataproto_tensor(dp, "score"));
    const float *acc = rl_tensor_data(rl_dataproto_tensor(dp, "accuracy"));
    const float *fmt = rl_tensor_data(rl_dataproto_tensor(dp, "format"));
    const float *ent = rl_tensor_data(rl_dataproto_tensor(dp, "response_entropy"));
    const int32_t *len = rl_tensor_data(rl_dataproto_tensor(dp, "response_lens"));
    double s = 0, a = 0, f = 0, l = 0, e = 0, nt = 0, smax = -1e30, smin = 1e30;
    for (int64_t b = 0; b < B; b++) {
        s += score[b];
        a += acc[b];
        f += fmt[b];
        l += len[b];
        smax = fmax(smax, score[b]);
        smin = fmin(smin, score[b]);
        for (int64_t k = 0; k < len[b]; k++, nt++)
            e += ent[b * R + k];
    }
    rl_metric_set_put(ms, RL_M_SCORE_MEAN, B ? s / B : 0);
    rl_metric_set_put(ms, "critic/score/max", B ? smax : 0);
    rl_metric_set_put(ms, "critic/score/min", B ? smin : 0);
    rl_metric_set_put(ms, RL_M_ACCURACY, B ? a / B : 0);
    rl_metric_set_put(ms, "critic/format/mean", B ? f / B : 0);
    rl_metric_set_put(ms, RL_M_RESPONSE_LEN, B ? l / B : 0);
    rl_metric_set_put(ms, RL_M_ENTROPY, nt ? e / nt : 0);
}

/* ---- ARES / AEPO -------------------------------------------------------------------- */

static rl_aepo_state *s_aepo_new(const s_opts *o)
{
    rl_aepo_config cfg;
    rl_aepo_config_default(&cfg);
    cfg.window = (int)o->window;
    cfg.percentile = o->percentile;
    cfg.tau_decay = o->tau_decay;
    return rl_aepo_state_new(&cfg);
}

/* HWE flags (B,R) and counts (B) of a scored batch; folds the batch's
 * percentiles into τ first. */
static int s_aepo_hwe(rl_aepo_state *st, const s_opts *o, const rl_dataproto *dp, uint8_t *flags,
                      float *counts, rl_metric_set *ms)
{
    int64_t B, R;
    float *mask = s_response_mask(dp, &B, &R);
    const float *H = rl_tensor_data(rl_dataproto_tensor(dp, "response_entropy"));
    float *win = malloc(sizeof(float) * (size_t)(B * R > 0 ? B * R : 1));
    uint8_t *wv = malloc((size_t)(B * R > 0 ? B * R : 1));
    float *pct = malloc(sizeof(float) * (size_t)(B > 0 ? B : 1));
    uint8_t *has = malloc((size_t)(B > 0 ? B : 1));
    double median = 0, tau = 0;
    int rc = rl_aepo_window_entropy(H, mask, B, R, (int)o->window, win, wv);
    if (!rc)
        rc = rl_aepo_window_percentile(win, wv, B, R, o->percentile, pct, has);
    if (!rc)
        rc = rl_aepo_threshold_update(st, pct, has, B, &median);
    if (!rc && rl_aepo_threshold_get(st, &tau) != RL_OK) { /* no complete window yet */
        memset(flags, 0, (size_t)(B * R));
        memset(counts, 0, sizeof(float) * (size_t)B);
    } else if (!rc) {
        rc = rl_aepo_hwe(win, wv, NULL, B, R, tau, flags, counts);
    }
    if (!rc && ms) {
        double c = 0;
        for (int64_t b = 0; b < B; b++)
            c += counts[b];
        rl_metric_set_put(ms, "aepo/tau", tau);
        rl_metric_set_put(ms, "aepo/hwe_count_mean", B ? c / B : 0);
    }
    free(win);
    free(wv);
    free(pct);
    free(has);
    free(mask);
    return rc;
}

/* Difficulty buckets, α and targets from this batch, then the entropy
 * reward added to "score". Leaves the per-row buckets and HWE flags for the
 * KL steps. */
static int s_aepo_shape(rl_aepo_state *st, const s_opts *o, rl_dataproto *dp, int8_t **bucket_out,
                        uint8_t **flags_out, rl_metric_set *ms)
{
    int64_t B = rl_dataproto_rows(dp), R = rl_dataproto_tensor(dp, "responses")->shape[1];
    uint8_t *flags = malloc((size_t)(B * R > 0 ? B * R : 1));
    float *counts = malloc(sizeof(float) * (size_t)(B > 0 ? B : 1));
    float *ent = malloc(sizeof(float) * (size_t)(B > 0 ? B : 1));
    int8_t *bucket = malloc((size_t)(B > 0 ? B : 1));
    int64_t *gid = malloc(sizeof(int64_t) * (size_t)(B > 0 ? B : 1));
    const rl_column *g = rl_dataproto_column(dp, "global_id");
    for (int64_t b = 0; b < B; b++)
        gid[b] = rl_column_i64(g, b);
    const float *acc = rl_tensor_data(rl_dataproto_tensor(dp, "accuracy"));
    float *score = rl_tensor_data(rl_dataproto_tensor(dp, "score"));
    rl_aepo_batch_stats stats;
    int rc = s_aepo_hwe(st, o, dp, flags, counts, ms);
    if (!rc)
        rc = rl_aepo_update(st, gid, acc, counts, B, bucket, &stats);
    if (!rc)
        rc = rl_aepo_entropy_reward(st, bucket, acc, counts, B, ent, NULL);
    double es = 0;
    for (int64_t b = 0; !rc && b < B; b++) {
        score[b] += ent[b];
        es += ent[b];
    }
    if (!rc) {
        rl_metric_set_put(ms, "aepo/entropy_reward_mean", B ? es / B : 0);
        for (int k = 0; k < RL_AEPO_NBUCKETS; k++) {
            char key[64];
            int has;
            snprintf(key, sizeof key, "aepo/alpha_%s", rl_aepo_bucket_name(k));
            rl_metric_set_put(ms, key, rl_aepo_alpha(st, k));
            snprintf(key, sizeof key, "aepo/target_%s", rl_aepo_bucket_name(k));
            rl_metric_set_put(ms, key, rl_aepo_target(st, k, &has));
            if (stats.n_ids[k] > 0) {
                snprintf(key, sizeof key, "aepo/hwe_%s_mean", rl_aepo_bucket_name(k));
                rl_metric_set_put(ms, key, stats.mean_hwe[k]);
            }
            snprintf(key, sizeof key, "aepo/rows_%s", rl_aepo_bucket_name(k));
            rl_metric_set_put(ms, key, (double)stats.n_rows[k]);
        }
    }
    free(counts);
    free(ent);
    free(gid);
    if (rc) {
        free(flags);
        free(bucket);
        return rc;
    }
    *bucket_out = bucket;
    *flags_out = flags;
    return RL_OK;
}

/* Bootstrap: rollouts over data.bootstrap_size prompts before training set
 * the difficulty buckets and HWE targets. */
static int s_aepo_bootstrap(rl_lm_job *j, const s_opts *o, rl_aepo_state *st)
{
    int64_t done = 0;
    int rc = RL_OK;
    for (int64_t round = 0; !rc && done < o->bootstrap_size; round++) {
        rl_dataproto *dp = NULL;
        double g, r;
        int64_t n = o->batch < o->bootstrap_size - done ? o->batch : o->bootstrap_size - done;
        if ((rc = s_generate_round(j, o, 0, 1000 + round, n, &dp, &g, &r)))
            break;
        int64_t B = rl_dataproto_rows(dp), R = rl_dataproto_tensor(dp, "responses")->shape[1];
        uint8_t *flags = malloc((size_t)(B * R > 0 ? B * R : 1));
        float *counts = malloc(sizeof(float) * (size_t)(B > 0 ? B : 1));
        int64_t *gid = malloc(sizeof(int64_t) * (size_t)(B > 0 ? B : 1));
        const rl_column *gc = rl_dataproto_column(dp, "global_id");
        for (int64_t b = 0; b < B; b++)
            gid[b] = rl_column_i64(gc, b);
        rc = s_aepo_hwe(st, o, dp, flags, counts, NULL);
        if (!rc)
            rc = rl_aepo_bootstrap_add(st, gid, rl_tensor_data(rl_dataproto_tensor(dp, "accuracy")),
                                       counts, B);
        free(flags);
        free(counts);
        free(gid);
        rl_dataproto_free(dp);
        done += n;
    }
    rl_aepo_batch_stats stats;
    if (!rc)
        rc = rl_aepo_bootstrap_finish(st, &stats);
    if (!rc)
        rl_log_info("aepo bootstrap over %lld prompts: %lld easy, %lld medium, %lld hard ids",
                    (long long)done, (long long)stats.n_ids[0], (long long)stats.n_ids[1],
                    (long long)stats.n_ids[2]);
    /* the bootstrap drew prompts: training starts from the beginning */
    rl_data_pos zero = {0, 0};
    return rc ? rc : rl_data_iter_seek(j->it, zero);
}

static int s_save(rl_lm_job *j, const s_opts *o, int64_t step, const rl_aepo_state *aepo,
                  double kl_coef)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/checkpoints", o->out_dir);
    rl_data_pos pos = rl_data_iter_tell(j->it);
    rl_dataproto *req = rl_dataproto_new();
    rl_dataproto_set_rows(req, 0);
    json_object_set_new(rl_dataproto_meta(req), "dir", json_string(dir));
    json_object_set_new(rl_dataproto_meta(req), "step", json_integer(step));
    json_object_set_new(rl_dataproto_meta(req), "epoch", json_integer(pos.epoch));
    json_object_set_new(rl_dataproto_meta(req), "data_position", json_integer(pos.index));
    json_t *extra = json_pack("{s:I, s:f}", "weight_version", (json_int_t)j->weight_version,
                              "kl_coef", kl_coef);
    if (aepo) { /* the difficulty state travels with the checkpoint */
        char *text = rl_aepo_state_to_json(aepo);
        json_object_set_new(extra, "aepo", json_string(text ? text : ""));
        free(text);
    }
    json_object_set_new(rl_dataproto_meta(req), "extra", extra);
    int rc = rl_group_call_sync(j->actor, "save_checkpoint", RL_DISPATCH_ONE_TO_ALL, req, NULL);
    rl_dataproto_free(req);
    if (!rc)
        rl_log_info("checkpoint step %lld saved under %s", (long long)step, dir);
    return rc;
}

/* Restores the latest checkpoint: weights, moments, data position. */
static int s_resume(rl_lm_job *j, const s_opts *o, int64_t *step, rl_aepo_state **aepo,
                    rl_kl_ctl *klc)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/checkpoints", o->out_dir);
    rl_checkpoint_info info;
    if (rl_checkpoint_find(dir, &info)) {
        rl_log_warn("trainer.resume: %s; starting from scratch", rl_error_message());
        *step = 0;
        return RL_OK;
    }
    rl_dataproto *req = rl_dataproto_new(), *out = NULL;
    rl_dataproto_set_rows(req, 0);
    json_object_set_new(rl_dataproto_meta(req), "path", json_string(info.dir));
    rl_future *f = rl_group_call(j->actor, "load_checkpoint", RL_DISPATCH_ONE_TO_ALL, req);
    int rc = rl_future_wait(f, -1);
    if (!rc)
        rc = rl_future_take_rank(f, 0, &out);
    rl_future_free(f);
    rl_dataproto_free(req);
    if (rc)
        return rc;
    rl_data_pos pos = {(int64_t)s_meta_num(out, "epoch"), (int64_t)s_meta_num(out, "data_position")};
    *step = (int64_t)s_meta_num(out, "step");
    json_t *kc = json_object_get(json_object_get(rl_dataproto_meta(out), "extra"), "kl_coef");
    if (json_is_number(kc))
        klc->value = json_number_value(kc);
    const char *aepo_json = json_string_value(
        json_object_get(json_object_get(rl_dataproto_meta(out), "extra"), "aepo"));
    if (o->aepo && aepo_json && *aepo_json) {
        rl_aepo_state *st = rl_aepo_state_from_json(aepo_json);
        if (!st) {
            rl_dataproto_free(out);
            return rl_error_wrap(rl_error_code(), "AEPO state of %s", info.dir);
        }
        rl_aepo_state_free(*aepo);
        *aepo = st;
    }
    rl_dataproto_free(out);
    if ((rc = rl_data_iter_seek(j->it, pos)))
        return rc;
    rl_log_info("resumed from %s (step %lld)%s%s", info.dir, (long long)*step,
                info.note[0] ? "; " : "", info.note);
    return rl_lm_job_sync_weights(j);
}

static int s_run(rl_driver *d, const rl_config *job)
{
    s_opts o;
    rl_lm_job j;
    memset(&j, 0, sizeof j);
    int rc = s_read_opts(job, &o);
    if (!rc)
        rc = rl_lm_job_open(&j, d, job);
    int64_t start = 0;
    rl_aepo_state *aepo = NULL;
    rl_kl_ctl klc; /* the reward-KL coefficient (verl Fixed/AdaptiveKLController) */
    if (!rc)
        rc = strcmp(o.kl_ctrl_type, "adaptive") == 0
                 ? rl_kl_ctl_init_adaptive(&klc, o.kl_coef, o.kl_target, o.kl_horizon)
                 : rl_kl_ctl_init_fixed(&klc, o.kl_coef);
    if (!rc && o.aepo && !(aepo = s_aepo_new(&o)))
        rc = rl_error_code();
    if (!rc && o.resume)
        rc = s_resume(&j, &o, &start, &aepo, &klc);
    if (!rc && aepo && o.bootstrap && start == 0)
        rc = s_aepo_bootstrap(&j, &o, aepo);
    /* resuming drops metrics after the checkpoint; a fresh start drops all */
    rl_metrics *sink = rc ? NULL : rl_metrics_open(o.out_dir, start > 0 ? start : -1, 0);
    if (!rc && !sink)
        rc = rl_error_code();
    rl_metric_set *ms = rl_metric_set_new();
    if (!rc && start == 0) { /* the warm start's accuracy, step 0 */
        double acc, fmt, len;
        if (!(rc = rl_lm_job_validate(&j, &acc, &fmt, &len))) {
            rl_metric_set_put(ms, RL_M_VAL_ACCURACY, acc);
            rl_metric_set_put(ms, "val/format", fmt);
            rl_metrics_log(sink, 0, ms);
            rl_log_info("step 0: val accuracy %.3f (format %.3f)", acc, fmt);
        }
    }
    for (int64_t step = start + 1; !rc && step <= o.steps && !rl_driver_interrupted(d); step++) {
        double t_step = rl_now_s(), t_gen = 0, t_rew = 0, call_wall0, call_comp0;
        rl_driver_call_time(d, &call_wall0, &call_comp0, NULL);
        rl_metric_set_clear(ms);
        /* 1-3: generate and score; with online filtering, until the batch is full */
        rl_dataproto *batch = NULL;
        int64_t groups = 0;
        for (int64_t round = 0; !rc && groups < o.batch; round++) {
            if (o.filtering && round >= o.max_tries) {
                rc = rl_error_set(RL_ESTATE, "online filtering: only %lld of %lld prompt groups had "
                                             "%s mean in (%g, %g) after %lld tries "
                                             "(algorithm.max_try_make_batch)",
                                  (long long)groups, (long long)o.batch, o.filter_key, o.filter_low,
                                  o.filter_high, (long long)o.max_tries);
                break;
            }
            rl_dataproto *part = NULL;
            double g, r;
            rc = s_generate_round(&j, &o, step, round, o.batch, &part, &g, &r);
            t_gen += g;
            t_rew += r;
            if (rc)
                break;
            if (round == 0)
                s_batch_metrics(part, ms); /* metrics of what was sampled */
            int64_t kept = o.batch;
            if (o.filtering && (rc = s_filter(&o, &part, &kept)))
                break;
            if (kept > o.batch - groups) { /* keep whole groups up to the batch */
                rl_dataproto *cut = rl_dataproto_slice(part, 0, (o.batch - groups) * o.n);
                rl_dataproto_free(part);
                part = cut;
                kept = o.batch - groups;
            }
            if (!batch) {
                batch = part;
            } else {
                rl_dataproto *items[2] = {batch, part};
                rl_dataproto *cat = rl_dataproto_concat(items, 2);
                rl_dataproto_free(batch);
                rl_dataproto_free(part);
                batch = cat;
            }
            groups += kept;
            if (o.filtering)
                rl_metric_set_put(ms, "batch/filter_rounds", (double)(round + 1));
        }
        if (rc)
            break;
        /* AEPO: entropy reward into the score, buckets and HWE flags for KL */
        int8_t *bucket = NULL;
        uint8_t *flags = NULL;
        if (aepo && (rc = s_aepo_shape(aepo, &o, batch, &bucket, &flags, ms))) {
            rl_dataproto_free(batch);
            break;
        }
        /* 4: old and reference log-probs */
        double t0 = rl_now_s();
        rc = s_log_prob(&j, batch, "policy", "old_logp");
        double t_old = rl_now_s() - t0;
        t0 = rl_now_s();
        int need_ref = o.use_kl_in_reward || o.use_kl_loss;
        if (!rc && need_ref)
            rc = s_log_prob(&j, batch, "ref", "ref_logp");
        double t_ref = rl_now_s() - t0;
        /* 5-6: KL in the reward, advantages */
        t0 = rl_now_s();
        float *kl = NULL;
        if (!rc && need_ref) {
            int64_t B, R;
            float *mask = s_response_mask(batch, &B, &R);
            kl = malloc(sizeof(float) * (size_t)(B * R > 0 ? B * R : 1));
            rl_kl_kind kind;
            rc = rl_kl_kind_parse(o.kl_penalty, &kind);
            if (!rc)
                rc = rl_kl_penalty(rl_tensor_data(rl_dataproto_tensor(batch, "old_logp")),
                                   rl_tensor_data(rl_dataproto_tensor(batch, "ref_logp")), mask, B,
                                   R, kind, 0, kl, NULL);
            double s = 0, n = 0;
            for (int64_t i = 0; !rc && i < B * R; i++)
                if (mask[i]) {
                    s += kl[i];
                    n++;
                }
            if (n > 0)
                rl_metric_set_put(ms, RL_M_KL_PENALTY, s / n);
            o.kl_coef = klc.value; /* this step's coefficient */
            rl_metric_set_put(ms, "actor/reward_kl_coef", klc.value);
            if (!rc && o.use_kl_in_reward && n > 0)
                rc = rl_kl_ctl_update(&klc, s / n, B);
            if (!rc && aepo) { /* dual ascent on the per-bucket KL budgets */
                double klb[RL_AEPO_NBUCKETS];
                rc = rl_aepo_lambda_update(aepo, kl, mask, bucket, B, R, klb);
                for (int k = 0; !rc && k < RL_AEPO_NBUCKETS; k++) {
                    char key[64];
                    snprintf(key, sizeof key, "aepo/lambda_%s", rl_aepo_bucket_name(k));
                    rl_metric_set_put(ms, key, rl_aepo_lambda(aepo, k));
                }
            }
            if (!rc && aepo && o.dynamic_kl && o.use_kl_in_reward && o.kl_coef > 0) {
                /* token-level weights β_b (× ½ at HWE positions): fold them into
                 * kl so the reward uses w·kl with coefficient 1 */
                float *w = malloc(sizeof(float) * (size_t)(B * R > 0 ? B * R : 1));
                rc = rl_aepo_kl_weights(aepo, flags, mask, bucket, B, R, o.kl_coef, -1, w);
                for (int64_t i = 0; !rc && i < B * R; i++)
                    kl[i] *= w[i] / (float)o.kl_coef;
                free(w);
            }
            free(mask);
        }
        free(bucket);
        free(flags);
        if (!rc)
            rc = s_advantages(&o, batch, kl, ms);
        free(kl);
        double t_adv = rl_now_s() - t0;
        /* 7: actor update */
        t0 = rl_now_s();
        if (!rc)
            rc = s_update(&j, &o, batch, ms);
        double t_upd = rl_now_s() - t0;
        /* 8: weights to the rollout ranks */
        t0 = rl_now_s();
        if (!rc)
            rc = rl_lm_job_sync_weights(&j);
        double t_sync = rl_now_s() - t0;
        if (rc) {
            rl_dataproto_free(batch);
            break;
        }
        const int32_t *lens = rl_tensor_data(rl_dataproto_tensor(batch, "response_lens"));
        double ntok = 0;
        for (int64_t b = 0; b < rl_dataproto_rows(batch); b++)
            ntok += lens[b];
        rl_dataproto_free(batch);
        double t_all = rl_now_s() - t_step;
        rl_metric_set_put(ms, "timing_s/gen", t_gen);
        rl_metric_set_put(ms, "timing_s/reward", t_rew);
        rl_metric_set_put(ms, "timing_s/old_log_prob", t_old);
        rl_metric_set_put(ms, "timing_s/ref", t_ref);
        rl_metric_set_put(ms, "timing_s/adv", t_adv);
        rl_metric_set_put(ms, "timing_s/update_actor", t_upd);
        rl_metric_set_put(ms, "timing_s/sync_weights", t_sync);
        rl_metric_set_put(ms, "timing_s/step", t_all);
        rl_metric_set_put(ms, RL_M_THROUGHPUT, ntok / t_all);
        /* driver + transfer share: call wall time not spent in handlers, plus
         * driver-side work (advantages etc.), over the step */
        double call_wall1, call_comp1;
        rl_driver_call_time(d, &call_wall1, &call_comp1, NULL);
        double overhead = (call_wall1 - call_wall0) - (call_comp1 - call_comp0);
        rl_metric_set_put(ms, "perf/dispatch_transfer_s", overhead);
        rl_metric_set_put(ms, "perf/driver_compute_s", t_adv);
        rl_metric_set_put(ms, "perf/driver_transfer_share", (overhead + t_adv) / t_all);
        /* 9: validation and checkpoint */
        if (o.val_every > 0 && (step % o.val_every == 0 || step == o.steps)) {
            double acc, fmt, len;
            t0 = rl_now_s();
            if ((rc = rl_lm_job_validate(&j, &acc, &fmt, &len)))
                break;
            rl_metric_set_put(ms, RL_M_VAL_ACCURACY, acc);
            rl_metric_set_put(ms, "val/format", fmt);
            rl_metric_set_put(ms, "timing_s/testing", rl_now_s() - t0);
        }
        char line[1024];
        rl_metrics_format_console(ms, step, line, sizeof line);
        rl_log_info("%s", line);
        rl_metrics_log(sink, step, ms);
        if (o.save_every > 0 && (step % o.save_every == 0 || step == o.steps))
            rc = s_save(&j, &o, step, aepo, klc.value);
    }
    rl_aepo_state_free(aepo);
    if (sink)
        rl_metrics_close(sink);
    rl_metric_set_free(ms);
    rl_lm_job_close(&j);
    return rc;
}

const rl_recipe rl_recipe_rlvr = {
    .name = "rlvr",
    .summary = "RL with verifiable rewards: GRPO, RLOO, REINFORCE++(-baseline), REINFORCE Pro Max",
    .defaults = (const char *const[]){RL_LM_DEFAULTS
    "algorithm:\n"
    "  adv_estimator: grpo\n"
    "  norm_adv_by_std_in_grpo: true\n"
    "  uniform_scale: false\n"
    "  gamma: 1.0\n"
    "  use_kl_in_reward: false\n"
    "  kl_penalty: kl\n"
    "  kl_ctrl: {type: fixed, kl_coef: 0.001, target_kl: 0.1, horizon: 10000.0}\n"
    "  online_filtering: false\n"
    "  filter_key: accuracy\n"
    "  filter_low: 0.01\n"
    "  filter_high: 0.99\n"
    "  max_try_make_batch: 20\n"
    "  aepo:                      # ARES/AEPO entropy shaping (seed 002)\n"
    "    enable: false\n"
    "    percentile: 95.0          # per-response percentile of window entropy\n"
    "    tau_decay: 0.99           # EMA of the HWE threshold\n"
    "    dynamic_kl: true          # token-level KL weights (half at HWE tokens)\n"
    "actor:\n"
    "  optim: {lr: 1.0e-4, weight_decay: 0.0, beta1: 0.9, beta2: 0.999, eps: 1.0e-8,\n"
    "          warmup_steps: 0, lr_schedule: constant}\n"
    "  grad_clip: 1.0\n"
    "  ppo_mini_batch_size: 16\n"
    "  ppo_micro_batch_size: 0\n"
    "  ppo_epochs: 1\n"
    "  clip_ratio_low: 0.2\n"
    "  clip_ratio_high: 0.2\n"
    "  clip_ratio_c: 3.0\n"
    "  loss_agg_mode: token-mean\n"
    "  entropy_coeff: 0.0\n"
    "  use_kl_loss: false\n"
    "  kl_loss_coef: 0.001\n"
    "  kl_loss_type: low_var_kl\n"
    "env: {}\n"
    "trainer:\n"
    "  total_steps: 100\n"
    "  val_every: 10\n"
    "  save_every: 50\n"
    "  resume: false\n", NULL},
    .prepare = rl_lm_prepare,
    .run = s_run,
};
