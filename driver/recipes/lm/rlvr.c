/* rlvr.c — language-model RL with verifiable rewards, in verl's order. A
 * step is this table of phases (rl_phases_run times each one):
 *   gen           prompts (with hard-prompt replay, queued hard prompts first:
 *                 rlvr_replay.c) → repeat n (uid per prompt) → rollout
 *                 samples tokens, log-probs and entropies → reward ranks
 *                 score them → with guidance, all-wrong groups get a
 *                 reference solution (rlvr_guidance.c); with online
 *                 filtering, rounds until the batch is full
 *   aepo          ARES/AEPO entropy shaping (rlvr_aepo.c), when enabled
 *   old_log_prob  the policy's log-probs (actor ranks)
 *   ref           the frozen reference's log-probs, when a KL term is used
 *   adv           KL in the reward (fixed or adaptive coefficient) and the
 *                 advantages of algorithm.adv_estimator (estimators.c)
 *   update_actor  ppo_epochs × mini-batches, one optimiser step each (micro-
 *                 batches and FSDP inside the actor)
 *   sync_weights  the new weights to the rollout ranks
 * then metrics, validation and a checkpoint every k steps. trainer.resume
 * continues from the latest checkpoint with the same batches (data position,
 * weights, moments, KL coefficient, AEPO state and replay queue restored). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/batch/estimators.h"
#include "driver/recipes/lm/lm_common.h"
#include "common/algo/filter.h"
#include "common/algo/kl.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/dtype.h"
#include "common/nn/models/lm/lm_model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/core/util.h"
#include "common/algo/advantage.h"
#include "common/algo/offpolicy.h"
#include "common/tools/tools.h"
#include "common/data/data.h"
#include "common/metrics/metrics.h"
#include "driver/recipes/lm/rlvr_aepo.h"
#include "driver/recipes/lm/rlvr_async.h"
#include "driver/recipes/lm/rlvr_guidance.h"
#include "driver/recipes/lm/rlvr_replay.h"
#include "common/core/rng.h"
#include "common/schema/trainer.h"

/* ---- options ------------------------------------------------------------------------------ */

typedef struct s_opts {
    const rl_estimator *est;
    const char *estimator, *kl_penalty, *kl_ctrl_type, *filter_key;
    int norm_by_std, uniform_scale, use_kl_in_reward, filtering, filter_std;
    int overlong_filter, overlong_buffer, fill;
    int64_t max_tries, overlong_len, staleness, async_rounds;
    double gamma, kl_coef, kl_target, kl_horizon, filter_low, filter_high;
    double overlong_factor, tis_cap;
    rl_kl_kind kl_kind;
} s_opts;

#define S_NUM(path, f, lo, hi, fl) {path, RL_CFG_NUM, offsetof(s_opts, f), lo, hi, fl, NULL}
#define S_BOOL(path, f) {path, RL_CFG_BOOL, offsetof(s_opts, f), 0, 0, 0, NULL}
#define S_STR(path, f) {path, RL_CFG_STR, offsetof(s_opts, f), 0, 0, RL_CFG_NONEMPTY, NULL}
static const rl_config_spec s_spec[] = {
    S_STR("algorithm.adv_estimator", estimator),
    S_BOOL("algorithm.norm_adv_by_std_in_grpo", norm_by_std),
    S_BOOL("algorithm.uniform_scale", uniform_scale),
    S_NUM("algorithm.gamma", gamma, 0, 1, 0),
    S_BOOL("algorithm.use_kl_in_reward", use_kl_in_reward),
    S_STR("algorithm.kl_penalty", kl_penalty),
    {"algorithm.kl_ctrl.type", RL_CFG_STR, offsetof(s_opts, kl_ctrl_type), 0, 0, 0, NULL},
    S_NUM("algorithm.kl_ctrl.kl_coef", kl_coef, 0, 1e6, 0),
    S_NUM("algorithm.kl_ctrl.target_kl", kl_target, 0, 1e6, RL_CFG_MIN_OPEN),
    S_NUM("algorithm.kl_ctrl.horizon", kl_horizon, 0, 1e12, RL_CFG_MIN_OPEN),
    S_BOOL("algorithm.online_filtering", filtering),
    S_STR("algorithm.filter_key", filter_key),
    S_NUM("algorithm.filter_low", filter_low, -1e9, 1e9, 0),
    S_NUM("algorithm.filter_high", filter_high, -1e9, 1e9, 0),
    {"algorithm.max_try_make_batch", RL_CFG_INT, offsetof(s_opts, max_tries), 1, 1e6, 0, NULL},
    {"algorithm.filter_mode", RL_CFG_ENUM, offsetof(s_opts, filter_std), 0, 0, 0, "range|std"},
    {"algorithm.filter_exhausted", RL_CFG_ENUM, offsetof(s_opts, fill), 0, 0, 0, "error|fill"},
    S_BOOL("algorithm.overlong_filter", overlong_filter),
    S_BOOL("algorithm.overlong_buffer.enable", overlong_buffer),
    {"algorithm.overlong_buffer.len", RL_CFG_INT, offsetof(s_opts, overlong_len), 1, 1 << 20, 0, NULL},
    S_NUM("algorithm.overlong_buffer.penalty_factor", overlong_factor, 0, 1e6, 0),
    S_NUM("algorithm.tis_imp_ratio_cap", tis_cap, 0, 1e6, 0),
    {"trainer.staleness", RL_CFG_INT, offsetof(s_opts, staleness), 0, RL_RLVR_MAX_STALENESS, 0, NULL},
    {"trainer.async_rounds", RL_CFG_INT, offsetof(s_opts, async_rounds), 0,
     RL_RLVR_MAX_ASYNC_ROUNDS, 0, NULL},
};

static int s_read_opts(const rl_config *job, s_opts *o)
{
    memset(o, 0, sizeof *o);
    int rc = rl_config_read(job, s_spec, sizeof s_spec / sizeof s_spec[0], o);
    if (rc)
        return rc;
    if (strcmp(o->kl_ctrl_type, "fixed") != 0 && strcmp(o->kl_ctrl_type, "adaptive") != 0)
        return rl_config_error_at(job, "algorithm.kl_ctrl.type", RL_ECONFIG,
                                  "expected fixed or adaptive, got '%s'", o->kl_ctrl_type);
    if (!(o->est = rl_estimator_find(o->estimator, RL_TRACK_LM)))
        return rl_config_error_at(job, "algorithm.adv_estimator", RL_ECONFIG, "%s", rl_error_message());
    if (rl_kl_kind_parse(o->kl_penalty, &o->kl_kind))
        return rl_config_error_at(job, "algorithm.kl_penalty", RL_ECONFIG, "%s", rl_error_message());
    if (o->overlong_buffer) {
        int64_t R;
        if (rl_config_get_int(job, "rollout.response_length", &R))
            return rl_error_code();
        if (o->overlong_len > R)
            return rl_config_error_at(job, "algorithm.overlong_buffer.len", RL_ECONFIG,
                                      "must not exceed rollout.response_length (%lld), got %lld",
                                      (long long)R, (long long)o->overlong_len);
    }
    if (!(o->filter_low < o->filter_high))
        return rl_config_error_at(job, "algorithm.filter_low", RL_ECONFIG,
                                  "must be below algorithm.filter_high (%g), got %g", o->filter_high,
                                  o->filter_low);
    return RL_OK;
}

/* Checks that need several sections: batch and mini-batch sizes (W: the
 * actor ranks, 0 = not known yet). */
static int s_check_sizes(const rl_config *job, const s_opts *o, int W)
{
    int64_t n, mini, batch;
    if (rl_config_get_int(job, "rollout.n", &n) ||
        rl_config_get_int(job, "actor.ppo_mini_batch_size", &mini) ||
        rl_config_get_int(job, "data.train_batch_size", &batch))
        return rl_error_code();
    if (batch % mini)
        return rl_config_error_at(job, "actor.ppo_mini_batch_size", RL_ECONFIG,
                                  "%lld must divide data.train_batch_size %lld", (long long)mini,
                                  (long long)batch);
    if (n < o->est->min_samples)
        return rl_config_error_at(job, "rollout.n", RL_ECONFIG,
                                  "%lld: %s needs at least %lld samples per prompt", (long long)n,
                                  o->estimator, (long long)o->est->min_samples);
    if (W > 0 && (mini * n) % W)
        return rl_config_error_at(job, "actor.ppo_mini_batch_size", RL_ECONFIG,
                                  "a mini-batch of %lld rows (%lld prompts × rollout.n %lld) must "
                                  "be a multiple of the %d actor ranks",
                                  (long long)(mini * n), (long long)mini, (long long)n, W);
    return RL_OK;
}

/* Everything the driver checks before a worker starts. */
static int s_prepare(rl_config *job)
{
    s_opts o;
    rl_rlvr_aepo a;
    int enabled;
    /* optimiser steps per training step: epochs × mini-batches */
    int64_t epochs, batch, mini;
    rl_rlvr_guidance g; /* its reference solutions are checked with the training rows */
    int rc = rl_config_get_int_in(job, "actor.ppo_epochs", 1, 10000, &epochs) ||
                     rl_config_get_int_in(job, "data.train_batch_size", 1, 1 << 20, &batch) ||
                     rl_config_get_int_in(job, "actor.ppo_mini_batch_size", 1, 1 << 24, &mini) ||
                     rl_rlvr_guidance_read(job, &g)
                 ? rl_error_code()
                 : rl_lm_recipe_prepare(job, epochs * (batch / mini > 0 ? batch / mini : 1),
                                        g.enable ? g.field : NULL);
    if (!rc)
        rc = s_read_opts(job, &o);
    if (!rc)
        rc = s_check_sizes(job, &o, 0);
    if (!rc)
        rc = rl_rlvr_aepo_open(&a, job, &enabled);
    if (!rc)
        rl_rlvr_aepo_close(&a);
    rl_rlvr_replay q;
    if (!rc)
        rc = rl_rlvr_replay_read(job, &q);
    int64_t x;
    int b;
    if (!rc && (rl_config_get_int_in(job, "trainer.total_steps", 0, 1000000000, &x) ||
                rl_config_get_int_in(job, "trainer.save_every", 0, 1000000000, &x) ||
                rl_config_get_bool(job, "trainer.resume", &b)))
        rc = rl_error_code();
    return rc;
}

/* ---- the recipe's state ---------------------------------------------------------------------- */

typedef struct s_rlvr {
    rl_trainer t;
    rl_lm_job j;
    s_opts o;
    rl_kl_ctl klc; /* the reward-KL coefficient (verl Fixed/AdaptiveKLController) */
    int aepo_on, need_ref;
    rl_rlvr_aepo aepo;
    rl_rlvr_async async; /* rounds prefetched for later steps (trainer.staleness > 0) */
    rl_rlvr_guidance guide; /* off-policy guidance of all-wrong groups */
    rl_rlvr_replay replay;  /* hard prompts queued for later steps */
    const char *rollout_dump_dir; /* trainer.rollout_data_dir ("": off) */
    /* this step */
    int64_t step;
    rl_dataproto *batch;
    float *kl;      /* (B, R) when a KL term is used */
    double kl_coef; /* this step's reward-KL coefficient */
} s_rlvr;

/* The first half of a round of generation: `prompts` prompts repeated n
 * times (uid = the prompt's global_id) with their sampling seeds, sent to the
 * rollout ranks (*f). */
static int s_round_start(s_rlvr *r, int64_t step, int64_t round, int64_t prompts,
                         rl_dataproto **out, rl_future **f)
{
    rl_dataproto *p = NULL;
    int rc = rl_rlvr_replay_prompts(&r->replay, r->j.it, prompts, round == 0, &p);
    if (rc)
        return rc;
    rl_dataproto *dp = rl_dataproto_repeat(p, r->j.rollout_cfg.n, 1);
    rl_dataproto_free(p);
    if (!dp)
        return rl_error_code();
    int64_t B = rl_dataproto_rows(dp), shape[1] = {B};
    rl_tensor *st = rl_dataproto_new_tensor(dp, RL_LM_ROW_SEEDS, RL_I64, 1, shape);
    if (!st)
        rc = rl_error_code();
    int64_t *seeds = st ? rl_tensor_data(st) : NULL;
    for (int64_t b = 0; !rc && b < B; b++)
        seeds[b] = (int64_t)rl_splitmix64(r->t.seed ^ rl_splitmix64((uint64_t)step * 1000003u + (uint64_t)round) ^
                                  rl_splitmix64((uint64_t)b));
    if (!rc)
        rc = rl_lm_job_encode_prompts(&r->j, dp);
    if (!rc)
        rc = rl_lm_job_rollout_start(&r->j, dp, 0, f);
    if (rc) {
        rl_dataproto_free(dp);
        return rc;
    }
    *out = dp;
    return RL_OK;
}

/* One round of generation, sampled and scored. */
static int s_round(s_rlvr *r, int64_t step, int64_t round, int64_t prompts, rl_dataproto **out,
                   double *gen_s, double *rew_s)
{
    rl_future *f = NULL;
    int rc = s_round_start(r, step, round, prompts, out, &f);
    if (!rc && (rc = rl_lm_job_rollout_finish(&r->j, out, f, gen_s, rew_s))) {
        rl_dataproto_free(*out);
        *out = NULL;
    }
    return rc;
}

/* DAPO's overlong shaping of a scored round: the soft punishment added to the
 * score, and with overlong filtering the truncated rows' loss mask zeroed
 * (tensor RL_LM_RESPONSE_MASK). Metrics go to `ms` when it is given. */
static int s_overlong(const s_rlvr *r, rl_dataproto *dp, rl_metric_set *ms)
{
    if (!r->o.overlong_filter && !r->o.overlong_buffer)
        return RL_OK;
    const rl_tensor *t = rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSES, RL_I32, 2, NULL);
    const rl_tensor *l = t ? rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSE_LENS, RL_I32, 1, NULL) : NULL;
    float *score = l ? rl_lm_row_values(dp, RL_REWARD_SCORE) : NULL;
    if (!score)
        return rl_error_code();
    int64_t B = t->shape[0], R = t->shape[1], cut_n = 0;
    const int32_t *lens = rl_tensor_data(l);
    uint8_t *cut = malloc((size_t)(B > 0 ? B : 1));
    float *pen = malloc(sizeof(float) * (size_t)(B > 0 ? B : 1));
    int rc = cut && pen ? RL_OK : rl_error_set(RL_ENOMEM, "overlong: out of memory");
    if (!rc)
        rc = rl_overlong_truncated(rl_tensor_data(t), lens, B, R, &r->j.eos, r->j.eos >= 0, cut, &cut_n);
    if (!rc && r->o.overlong_buffer &&
        !(rc = rl_overlong_penalty(lens, B, R, r->o.overlong_len, r->o.overlong_factor, pen))) {
        double sum = 0;
        for (int64_t b = 0; b < B; b++) {
            score[b] += pen[b];
            sum += pen[b];
        }
        if (ms)
            rl_metric_set_put(ms, "batch/overlong_penalty_mean", B ? sum / B : 0);
    }
    if (!rc && r->o.overlong_filter) {
        rl_tensor *mt = (rl_tensor *)rl_dataproto_tensor(dp, RL_LM_RESPONSE_MASK);
        if (!mt) {
            float *m = rl_lm_response_mask(dp, &B, &R);
            rl_tensor *nt = m ? rl_dataproto_new_tensor(dp, RL_LM_RESPONSE_MASK, RL_F32, 2,
                                                        (int64_t[]){B, R})
                              : NULL;
            if (nt)
                memcpy(rl_tensor_data(nt), m, sizeof(float) * (size_t)(B * R));
            free(m);
            mt = nt;
        }
        if (!mt)
            rc = rl_error_code();
        /* the tokens the policy sampled, before whole rows leave the loss:
         * where the KL to the reference is taken (rl_lm_sampled_mask) */
        rl_tensor *st = rc || rl_dataproto_tensor(dp, RL_LM_SAMPLED_MASK)
                            ? NULL
                            : rl_dataproto_new_tensor(dp, RL_LM_SAMPLED_MASK, RL_F32, 2,
                                                      (int64_t[]){B, R});
        if (!rc && !st && !rl_dataproto_tensor(dp, RL_LM_SAMPLED_MASK))
            rc = rl_error_code();
        if (st)
            memcpy(rl_tensor_data(st), rl_tensor_data(mt), sizeof(float) * (size_t)(B * R));
        for (int64_t b = 0; !rc && b < B; b++)
            if (cut[b])
                memset((float *)rl_tensor_data(mt) + b * R, 0, sizeof(float) * (size_t)R);
    }
    if (!rc && ms)
        rl_metric_set_put(ms, "batch/truncated_frac", B ? (double)cut_n / (double)B : 0);
    free(cut);
    free(pen);
    return rc;
}

/* rl_rlvr_shape_fn of the guided rows: the same overlong shaping. */
static int s_shape_guided(void *ctx, rl_dataproto *dp) { return s_overlong(ctx, dp, NULL); }

/* The bootstrap's rounds (step 0, rounds 1000+). */
static int s_bootstrap_round(void *ctx, int64_t round, int64_t n, rl_dataproto **out)
{
    double g, w;
    return s_round(ctx, 0, 1000 + round, n, out, &g, &w);
}

/* Keeps the groups whose mean filter_key lies in (low, high). */
static int s_filter(const s_rlvr *r, rl_dataproto **dp, int64_t *kept_groups,
                    rl_dataproto **rejected)
{
    int64_t B = rl_dataproto_rows(*dp);
    const float *m = rl_lm_row_values(*dp, r->o.filter_key);
    int64_t *group = m ? rl_lm_group_ids(*dp) : NULL;
    int64_t *rows = malloc(sizeof(int64_t) * (size_t)(B > 0 ? B : 1));
    uint8_t *keep = malloc((size_t)(B > 0 ? B : 1));
    int rc = !m ? rl_error_wrap(rl_error_code(), "algorithm.filter_key")
             : !group ? rl_error_code()
             : (!rows || !keep) ? rl_error_set(RL_ENOMEM, "online filtering: out of memory")
                                : RL_OK;
    int64_t kept = 0, n = 0;
    rl_filter_result res;
    if (!rc && r->o.filter_std) /* DAPO's dynamic sampling: groups whose metric varies */
        rc = rl_filter_groups_std(m, group, B, keep, &kept, NULL);
    else if (!rc) /* the kept rows are read off `keep` below */
        rc = rl_filter_groups(m, group, B, r->o.filter_low, r->o.filter_high, keep, NULL, &res);
    for (int64_t b = 0; !rc && b < B; b++)
        if (keep[b])
            rows[n++] = b;
    if (!rc && rejected) { /* the other groups, in order (filter_exhausted: fill) */
        int64_t k = 0;
        for (int64_t b = 0; b < B; b++)
            if (!keep[b])
                group[k++] = b;
        rl_dataproto_free(*rejected);
        if (!(*rejected = rl_dataproto_index(*dp, group, k)))
            rc = rl_error_code();
    }
    rl_dataproto *f = rc ? NULL : rl_dataproto_index(*dp, rows, n);
    free(group);
    free(rows);
    free(keep);
    if (rc || !f)
        return rc ? rc : rl_error_code();
    rl_dataproto_free(*dp);
    *dp = f;
    *kept_groups = n / r->j.rollout_cfg.n;
    return RL_OK;
}

/* Metrics of what was sampled (the first round of a step). */
/* Multi-turn rollouts (RL_ROLLOUT_TOOL_STATS): per-sample turns and calls,
 * the share of calls by outcome, rows cut by the budget or max_turns. */
static int s_tool_metrics(const rl_dataproto *dp, rl_metric_set *ms)
{
    if (!rl_dataproto_tensor(dp, RL_ROLLOUT_TOOL_STATS))
        return RL_OK;
    int64_t B = rl_dataproto_rows(dp);
    const rl_tensor *t = rl_dataproto_tensor_shaped(dp, RL_ROLLOUT_TOOL_STATS, RL_I32, 2,
                                                    (int64_t[]){B, RL_TOOL_STATS_N});
    if (!t)
        return rl_error_code();
    const int32_t *v = rl_tensor_data(t);
    double sum[RL_TOOL_STATS_N] = {0}, used = 0;
    for (int64_t b = 0; b < B; b++) {
        for (int k = 0; k < RL_TOOL_STATS_N; k++)
            sum[k] += v[b * RL_TOOL_STATS_N + k];
        used += v[b * RL_TOOL_STATS_N + RL_TS_CALLS] > 0;
    }
    double n = B ? (double)B : 1, calls = sum[RL_TS_CALLS] > 0 ? sum[RL_TS_CALLS] : 1;
    rl_metric_set_put(ms, "tools/turns_mean", sum[RL_TS_TURNS] / n);
    rl_metric_set_put(ms, "tools/calls_mean", sum[RL_TS_CALLS] / n);
    rl_metric_set_put(ms, "tools/used_frac", used / n);
    for (int k = 0; k < RL_TOOL_NOUTCOMES; k++) {
        char name[64];
        snprintf(name, sizeof name, "tools/%s_frac", rl_tool_outcome_name((rl_tool_outcome)k));
        rl_metric_set_put(ms, name, sum[RL_TS_OUTCOME0 + k] / calls);
    }
    rl_metric_set_put(ms, "tools/bad_call_frac", sum[RL_TS_BAD_CALLS] / calls);
    rl_metric_set_put(ms, "tools/truncated_frac", sum[RL_TS_TRUNCATED] / n);
    rl_metric_set_put(ms, "tools/max_turns_frac", sum[RL_TS_MAX_TURNS] / n);
    return RL_OK;
}

static int s_batch_metrics(const rl_dataproto *dp, rl_metric_set *ms)
{
    int64_t B = rl_dataproto_rows(dp), R;
    float *mask = rl_lm_response_mask(dp, &B, &R);
    const float *score = rl_lm_row_values(dp, RL_REWARD_SCORE);
    const float *acc = rl_lm_row_values(dp, RL_REWARD_ACCURACY);
    const float *fmt = rl_lm_row_values(dp, RL_REWARD_FORMAT);
    const rl_tensor *et = rl_dataproto_tensor_shaped(dp, RL_LM_RESPONSE_ENTROPY, RL_F32, 2,
                                                     (int64_t[]){-1, R});
    if (!mask || !score || !acc || !fmt || !et) {
        free(mask);
        return rl_error_code();
    }
    const float *ent = rl_tensor_data(et);
    const int32_t *lens = rl_tensor_data(rl_dataproto_tensor(dp, RL_LM_RESPONSE_LENS));
    double s = 0, a = 0, f = 0, l = 0, e = 0, nt = 0, smax = -1e30, smin = 1e30;
    for (int64_t b = 0; b < B; b++) {
        s += score[b];
        a += acc[b];
        f += fmt[b];
        smax = fmax(smax, score[b]);
        smin = fmin(smin, score[b]);
        l += lens[b]; /* every sampled token, in the loss or not */
        for (int64_t k = 0; k < R; k++)
            if (mask[b * R + k]) {
                nt++;
                e += ent[b * R + k];
            }
    }
    free(mask);
    /* groups that carry no signal for a group baseline (verl's DAPO metrics):
     * every sample correct, or none */
    int64_t *gid = rl_lm_group_ids(dp), *perm = malloc(sizeof(int64_t) * (size_t)(B + 1)),
            *starts = malloc(sizeof(int64_t) * (size_t)(B + 2)), G = 0;
    int rc = !gid ? rl_error_code()
             : (!perm || !starts) ? rl_error_set(RL_ENOMEM, "batch metrics: out of memory")
                                  : rl_group_runs(gid, B, perm, starts, &G);
    double all = 0, none = 0;
    for (int64_t g = 0; !rc && g < G; g++) {
        double c = 0;
        for (int64_t i = starts[g]; i < starts[g + 1]; i++)
            c += acc[perm[i]];
        all += c == (double)(starts[g + 1] - starts[g]);
        none += c == 0;
    }
    free(gid);
    free(perm);
    free(starts);
    if (rc)
        return rc;
    rl_metric_set_put(ms, "batch/solve_all", G ? all / (double)G : 0);
    rl_metric_set_put(ms, "batch/solve_none", G ? none / (double)G : 0);
    rl_metric_set_put(ms, RL_M_SCORE_MEAN, B ? s / B : 0);
    rl_metric_set_put(ms, "critic/score/max", B ? smax : 0);
    rl_metric_set_put(ms, "critic/score/min", B ? smin : 0);
    rl_metric_set_put(ms, RL_M_ACCURACY, B ? a / B : 0);
    rl_metric_set_put(ms, "critic/format/mean", B ? f / B : 0);
    rl_metric_set_put(ms, RL_M_RESPONSE_LEN, B ? l / B : 0);
    rl_metric_set_put(ms, RL_M_ENTROPY, nt ? e / nt : 0);
    return s_tool_metrics(dp, ms);
}

/* (B, R) tensor `name` of the batch, or NULL + a message naming it. */
static float *s_tokens_of(const rl_dataproto *dp, const char *name, int64_t R)
{
    rl_tensor *t = rl_dataproto_tensor_shaped(dp, name, RL_F32, 2, (int64_t[]){-1, R});
    return t ? rl_tensor_data(t) : NULL;
}

/* ---- phases ------------------------------------------------------------------------------------ */

/* Sends off round `round` of `step` unless it is queued already. */
static int s_prefetch(s_rlvr *r, int64_t step, int64_t round)
{
    if (rl_rlvr_async_has(&r->async, step, round))
        return RL_OK;
    rl_dataproto *dp = NULL;
    rl_future *f = NULL;
    int rc = s_round_start(r, step, round, r->j.batch, &dp, &f);
    return rc ? rc : rl_rlvr_async_push(&r->async, step, round, dp, f);
}

/* Round `round` of this step: taken from the queue when an earlier step
 * sent it off (*ahead = 1), else generated now (trainer.staleness 0, the
 * first step of a run, or a round past those sent ahead). */
static int s_step_round(s_rlvr *r, int64_t round, rl_dataproto **part, double *g, double *w,
                        int *ahead)
{
    *ahead = r->o.staleness > 0 && rl_rlvr_async_has(&r->async, r->step, round);
    if (!*ahead)
        return s_round(r, r->step, round, r->j.batch, part, g, w);
    return rl_rlvr_async_take(&r->async, &r->j, r->step, round, part, g, w);
}

/* The first rounds of the next `staleness` steps, sent off once this step's
 * rounds are all back, so the rollout ranks sample them while the actor
 * trains this step. Sent earlier, they would queue ahead of this step's own
 * filter rounds on the rollout (its calls run in order) and the actor would
 * wait for both. They still run before this step's weight sync: at most
 * `staleness` versions old. How many rounds per step: trainer.async_rounds,
 * or (0) as many as this step needed (`used`), at most max_try_make_batch;
 * one without online filtering. Also past trainer.total_steps: a checkpoint
 * of the last step then holds the samples a longer (resumed) run trains on. */
static int s_prefetch_ahead(s_rlvr *r, int64_t used)
{
    int64_t rounds = r->o.async_rounds ? r->o.async_rounds : used;
    if (!r->o.filtering || rounds < 1)
        rounds = 1;
    if (rounds > r->o.max_tries)
        rounds = r->o.max_tries;
    if (rounds > RL_RLVR_MAX_ASYNC_ROUNDS)
        rounds = RL_RLVR_MAX_ASYNC_ROUNDS;
    rl_metric_set_put(r->t.ms, "async/rounds_sent_ahead", (double)rounds);
    int rc = RL_OK;
    for (int64_t s = r->step + 1; !rc && s <= r->step + r->o.staleness; s++)
        for (int64_t q = 0; !rc && q < rounds; q++)
            rc = s_prefetch(r, s, q);
    return rc;
}

/* Every row's weight version against the trainer's: the samples of this
 * step are at most trainer.staleness versions old (0: on-policy). */
static int s_check_versions(s_rlvr *r)
{
    const rl_column *c = rl_dataproto_column(r->batch, RL_ROLLOUT_ROW_VERSION);
    if (!c || rl_column_get_type(c) != RL_COL_INT64)
        return rl_error_set(RL_EPROTO, "the batch has no int64 column '%s' (the rollout's weight "
                                       "version per sample)", RL_ROLLOUT_ROW_VERSION);
    int64_t B = rl_dataproto_rows(r->batch), now = r->j.sync.version, mx = 0;
    double sum = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t v = rl_column_i64(c, b);
        if (v > now || v < now - r->o.staleness) /* now - v may overflow: v comes from a peer */
            return rl_error_set(RL_ESTATE, "row %lld was sampled by weight version %lld, the actor "
                                           "is at version %lld: expected a version in %lld .. %lld "
                                           "(trainer.staleness %lld)", (long long)b, (long long)v,
                                (long long)now, (long long)(now - r->o.staleness), (long long)now,
                                (long long)r->o.staleness);
        int64_t lag = now - v;
        sum += (double)lag;
        mx = lag > mx ? lag : mx;
    }
    if (r->o.staleness > 0) {
        rl_metric_set_put(r->t.ms, "async/staleness_mean", B ? sum / (double)B : 0);
        rl_metric_set_put(r->t.ms, "async/staleness_max", (double)mx);
    }
    return RL_OK;
}

/* The guided rows of a batch (off-policy guidance), or -1 when it has no
 * int64 column RL_LM_GUIDED. */
static int64_t s_guided_rows(const rl_dataproto *dp)
{
    const rl_column *c = rl_dataproto_column(dp, RL_LM_GUIDED);
    if (!c || rl_column_get_type(c) != RL_COL_INT64)
        return -1;
    int64_t n = 0;
    for (int64_t b = 0; b < rl_dataproto_rows(dp); b++)
        n += rl_column_i64(c, b) != 0;
    return n;
}

/* Generate and score; with online filtering, until the batch is full. */
static int s_phase_generate(void *arg)
{
    s_rlvr *r = arg;
    int64_t batch = r->j.batch, n = r->j.rollout_cfg.n, groups = 0;
    double t_gen = 0, t_rew = 0;
    int rc = RL_OK;
    rl_dataproto *spare = NULL; /* the rounds' rejected groups (filter_exhausted: fill) */
    int64_t rounds_used = 0, rounds_ahead = 0;
    for (int64_t round = 0; !rc && groups < batch; round++) {
        if (r->o.filtering && round >= r->o.max_tries && r->o.fill && spare &&
            rl_dataproto_rows(spare) >= (batch - groups) * n) {
            /* bounded tries are spent: complete the batch with groups that
             * were filtered out, rather than stop the run */
            rl_dataproto *part = rl_dataproto_slice(spare, 0, (batch - groups) * n);
            rl_dataproto *items[2] = {r->batch, part};
            rl_dataproto *cat = !part ? NULL : r->batch ? rl_dataproto_concat(items, 2)
                                                        : rl_dataproto_slice(part, 0, rl_dataproto_rows(part));
            rl_dataproto_free(part);
            if (!cat) {
                rc = rl_error_code();
                break;
            }
            rl_dataproto_free(r->batch);
            r->batch = cat;
            rl_metric_set_put(r->t.ms, "batch/filter_filled_groups", (double)(batch - groups));
            rl_log_warn("step %lld: online filtering kept %lld of %lld prompt groups in %lld tries; "
                        "the batch is completed with %lld filtered-out groups "
                        "(algorithm.filter_exhausted: fill)", (long long)r->step, (long long)groups,
                        (long long)batch, (long long)r->o.max_tries, (long long)(batch - groups));
            groups = batch;
            break;
        }
        if (r->o.filtering && round >= r->o.max_tries && r->o.filter_std) {
            rl_dataproto_free(spare);
            return rl_error_set(RL_ESTATE, "online filtering: only %lld of %lld prompt groups had "
                                           "%s varying within the group after %lld tries "
                                           "(algorithm.max_try_make_batch)",
                                (long long)groups, (long long)batch, r->o.filter_key,
                                (long long)r->o.max_tries);
        }
        if (r->o.filtering && round >= r->o.max_tries) {
            rl_dataproto_free(spare);
            return rl_error_set(RL_ESTATE, "online filtering: only %lld of %lld prompt groups had "
                                           "%s mean in (%g, %g) after %lld tries "
                                           "(algorithm.max_try_make_batch)",
                                (long long)groups, (long long)batch, r->o.filter_key,
                                r->o.filter_low, r->o.filter_high, (long long)r->o.max_tries);
        }
        rl_dataproto *part = NULL;
        double g = 0, w = 0;
        int ahead = 0;
        rc = s_step_round(r, round, &part, &g, &w, &ahead);
        rounds_ahead += ahead;
        rounds_used = round + 1;
        t_gen += g;
        t_rew += w;
        int64_t kept = batch;
        if (!rc)
            rc = s_overlong(r, part, round == 0 ? r->t.ms : NULL);
        if (!rc && round == 0)
            rc = s_batch_metrics(part, r->t.ms); /* metrics of what was sampled */
        if (!rc) /* the policy's own accuracy, before guidance */
            rc = rl_rlvr_replay_observe(&r->replay, part);
        if (!rc)
            rc = rl_rlvr_guidance_apply(&r->guide, &r->j, &part, s_shape_guided, r, NULL,
                                        round == 0 ? r->t.ms : NULL);
        rl_dataproto *rej = NULL;
        if (!rc && r->o.filtering)
            rc = s_filter(r, &part, &kept, r->o.fill ? &rej : NULL);
        if (!rc && rej && spare) { /* every round's rejected groups, in order */
            rl_dataproto *items[2] = {spare, rej};
            rl_dataproto *cat = rl_dataproto_concat(items, 2);
            rc = cat ? RL_OK : rl_error_code();
            rl_dataproto_free(spare);
            spare = cat;
        } else if (!rc && rej) {
            spare = rej;
            rej = NULL;
        }
        rl_dataproto_free(rej);
        if (!rc && kept > batch - groups) { /* keep whole groups up to the batch */
            rl_dataproto *cut = rl_dataproto_slice(part, 0, (batch - groups) * n);
            rl_dataproto_free(part);
            part = cut;
            kept = batch - groups;
            rc = part ? RL_OK : rl_error_code();
        }
        if (!rc && !r->batch) {
            r->batch = part;
            part = NULL;
        } else if (!rc) {
            rl_dataproto *items[2] = {r->batch, part};
            rl_dataproto *cat = rl_dataproto_concat(items, 2);
            rc = cat ? RL_OK : rl_error_code();
            if (cat) {
                rl_dataproto_free(r->batch);
                r->batch = cat;
            }
        }
        rl_dataproto_free(part);
        groups += kept;
        if (!rc && r->o.filtering)
            rl_metric_set_put(r->t.ms, "batch/filter_rounds", (double)(round + 1));
    }
    rl_dataproto_free(spare);
    if (r->o.staleness > 0) { /* rounds sent ahead that this step did not need */
        int unused = rl_rlvr_async_drop_through(&r->async, r->step);
        rl_metric_set_put(r->t.ms, "async/rounds_from_queue", (double)rounds_ahead);
        rl_metric_set_put(r->t.ms, "async/unused_rounds", (double)unused);
        if (unused)
            rl_log_debug("step %lld: %d round(s) generated ahead were not needed (dropped)",
                         (long long)r->step, unused);
    }
    if (!rc && r->o.staleness > 0) /* before the replay metrics: its draws count in this step's */
        rc = s_prefetch_ahead(r, rounds_used);
    rl_rlvr_replay_metrics(&r->replay, r->t.ms);
    int64_t guided = rc ? -1 : s_guided_rows(r->batch);
    if (guided >= 0) /* after filtering: what is trained on */
        rl_metric_set_put(r->t.ms, "batch/guided_rows", (double)guided);
    rl_metric_set_put(r->t.ms, "timing_s/gen", t_gen);
    rl_metric_set_put(r->t.ms, "timing_s/reward", t_rew);
    return rc ? rc : s_check_versions(r);
}

static int s_phase_aepo(void *arg)
{
    s_rlvr *r = arg;
    return rl_rlvr_aepo_shape(&r->aepo, r->batch, r->t.ms);
}

/* Log-probs of the batch's responses under the policy or the reference,
 * added to the batch as tensor `name`. */
static int s_log_prob(s_rlvr *r, const char *which, const char *name)
{
    static const char *const keep[4] = {RL_LM_PROMPTS, RL_LM_PROMPT_LENS, RL_LM_RESPONSES,
                                        RL_LM_RESPONSE_LENS};
    rl_dataproto *req = rl_dataproto_request(r->batch, keep, 4, NULL, 0,
                                             json_pack("{s:s}", RL_ACTOR_WHICH, which)),
                 *out = NULL;
    int rc = req ? rl_group_call_sync(r->j.actor, RL_ACTOR_COMPUTE_LOG_PROB, RL_DISPATCH_DP_COMPUTE,
                                      req, &out)
                 : rl_error_code();
    rl_dataproto_free(req);
    const rl_tensor *resp = rl_dataproto_tensor(r->batch, RL_LM_RESPONSES);
    rl_tensor *lp = rc ? NULL : rl_dataproto_tensor_shaped(out, RL_ACTOR_LOGP, RL_F32, 2,
                                                           (int64_t[]){-1, resp->shape[1]});
    if (!rc && !lp)
        rc = rl_error_wrap(rl_error_code(), "%s reply", RL_ACTOR_COMPUTE_LOG_PROB);
    if (!rc)
        rc = rl_dataproto_add_tensor(r->batch, name, lp);
    rl_dataproto_free(out);
    return rc;
}

static int s_phase_old_log_prob(void *arg)
{
    return s_log_prob(arg, RL_ACTOR_WHICH_POLICY, RL_ACTOR_OLD_LOGP);
}

static int s_phase_ref_log_prob(void *arg)
{
    return s_log_prob(arg, RL_ACTOR_WHICH_REF, RL_ACTOR_REF_LOGP);
}

/* The per-token KL between the policy and the reference (into r->kl), its
 * metric, the adaptive coefficient and AEPO's KL steps. A guided row's
 * tokens were not sampled from the policy, so k1/k2/k3 there are no
 * estimates of KL(π‖π_ref): the row gets KL 0 (no penalty in its reward) and
 * stays out of the metric, the controller and AEPO's per-bucket budgets. */
static int s_kl(s_rlvr *r, const float *mask, int64_t B, int64_t R)
{
    const float *old = s_tokens_of(r->batch, RL_ACTOR_OLD_LOGP, R);
    const float *ref = old ? s_tokens_of(r->batch, RL_ACTOR_REF_LOGP, R) : NULL;
    if (!ref)
        return rl_error_code();
    const rl_column *gc = rl_dataproto_column(r->batch, RL_LM_GUIDED);
    int64_t guided = s_guided_rows(r->batch);
    float *kmask = guided > 0 ? malloc(sizeof(float) * (size_t)(B * R)) : NULL;
    r->kl = malloc(sizeof(float) * (size_t)(B * R > 0 ? B * R : 1));
    if (!r->kl || (guided > 0 && !kmask)) {
        free(kmask);
        return rl_error_set(RL_ENOMEM, "out of memory for the KL");
    }
    for (int64_t b = 0; kmask && b < B; b++) {
        int g = rl_column_i64(gc, b) != 0;
        for (int64_t t = 0; t < R; t++)
            kmask[b * R + t] = g ? 0.0f : mask[b * R + t];
    }
    if (kmask)
        mask = kmask;
    int rc = rl_kl_penalty(old, ref, mask, B, R, r->o.kl_kind, 0, r->kl, NULL);
    double s = 0, n = 0;
    for (int64_t i = 0; !rc && i < B * R; i++)
        if (mask[i]) {
            s += r->kl[i];
            n++;
        }
    if (!rc && n > 0)
        rl_metric_set_put(r->t.ms, RL_M_KL_PENALTY, s / n);
    r->kl_coef = r->klc.value; /* this step's coefficient */
    if (!rc)
        rl_metric_set_put(r->t.ms, "actor/reward_kl_coef", r->klc.value);
    if (!rc && r->o.use_kl_in_reward && n > 0)
        rc = rl_kl_ctl_update(&r->klc, s / n, B);
    if (!rc && r->aepo_on) /* dual ascent on the per-bucket KL budgets, token weights */
        rc = rl_rlvr_aepo_kl(&r->aepo, r->kl, mask, B, R, r->kl_coef, r->o.use_kl_in_reward,
                             r->t.ms);
    free(kmask);
    return rc;
}

/* Truncated importance sampling (verl's TIS): each token's advantage times
 * min(exp(old_logp − rollout_logp), cap), which equals weighting its policy
 * loss (common/algo/offpolicy.h); corrects stale (one-step-off) or mismatched
 * rollout log-probs. */
static int s_tis(s_rlvr *r, const float *mask, float *adv, int64_t B, int64_t R)
{
    const float *old = s_tokens_of(r->batch, RL_ACTOR_OLD_LOGP, R);
    const float *roll = old ? s_tokens_of(r->batch, RL_LM_RESPONSE_LOGP, R) : NULL;
    float *w = roll ? malloc(sizeof(float) * (size_t)(B * R > 0 ? B * R : 1)) : NULL;
    if (!roll)
        return rl_error_wrap(rl_error_code(), "algorithm.tis_imp_ratio_cap");
    if (!w)
        return rl_error_set(RL_ENOMEM, "TIS: out of memory");
    rl_tis_stats st;
    int rc = rl_tis_weights(old, roll, mask, B, R, r->o.tis_cap, w, &st);
    for (int64_t i = 0; !rc && i < B * R; i++)
        adv[i] *= w[i];
    free(w);
    if (rc)
        return rc;
    rl_metric_set_put(r->t.ms, "tis/weight_mean", st.mean);
    rl_metric_set_put(r->t.ms, "tis/ratio_mean", st.raw_mean);
    rl_metric_set_put(r->t.ms, "tis/ratio_max", st.raw_max);
    rl_metric_set_put(r->t.ms, "tis/capped_frac", st.capped_frac);
    rl_metric_set_put(r->t.ms, "tis/mismatch_kl", st.mismatch_kl);
    return RL_OK;
}

/* KL (when used) and the advantages of the configured estimator. */
static int s_phase_advantages(void *arg)
{
    s_rlvr *r = arg;
    int64_t B, R;
    /* rewards and baselines over every response position, the KL over the
     * tokens the policy sampled (not tool output); positions out of the
     * loss (RL_LM_RESPONSE_MASK) get advantage 0 afterwards */
    float *mask = rl_lm_length_mask(r->batch, &B, &R);
    float *lmask = rl_dataproto_tensor(r->batch, RL_LM_RESPONSE_MASK) ? rl_lm_response_mask(r->batch, &B, &R)
                                                                      : mask;
    float *smask = r->need_ref && mask && lmask ? rl_lm_sampled_mask(r->batch, &B, &R) : NULL;
    if (!mask || !lmask || (r->need_ref && !smask)) {
        if (lmask != mask)
            free(lmask);
        free(mask);
        return rl_error_code();
    }
    int rc = r->need_ref ? s_kl(r, smask, B, R) : RL_OK;
    const float *score = rc ? NULL : rl_lm_row_values(r->batch, RL_REWARD_SCORE);
    int64_t *group = score ? rl_lm_group_ids(r->batch) : NULL;
    int64_t shape[2] = {B, R};
    rl_tensor *at = group ? rl_dataproto_new_tensor(r->batch, RL_ACTOR_ADVANTAGES, RL_F32, 2, shape)
                          : NULL;
    if (!rc && !at)
        rc = rl_error_code();
    float *adv = at ? rl_tensor_data(at) : NULL;
    if (!rc) {
        rl_adv_input in = {.scores = score, .kl = r->kl,
                           .kl_coef = r->o.use_kl_in_reward ? r->kl_coef : 0.0, .mask = mask,
                           .group = group, .B = B, .R = R, .n = r->j.rollout_cfg.n,
                           .gamma = r->o.gamma, .norm_by_std = r->o.norm_by_std,
                           .uniform_scale = r->o.uniform_scale};
        rc = r->o.est->run(&in, adv, r->t.ms);
    }
    if (!rc && r->o.use_kl_in_reward && r->kl) { /* each row's KL term, for the dumps */
        rl_column *kc = rl_dataproto_new_column(r->batch, RL_LM_KL_PENALTY, RL_COL_DOUBLE);
        rc = kc ? RL_OK : rl_error_code();
        for (int64_t b = 0; !rc && b < B; b++) {
            double k = 0;
            for (int64_t t = 0; t < R; t++)
                k += (double)smask[b * R + t] * r->kl[b * R + t];
            rc = rl_column_set_f64(kc, b, r->kl_coef * k);
        }
    }
    if (!rc && r->o.tis_cap > 0)
        rc = s_tis(r, lmask, adv, B, R);
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
        rl_metric_set_put(r->t.ms, "critic/advantages/mean", s / n);
        rl_metric_set_put(r->t.ms, "critic/advantages/std", sqrt(fmax(s2 / n - (s / n) * (s / n), 0)));
    }
    if (!rc && *r->rollout_dump_dir) /* the samples this step trains on, shaped scores and advantages */
        rc = rl_lm_dump_samples(r->rollout_dump_dir, "trainer.rollout_data_dir", r->step, r->batch,
                                NULL);
    free(group);
    if (lmask != mask)
        free(lmask);
    free(mask);
    free(smask);
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
    u->gnorm += gnorm / W;
    u->lr = lr;
    return RL_OK;
}

/* ppo_epochs × mini-batches of the batch (in order), one actor step each. */
static int s_phase_update(void *arg)
{
    s_rlvr *r = arg;
    rl_group *actor = r->j.actor;
    int W = rl_group_size(actor);
    int64_t B = rl_dataproto_rows(r->batch), mb_rows = r->j.actor_cfg.mini_batch * r->j.rollout_cfg.n;
    const char *keep[8] = {RL_LM_PROMPTS, RL_LM_PROMPT_LENS, RL_LM_RESPONSES, RL_LM_RESPONSE_LENS,
                           RL_ACTOR_OLD_LOGP, RL_ACTOR_ADVANTAGES};
    int nkeep = 6;
    if (rl_dataproto_tensor(r->batch, RL_ACTOR_REF_LOGP))
        keep[nkeep++] = RL_ACTOR_REF_LOGP;
    /* with a loss mask (tool output, filtered rows) the divisors count its
     * positions; without one, the response lengths (the same numbers) */
    const rl_tensor *mt = rl_dataproto_tensor(r->batch, RL_LM_RESPONSE_MASK);
    if (mt)
        keep[nkeep++] = RL_LM_RESPONSE_MASK;
    const rl_tensor *lt = rl_dataproto_tensor_shaped(r->batch, RL_LM_RESPONSE_LENS, RL_I32, 1, NULL);
    if (!lt)
        return rl_error_code();
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)(B > 0 ? B : 1));
    if (!lens)
        return rl_error_set(RL_ENOMEM, "update: out of memory");
    memcpy(lens, rl_tensor_data(lt), sizeof(int32_t) * (size_t)B);
    if (mt) {
        int64_t mB, mR;
        float *m = rl_lm_response_mask(r->batch, &mB, &mR);
        if (!m) {
            free(lens);
            return rl_error_code();
        }
        for (int64_t b = 0; b < B; b++) {
            double c = 0;
            for (int64_t k = 0; k < mR; k++)
                c += m[b * mR + k];
            lens[b] = (int32_t)c;
        }
        free(m);
    }
    s_update_sums u = {0};
    int updates = 0, rc = RL_OK;
    for (int64_t e = 0; !rc && e < r->j.actor_cfg.epochs; e++) {
        for (int64_t r0 = 0; !rc && r0 + mb_rows <= B; r0 += mb_rows) {
            int64_t gt = 0, seqs = 0;
            for (int64_t b = r0; b < r0 + mb_rows; b++) {
                gt += lens[b];
                seqs += lens[b] > 0;
            }
            rl_dataproto *mb = rl_dataproto_slice(r->batch, r0, r0 + mb_rows);
            rl_dataproto *req = mb ? rl_dataproto_request(mb, keep, nkeep, NULL, 0,
                                                          json_pack("{s:I, s:I, s:I}", RL_ACTOR_GLOBAL_TOKENS,
                                                                    (json_int_t)gt, RL_ACTOR_GLOBAL_ROWS,
                                                                    (json_int_t)mb_rows, RL_ACTOR_GLOBAL_SEQS,
                                                                    (json_int_t)seqs))
                                   : NULL;
            rl_dataproto_free(mb);
            rl_future *f = req ? rl_group_call(actor, RL_ACTOR_UPDATE, RL_DISPATCH_DP_COMPUTE, req) : NULL;
            rc = f ? rl_future_wait(f, -1) : rl_error_code();
            for (int k = 0; !rc && k < W; k++) {
                rl_dataproto *out = NULL;
                rc = rl_future_take_rank(f, k, &out);
                if (!rc)
                    rc = out ? s_add_reply(out, W, &u)
                             : rl_error_set(RL_EPROTO, "actor/%d returned no %s result", k, RL_ACTOR_UPDATE);
                if (rc)
                    rc = rl_error_wrap(rc, "actor/%d %s reply", k, RL_ACTOR_UPDATE);
                rl_dataproto_free(out);
            }
            rl_future_free(f);
            rl_dataproto_free(req);
            updates++;
        }
    }
    free(lens);
    if (rc)
        return rc;
    if (u.tokens > 0) {
        rl_metric_set_put(r->t.ms, "actor/pg_loss", u.pg / u.tokens);
        rl_metric_set_put(r->t.ms, "actor/pg_clipfrac", u.clip / u.tokens);
        rl_metric_set_put(r->t.ms, RL_M_PPO_KL, u.kl / u.tokens);
        rl_metric_set_put(r->t.ms, "actor/pg_clipfrac_lower", u.dual / u.tokens);
        if (r->j.actor_cfg.use_kl_loss)
            rl_metric_set_put(r->t.ms, RL_M_KL_LOSS, u.klloss / u.tokens);
    }
    rl_metric_set_put(r->t.ms, "actor/grad_norm", updates ? u.gnorm / updates : 0);
    rl_metric_set_put(r->t.ms, "actor/lr", u.lr);
    return RL_OK;
}

static int s_phase_sync(void *arg)
{
    s_rlvr *r = arg;
    return rl_lm_job_sync_weights(&r->j);
}

/* ---- around the phases -------------------------------------------------------------------------- */

/* Wall-clock metrics of a finished step. */
static void s_step_metrics(s_rlvr *r, double t_step, double call_wall0, double call_comp0)
{
    double ntok = 0, t_adv = 0;
    const rl_tensor *lt = rl_dataproto_tensor(r->batch, RL_LM_RESPONSE_LENS);
    for (int64_t b = 0; lt && b < rl_dataproto_rows(r->batch); b++)
        ntok += ((const int32_t *)rl_tensor_data(lt))[b];
    double t_all = rl_now_s() - t_step;
    rl_metric_set_get(r->t.ms, "timing_s/adv", &t_adv);
    rl_metric_set_put(r->t.ms, "timing_s/step", t_all);
    rl_metric_set_put(r->t.ms, RL_M_THROUGHPUT, ntok / t_all);
    /* driver + transfer share: call wall time not spent in handlers, plus
     * driver-side work (advantages etc.), over the step */
    double call_wall1, call_comp1;
    rl_driver_call_time(r->t.d, &call_wall1, &call_comp1, NULL);
    double overhead = (call_wall1 - call_wall0) - (call_comp1 - call_comp0);
    rl_metric_set_put(r->t.ms, "perf/dispatch_transfer_s", overhead);
    rl_metric_set_put(r->t.ms, "perf/driver_compute_s", t_adv);
    rl_metric_set_put(r->t.ms, "perf/driver_transfer_share", (overhead + t_adv) / t_all);
}

static int s_validate(void *ctx)
{
    s_rlvr *r = ctx;
    double acc, fmt, len, t0 = rl_now_s();
    int rc = rl_lm_job_validate(&r->j, r->step, &acc, &fmt, &len, r->t.ms);
    if (rc)
        return rc;
    rl_metric_set_put(r->t.ms, RL_M_VAL_ACCURACY, acc);
    rl_metric_set_put(r->t.ms, "val/format", fmt);
    if (r->step > 0)
        rl_metric_set_put(r->t.ms, "timing_s/testing", rl_now_s() - t0);
    else
        rl_log_info("step 0: val accuracy %.3f (format %.3f)", acc, fmt);
    return RL_OK;
}

static int s_save(void *ctx)
{
    s_rlvr *r = ctx;
    rl_data_pos pos = rl_data_iter_tell(r->j.it);
    json_t *extra = json_pack("{s:I, s:f}", "weight_version", (json_int_t)r->j.sync.version,
                              "kl_coef", r->klc.value);
    if (extra && r->aepo_on) /* the difficulty state travels with the checkpoint */
        json_object_set_new(extra, "aepo", rl_rlvr_aepo_save(&r->aepo));
    json_t *queue = extra && r->replay.enable ? rl_rlvr_replay_save(&r->replay) : NULL;
    if (extra && r->replay.enable && (!queue || json_object_set_new(extra, "hard_replay", queue))) {
        json_decref(extra);
        extra = NULL;
    }
    if (!extra)
        return rl_error_set(RL_ENOMEM, "checkpoint: out of memory");
    if (r->o.staleness > 0) { /* the rounds already generated for later steps */
        json_t *pending = NULL;
        int rc = rl_rlvr_async_save(&r->async, &r->j, &pending);
        if (rc) {
            json_decref(extra);
            return rc;
        }
        json_object_set_new(extra, "async_pending", pending);
    }
    int rc = rl_trainer_save(&r->t, r->j.actor, r->step, pos.epoch, pos.index, extra);
    json_decref(extra);
    return rc;
}

/* The latest checkpoint: weights, moments, data position, KL coefficient,
 * AEPO state; then the restored weights to the rollout ranks. */
/* Restores checkpoint `want` (-1: the newest; > 0: that step) into the
 * actor ranks and the recipe's state. */
static int s_resume(s_rlvr *r, int64_t want, int64_t *start)
{
    int64_t epoch, index;
    json_t *extra = NULL;
    int rc = rl_trainer_restore(&r->t, r->j.actor, want, start, &epoch, &index, &extra);
    if (rc || *start == 0)
        return rc;
    const json_t *kc = json_object_get(extra, "kl_coef"), *aepo = json_object_get(extra, "aepo");
    const json_t *wv = json_object_get(extra, "weight_version");
    if (json_is_number(kc))
        r->klc.value = json_number_value(kc);
    /* The restored weights are published again under their own version, so
     * versions (and the staleness of prefetched samples) continue exactly:
     * the actor publishes version 1 at the start and version k + 1 after
     * step k, so a checkpoint of step k holds k + 1. */
    if (wv && (!json_is_integer(wv) || json_integer_value(wv) < 1 ||
               json_integer_value(wv) > *start + 1)) {
        char got[32] = "not an integer";
        if (json_is_integer(wv))
            snprintf(got, sizeof got, "%lld", (long long)json_integer_value(wv));
        json_decref(extra);
        return rl_error_set(RL_EPROTO, "checkpoint of step %lld: weight_version: expected 1 .. "
                                       "%lld (version k + 1 is published after step k), got %s",
                            (long long)*start, (long long)*start + 1, got);
    }
    if (wv && json_integer_value(wv) - 1 > r->j.sync.version)
        r->j.sync.version = json_integer_value(wv) - 1;
    const json_t *pending = json_object_get(extra, "async_pending");
    if (pending && !json_is_object(pending))
        rc = rl_error_set(RL_EPROTO, "checkpoint of step %lld: async_pending is not an object of "
                                     "rounds", (long long)*start);
    else if (pending && r->o.staleness > 0) {
        rl_rlvr_async_expect expect = {*start, r->j.batch * r->j.rollout_cfg.n,
                                       r->j.response_length, r->j.sync.version + 1};
        int dropped = 0;
        rc = rl_rlvr_async_restore(&r->async, pending, &expect, &dropped);
        if (!rc && dropped)
            rl_log_warn("checkpoint of step %lld: %d round(s) generated ahead do not fit this "
                        "job (trainer.staleness lowered, or the batch or response length "
                        "changed): they are dropped and generated again", (long long)*start,
                        dropped);
    } else if (pending && json_object_size(pending) > 0)
        rl_log_warn("the checkpoint holds samples generated ahead (trainer.staleness > 0); "
                    "trainer.staleness is 0 now: they are dropped");
    if (!rc && r->aepo_on && aepo)
        rc = rl_rlvr_aepo_restore(&r->aepo, aepo, r->t.ckpt_dir);
    else if (r->aepo_on)
        rl_log_warn("the checkpoint has no AEPO state: AEPO starts afresh");
    const json_t *queue = json_object_get(extra, "hard_replay");
    if (!rc && r->replay.enable && queue)
        rc = rl_rlvr_replay_restore(&r->replay, queue);
    else if (!rc && r->replay.enable)
        rl_log_warn("the checkpoint has no hard_replay queue: the queue starts empty");
    json_decref(extra);
    rl_data_pos pos = {epoch, index};
    if (!rc)
        rc = rl_data_iter_seek(r->j.it, pos);
    return rc ? rc : rl_lm_job_sync_weights(&r->j);
}

static int s_open(s_rlvr *r, rl_driver *d, const rl_config *job)
{
    int rc = rl_trainer_open(&r->t, d, job);
    if (!rc)
        rc = s_read_opts(job, &r->o);
    if (!rc)
        rc = rl_lm_job_open(&r->j, d, job);
    if (!rc)
        rc = s_check_sizes(job, &r->o, rl_group_size(r->j.actor));
    if (!rc)
        rc = rl_rlvr_aepo_open(&r->aepo, job, &r->aepo_on);
    if (!rc)
        rc = rl_rlvr_guidance_open(&r->guide, job, r->j.train);
    if (!rc)
        rc = rl_rlvr_replay_open(&r->replay, job, r->j.train);
    if (!rc && (rc = rl_config_get_string(job, "trainer.rollout_data_dir", &r->rollout_dump_dir)))
        rc = rl_error_code();
    if (!rc && *r->rollout_dump_dir && rl_mkdir_p(r->rollout_dump_dir))
        rc = rl_config_error_at(job, "trainer.rollout_data_dir", RL_EIO, "%s", rl_error_message());
    if (!rc)
        rc = strcmp(r->o.kl_ctrl_type, "adaptive") == 0
                 ? rl_kl_ctl_init_adaptive(&r->klc, r->o.kl_coef, r->o.kl_target, r->o.kl_horizon)
                 : rl_kl_ctl_init_fixed(&r->klc, r->o.kl_coef);
    r->async.staleness = r->o.staleness;
    r->need_ref = r->o.use_kl_in_reward || r->j.actor_cfg.use_kl_loss;
    return rc;
}

static void s_close(s_rlvr *r)
{
    rl_rlvr_async_close(&r->async);
    rl_rlvr_guidance_close(&r->guide);
    rl_rlvr_replay_close(&r->replay);
    rl_rlvr_aepo_close(&r->aepo);
    rl_trainer_close(&r->t);
    rl_lm_job_close(&r->j);
}

static void s_step_clear(s_rlvr *r)
{
    rl_dataproto_free(r->batch);
    free(r->kl);
    r->batch = NULL;
    r->kl = NULL;
}

/* Opens the recipe's state and brings it to its starting step: checkpoint
 * `restore` (-1: the newest, for trainer.resume; > 0: that step; 0: none, a
 * fresh start with the AEPO bootstrap and the step-0 validation). */
static int s_start(s_rlvr *r, rl_driver *d, const rl_config *job, int64_t restore, int64_t *start)
{
    *start = 0;
    int rc = s_open(r, d, job);
    if (!rc && restore)
        rc = s_resume(r, restore, start);
    if (!rc && r->aepo_on && r->aepo.bootstrap && *start == 0) {
        rc = rl_rlvr_aepo_bootstrap(&r->aepo, r->j.batch, s_bootstrap_round, r);
        rl_data_pos zero = {0, 0}; /* the bootstrap drew prompts: training starts afresh */
        if (!rc)
            rc = rl_data_iter_seek(r->j.it, zero);
    }
    /* resuming drops metrics after the checkpoint; a fresh start drops all */
    if (!rc)
        rc = rl_trainer_open_metrics(&r->t, *start);
    if (!rc && *start == 0 && !(rc = s_validate(r))) /* the warm start's accuracy, step 0 */
        rc = rl_metrics_log(r->t.sink, 0, r->t.ms);
    rl_trainer_cpu_mark(&r->t); /* step 1's interval starts after step 0's validation */
    return rc;
}

/* s_start, again each time it loses a worker (within trainer.max_recoveries). */
/* One training step: the phases, then metrics, validation, the log line and
 * the checkpoint (*saved = 1 when one was written). */
static int s_step(s_rlvr *r, const rl_phase *phases, int np, int *saved)
{
    double t_step = rl_now_s(), call_wall0, call_comp0;
    rl_driver_call_time(r->t.d, &call_wall0, &call_comp0, NULL);
    rl_metric_set_clear(r->t.ms);
    int rc = rl_phases_run(phases, np, r, r->t.ms);
    if (!rc)
        s_step_metrics(r, t_step, call_wall0, call_comp0);
    s_step_clear(r);
    const rl_step_hook hooks[] = {{r->t.val_every, s_validate}};
    return rl_trainer_step_tail(&r->t, r->step, t_step, rc, hooks, 1, s_save, r, saved);
}

/* rl_train_loop's view of the recipe */
typedef struct {
    s_rlvr *r;
    rl_driver *d;
    const rl_config *job;
} s_loop;

static int s_loop_start(void *ctx, int64_t restore, int64_t *start)
{
    s_loop *l = ctx;
    return s_start(l->r, l->d, l->job, restore, start);
}

static int s_loop_step(void *ctx, int64_t step, int *saved)
{
    s_rlvr *r = ((s_loop *)ctx)->r;
    rl_phase phases[7];
    int np = 0;
    phases[np++] = (rl_phase){"gen", s_phase_generate, 1};
    if (r->aepo_on)
        phases[np++] = (rl_phase){"aepo", s_phase_aepo, 0};
    phases[np++] = (rl_phase){"old_log_prob", s_phase_old_log_prob, 0};
    if (r->need_ref)
        phases[np++] = (rl_phase){"ref", s_phase_ref_log_prob, 0};
    phases[np++] = (rl_phase){"adv", s_phase_advantages, 0};
    phases[np++] = (rl_phase){"update_actor", s_phase_update, 0};
    phases[np++] = (rl_phase){"sync_weights", s_phase_sync, 0};
    r->step = step;
    return s_step(r, phases, np, saved);
}

static void s_loop_reset(void *ctx)
{
    s_rlvr *r = ((s_loop *)ctx)->r;
    s_step_clear(r);
    s_close(r);
    memset(r, 0, sizeof *r);
}

static int64_t s_loop_total(void *ctx)
{
    return ((s_loop *)ctx)->r->t.total_steps;
}

static int s_run(rl_driver *d, const rl_config *job)
{
    s_rlvr r;
    memset(&r, 0, sizeof r);
    s_loop l = {&r, d, job};
    rl_train_loop loop = {&l, s_loop_start, s_loop_step, s_loop_reset, s_loop_total};
    int rc = rl_train_loop_run(d, job, &loop);
    s_step_clear(&r);
    s_close(&r);
    return rc;
}

const rl_recipe rl_recipe_rlvr = {
    .name = "rlvr",
    .summary = "RL with verifiable rewards: GRPO, RLOO, REINFORCE++(-baseline), REINFORCE Pro Max",
    .sections = (const rl_config_section *const[]){&rl_trainer_recovery_section, RL_LM_ROLE_SECTIONS, NULL},
    .defaults = (const char *const[]){
        RL_LM_SECTIONS,
        "algorithm:\n"
        "  adv_estimator: grpo        # estimators.c: grpo, rloo, reinforce_plus_plus, ...\n"
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
        "  filter_mode: range         # range: filter_key's group mean in (low, high) (EasyR1);\n"
        "                             # std: DAPO's dynamic sampling, groups whose filter_key varies\n"
        "  filter_exhausted: error    # after max_try_make_batch rounds: error (verl) or fill the\n"
        "                             # batch with filtered-out groups (logged, batch/filter_filled_groups)\n"
        "  overlong_filter: false     # DAPO: truncated responses (no stop token) leave the loss\n"
        "  overlong_buffer: {enable: false, len: 16, penalty_factor: 1.0}  # DAPO soft overlong\n"
        "                             # punishment: 0 → −penalty_factor over the last len tokens\n"
        "  guidance:                  # off-policy guidance (LUFFY): a group with no correct sample\n"
        "    enable: false             # gets the row's reference solution in place of its last\n"
        "    field: solution           # `samples` samples (the JSONL field holding it)\n"
        "    samples: 1\n"
        "  hard_replay:               # a prompt whose group's mean accuracy is below `below`\n"
        "    enable: false             # returns in a later step's first round (up to per_step a\n"
        "    below: 0.5                # step), up to `times` times, until the policy gets it\n"
        "    times: 4                  # right (rlvr_replay.h)\n"
        "    per_step: 4\n"
        "    capacity: 256\n"
        "  tis_imp_ratio_cap: 0.0     # truncated importance sampling: advantage × min(exp(old −\n"
        "                             # rollout log-prob), cap) per token; 0 = off (verl's TIS)\n"
        "  aepo:                      # ARES/AEPO entropy shaping (seed 002)\n"
        "    enable: false\n"
        "    percentile: 95.0          # per-response percentile of window entropy\n"
        "    tau_decay: 0.99           # EMA of the HWE threshold\n"
        "    dynamic_kl: true          # token-level KL weights (half at HWE tokens)\n"
        "rollout:\n"
        "  window_size: 4             # AEPO window entropy\n"
        "data:\n"
        "  bootstrap: false           # AEPO difficulty pass before training\n"
        "  bootstrap_size: 64\n"
        "trainer:\n"
        "  total_steps: 100\n"
        "  val_every: 10\n"
        "  save_every: 50\n"
        "  resume: false\n"
        "  rollout_data_dir: \"\"      # a directory: each step's training samples as <step>.jsonl\n"
        "  staleness: 0               # one-step-off training: the rollout generates the next\n"
        "                             # steps' samples while the actor trains (0 = synchronous)\n"
        "  async_rounds: 0            # rounds of each later step sent ahead (online filtering\n"
        "                             # may need several); 0 = as many as the last step needed\n",
        NULL},
    .roles = rl_lm_roles,
    .prepare = s_prepare,
    .run = s_run,
};
