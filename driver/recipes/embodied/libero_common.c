/* libero_common.c — one round of LIBERO episodes: env ranks ⇄ rollout
 * ranks (driver/recipes/embodied/libero_common.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/recipes/embodied/libero_common.h"
#include "driver/recipes/phases.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "common/nn/models/flow_policy.h"
#include "workers/actor/actor.h"
#include "workers/env/env.h"
#include "workers/flow_rl.h"
#include "workers/rollout/rollout.h"

const rl_episode_cols rl_libero_cols = {
    .rewards = RL_ENV_REWARDS, .valid = RL_ENV_VALID, .task = RL_ENV_TASK, .success = RL_ENV_SUCCESS,
    .env_row = "env_row", .chunk_step = "chunk_step", /* serve_env's record columns */
    .action = RL_FP_ACTION, .sample_logp = RL_FP_SAMPLE_LOGP,
    .recon = RL_FLOW_RECON, .ref_action = RL_FLOW_REF_ACTION, .values = RL_FLOW_VALUES,
    .flow_action = RL_FLOW_ACTION, .seeds = RL_FLOW_SEEDS, .mask = RL_FLOW_MASK, .weights = RL_FLOW_WEIGHTS,
    .labels = RL_FLOW_LABELS, .advantages = RL_ACTOR_ADVANTAGES, .returns = RL_FLOW_RETURNS,
    .old_values = RL_FLOW_OLD_VALUES, .old_logp = RL_ACTOR_OLD_LOGP,
};

const char *const rl_libero_update_sums[RL_FUS_COUNT] = {
    RL_ACTOR_M_LOSS, RL_FLOW_M_ROWS, "actor/flow_sar_loss", "actor/flow_sar_E_pos", "actor/flow_sar_E_neg",
    "actor/flow_sar_weight_mean", "actor/flow_sar_contrastive", "actor/flow_sar_kl_penalty",
    "actor/flow_sar_success_ratio", "actor/flow_ipo_loss", "actor/velocity_mse", "actor/pg_loss",
    "actor/pg_clipfrac", "actor/ppo_kl", "actor/ratio_mean", "actor/trained_steps", "critic/value_loss",
    "actor/flow_ipo_target_gap", RL_FLOW_M_DEMO_LOSS, "actor/flow_sar_label_pos",
    "actor/flow_sar_softplus_grad_scale", "actor/flow_sar_softplus_flat", "actor/rl_grad_norm",
    "actor/anchor_grad_norm", "actor/rl_anchor_grad_cos"};

const char *const *rl_libero_update_columns(rl_flow_loss_type loss, int *n)
{
    static const char *const flow[11] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK, RL_FLOW_MASK, RL_FLOW_ACTION,
                                         RL_FLOW_T, RL_FLOW_EPS, RL_FLOW_V_OLD, RL_FLOW_WEIGHTS, RL_FLOW_LABELS,
                                         RL_ACTOR_ADVANTAGES};
    static const char *const pg[12] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK, RL_FLOW_MASK, RL_FP_CHAIN,
                                       RL_FP_TIMES, RL_FP_NOISE_LEVEL, RL_FP_STEP_MASK, RL_ACTOR_OLD_LOGP,
                                       RL_ACTOR_ADVANTAGES, RL_FLOW_RETURNS, RL_FLOW_OLD_VALUES};
    static const int count[4] = {11, 9, 10, 12}; /* FlowIPO: no labels; GRPO: no value columns */
    *n = count[loss];
    return loss <= RL_FLOW_LOSS_IPO ? flow : pg;
}

int rl_libero_paired(rl_group *genv, rl_group *groll, const char *recipe)
{
    if (rl_group_size(genv) == rl_group_size(groll))
        return RL_OK;
    return rl_error_set(RL_ECONFIG, "%s pairs env rank r with rollout rank r: the cluster has %d env and %d "
                                    "rollout ranks", recipe, rl_group_size(genv), rl_group_size(groll));
}

int64_t rl_libero_chunk_steps(const rl_env_config *env)
{
    return (env->max_episode_steps + env->num_action_chunks - 1) / env->num_action_chunks;
}

void rl_libero_replies_free(rl_libero_replies *r)
{
    for (int i = 0; i < r->E; i++) {
        if (r->env)
            rl_dataproto_free(r->env[i]);
        if (r->rec)
            rl_dataproto_free(r->rec[i]);
    }
    free(r->env);
    free(r->rec);
    memset(r, 0, sizeof *r);
}

/* The round itself: results[0..E) and (records non-NULL) records[0..E) filled. */
static int s_round(rl_group *genv, rl_group *groll, int64_t T, int64_t round, int greedy, int ungrouped,
                   int heldout, int init_model, rl_dataproto **results, rl_dataproto **records)
{
    int E = rl_group_size(genv);
    rl_dataproto **per = calloc((size_t)E, sizeof *per);
    if (!per)
        return rl_error_set(RL_ENOMEM, "out of memory");
    int rc = RL_OK;
    for (int r = 0; r < E && !rc; r++)
        if (!(per[r] = rl_dataproto_new_meta(json_pack("{s:s}", RL_ENV_HOST, rl_group_address(genv, r)))))
            rc = rl_error_code();
    rl_future *f = rc ? NULL : rl_group_call_each(genv, RL_ENV_OPEN_CHANNEL, per);
    if (!rc && (!f || (rc = rl_future_wait(f, -1))))
        rc = rc ? rc : rl_error_code();
    for (int r = 0; r < E && !rc; r++) {
        rl_dataproto *rep = NULL;
        if ((rc = rl_future_take_rank(f, r, &rep)))
            break;
        const char *ep = rl_dataproto_meta_str(rep, RL_ENV_ENDPOINT, NULL);
        rl_dataproto_free(per[r]);
        per[r] = ep ? rl_dataproto_new_meta(json_pack("{s:s}", RL_ENV_ENDPOINT, ep)) : NULL;
        rl_dataproto_free(rep);
        if (!per[r])
            rc = rl_error_code();
    }
    rl_future_free(f);
    for (int r = 0; r < E && !rc; r++) {
        json_t *m = rl_dataproto_meta(per[r]);
        json_object_set_new(m, RL_ENV_ROUND, json_integer((json_int_t)round));
        json_object_set_new(m, RL_ROLLOUT_GREEDY, json_integer(greedy));
        json_object_set_new(m, "record", json_integer(records != NULL));
    }
    if (!rc && init_model) { /* the policy (again after a restart): model.init_from */
        rl_dataproto *none = rl_dataproto_new_meta(json_object());
        rl_future *fi = none ? rl_group_call(groll, RL_ROLLOUT_INIT_MODEL, RL_DISPATCH_ONE_TO_ALL, none) : NULL;
        rl_dataproto_free(none);
        rc = fi ? rl_future_wait(fi, -1) : rl_error_code();
        rl_future_free(fi);
    }
    rl_future *fr = rc ? NULL : rl_group_call_each(groll, RL_ROLLOUT_SERVE_ENV, per);
    rl_dataproto *args = rc ? NULL
                            : rl_dataproto_new_meta(json_pack("{s:I,s:i,s:I,s:i,s:i}", RL_ENV_CHUNK_STEPS,
                                                              (json_int_t)T, RL_ENV_RESET, 1, RL_ENV_ROUND,
                                                              (json_int_t)round, RL_ENV_UNGROUPED, ungrouped ? 1 : 0,
                                                              RL_ENV_HELDOUT, heldout ? 1 : 0));
    rl_future *fe = args ? rl_group_call(genv, RL_ENV_INTERACT, RL_DISPATCH_ONE_TO_ALL, args) : NULL;
    rl_dataproto_free(args);
    if (!rc && (!fr || !fe))
        rc = rl_error_code();
    /* until both answered or one failed (a lost worker): its peer, waiting
     * on their data channel, is aborted by the recovery, not awaited */
    rl_future *both[2] = {fe, fr};
    int rcw = fe && fr ? rl_future_wait_all(both, 2, -1) : RL_OK;
    char wait_msg[1024] = "";
    if (rcw)
        snprintf(wait_msg, sizeof wait_msg, "%s", rl_error_message());
    int rce = fe && (!rcw || rl_future_done(fe)) ? rl_future_wait(fe, 0) : RL_OK;
    const char *why_env = rce ? rl_error_message() : NULL;
    char env_msg[1024] = "";
    if (why_env)
        snprintf(env_msg, sizeof env_msg, "%s", why_env);
    int rcr = fr && (!rcw || rl_future_done(fr)) ? rl_future_wait(fr, 0) : RL_OK;
    if (rcw && !rce && !rcr) /* interrupted, fatal */
        rc = rc ? rc : rl_error_set(rcw, "%s", wait_msg);
    /* A policy that fails stops answering, so its env ranks then fail on
     * their channel: with both failed, the rollout's error is the cause. */
    if (!rc && rce && rcr) {
        char roll_msg[1024];
        snprintf(roll_msg, sizeof roll_msg, "%s", rl_error_message());
        rc = rl_error_set(rcr, "%s (then the env: %s)", roll_msg, env_msg);
    } else if (!rc && rce)
        rc = rl_error_set(rce, "%s", env_msg);
    else if (!rc && rcr)
        rc = rcr;
    for (int r = 0; r < E && !rc; r++)
        rc = rl_future_take_rank(fe, r, &results[r]);
    for (int r = 0; records && r < E && !rc; r++)
        rc = rl_future_take_rank(fr, r, &records[r]);
    rl_future_free(fe);
    rl_future_free(fr);
    for (int r = 0; r < E; r++)
        rl_dataproto_free(per[r]);
    free(per);
    return rc;
}

int rl_libero_round(rl_group *genv, rl_group *groll, int64_t T, int64_t round, int greedy, int ungrouped,
                    int heldout, int init_model, int record, rl_libero_replies *out)
{
    memset(out, 0, sizeof *out);
    out->E = rl_group_size(genv);
    out->env = calloc((size_t)out->E, sizeof *out->env);
    out->rec = record ? calloc((size_t)out->E, sizeof *out->rec) : NULL;
    int rc = out->env && (out->rec || !record) ? RL_OK : rl_error_set(RL_ENOMEM, "out of memory");
    if (!rc)
        rc = s_round(genv, groll, T, round, greedy, ungrouped, heldout, init_model, out->env, out->rec);
    if (rc)
        rl_libero_replies_free(out);
    return rc;
}

int rl_libero_evaluate(rl_driver *d, rl_group *genv, rl_group *groll, const rl_config *job, int64_t per_task,
                       int64_t limit, const char *gif_tag, int64_t gif_step, rl_episode_tally *t)
{
    const rl_env_config *env = rl_config_section_get(job, &rl_env_section);
    if (!env)
        return rl_error_code();
    const int64_t T = rl_libero_chunk_steps(env), rounds = per_task > 0 ? rl_episode_eval_rounds(env, per_task) : 0;
    const int gifs = gif_tag || gif_step >= 0;
    int64_t drawn[RL_ENV_MAX_TASKS] = {0};
    const double t0 = rl_now_s();
    memset(t, 0, sizeof *t);
    int rc = RL_OK;
    for (int64_t r = 0; !rc && (per_task > 0 ? r < rounds : t->all < limit && !rl_driver_interrupted(d)); r++) {
        rl_libero_replies res;
        rl_episode_envs e = {0};
        if ((rc = rl_libero_round(genv, groll, T, r, 1, 1, 1, 0, 0, &res)))
            break;
        if (gifs) /* the first episodes of each task */
            rc = rl_libero_eval_gifs(job, gif_tag, gif_step, res.env, res.E, per_task > 0 ? -1 : limit - t->all,
                                     drawn);
        if (!rc && !(rc = rl_episode_envs_gather(res.env, res.E, T * env->num_action_chunks, &rl_libero_cols, &e))) {
            if (per_task > 0)
                rl_episode_tally_round(t, &e, env, r, per_task);
            else
                rl_episode_tally_first(t, &e, limit);
        }
        rl_episode_envs_free(&e);
        rl_libero_replies_free(&res);
        if (!rc && per_task == 0)
            rl_log_info("eval round %lld: %lld episodes, success %.3f (%.0f s)", (long long)r, (long long)t->all,
                        t->all ? (double)t->all_ok / (double)t->all : 0.0, rl_now_s() - t0);
    }
    return rc;
}
