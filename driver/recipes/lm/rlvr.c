/* rlvr.c — language-model RL with verifiable rewards, in verl's order. A
 * step is this table of phases (rl_recipe_run times each one):
 *   gen           prompts (with hard-prompt replay) → repeat n → rollout
 *                 samples tokens, log-probs and entropies → reward ranks
 *                 score them → overlong shaping, guidance of all-wrong
 *                 groups, online filtering; rounds until the batch is full
 *                 (rlvr_gen.h)
 *   aepo          ARES/AEPO entropy shaping (rlvr_aepo.h), when enabled
 *   old_log_prob  the policy's log-probs (actor ranks)
 *   ref           the frozen reference's log-probs, when a KL term is used
 *   adv           the per-token KL (fixed or adaptive coefficient, AEPO's
 *                 KL steps) and the advantages of algorithm.adv_estimator
 *                 with TIS (common/batch/lm_adv.h)
 *   update_actor  ppo_epochs × mini-batches, one optimiser step each (micro-
 *                 batches and FSDP inside the actor)
 *   sync_weights  the new weights to the rollout ranks
 * then metrics, validation and a checkpoint every k steps; after the last
 * step the model as <output_dir>/final (rl_lm_save_final). trainer.resume
 * continues from the latest checkpoint with the same batches (data position,
 * weights, moments, KL coefficient, AEPO state, replay queue and the rounds
 * generated ahead restored). Config: common/schema/{lm,rlvr}.h and the roles'. */
#include <string.h>

#include "common/batch/lm_adv.h"
#include "common/core/util.h"
#include "common/schema/rlvr.h"
#include "common/schema/rollout.h"
#include "common/schema/trainer.h"
#include "driver/recipes/lm/lm_common.h"
#include "driver/recipes/lm/rlvr_aepo.h"
#include "driver/recipes/lm/rlvr_gen.h"
#include "rlrt/error.h"
#include "rlrt/log.h"

#define S_L (&rl_lm_batch_names)

/* The estimator of algorithm.adv_estimator for this track and the KL
 * estimator of algorithm.kl_penalty, or a located error. */
static int s_algo(const rl_config *job, const rl_rlvr_config *a, const rl_estimator **est,
                  rl_kl_kind *kind)
{
    if (!(*est = rl_estimator_find(rl_estimators[a->adv_estimator].name, RL_TRACK_LM)))
        return RL_CFG_ERROR(job, &rl_estimator_section, rl_estimator_config, adv_estimator, RL_ECONFIG, "%s",
                            rl_error_message());
    if (rl_kl_kind_parse(a->kl_penalty, kind))
        return RL_CFG_ERROR(job, &rl_rlvr_section, rl_rlvr_config, kl_penalty, RL_ECONFIG, "%s",
                            rl_error_message());
    return RL_OK;
}

/* rollout.partial_rollouts interrupts the generation of samples for later
 * steps: there is none with trainer.staleness 0. */
static int s_check_partial(rl_config *job)
{
    const rl_rollout_tokens_config *k = rl_config_section_get(job, &rl_rollout_tokens_section);
    const rl_rlvr_trainer_config *tc = k ? rl_config_section_get(job, &rl_rlvr_trainer_section) : NULL;
    if (!tc)
        return rl_error_code();
    if (k->partial_rollouts && tc->staleness < 1)
        return RL_CFG_ERROR2(job, &rl_rollout_tokens_section, rl_rollout_tokens_config,
                             partial_rollouts, &rl_rlvr_trainer_section, rl_rlvr_trainer_config,
                             staleness, RL_ECONFIG, "partial rollouts need %s >= 1 (with 0 no "
                             "generation overlaps a weight sync)",
                             RL_CFG_PATH(&rl_rlvr_trainer_section, rl_rlvr_trainer_config, staleness));
    return RL_OK;
}

/* Everything the driver checks before a worker starts. */
static int s_prepare(rl_config *job)
{
    const rl_rlvr_config *a = rl_config_section_get(job, &rl_rlvr_section);
    const rl_rlvr_guidance_config *g = a ? rl_config_section_get(job, &rl_rlvr_guidance_section) : NULL;
    const rl_lm_data_config *data = g ? rl_config_section_get(job, &rl_lm_data_section) : NULL;
    const rl_actor_config *acp = data ? rl_config_section_get(job, &rl_actor_section) : NULL;
    const rl_estimator *est;
    rl_kl_kind kind;
    if (!acp || s_algo(job, a, &est, &kind) || rl_rlvr_check_sizes(job, est->name, est->min_samples, 0))
        return rl_error_code();
    int rc = s_check_partial(job);
    if (rc)
        return rc;
    rl_actor_config ac = *acp;
    /* optimiser steps per training step: epochs × mini-batches; the
     * guidance field (a string of the tree) outlives the sections, which
     * the settings of rl_lm_recipe_prepare drop */
    int64_t per = data->train_batch_size / ac.mini_batch;
    return rl_lm_recipe_prepare(job, ac.epochs * (per > 0 ? per : 1), g->enable ? g->field : NULL);
}

/* ---- the recipe's state -------------------------------------------------------------------- */

typedef struct s_rlvr {
    rl_trainer *t; /* the loop's (rl_recipe_run) */
    rl_lm_job j;
    rl_rlvr_gen gen;
    const rl_rlvr_config *a;
    const rl_rlvr_trainer_config *tc;
    rl_lm_adv_cfg adv;
    rl_kl_kind kl_kind;
    rl_kl_ctl klc; /* the reward-KL coefficient (verl Fixed/AdaptiveKLController) */
    int aepo_on, need_ref;
    rl_rlvr_aepo aepo;
    /* this step */
    int64_t step;
    double call_wall0, call_comp0; /* the driver's call time when it began */
    rl_dataproto *batch;
} s_rlvr;

/* ---- phases ------------------------------------------------------------------------------------ */

static int s_phase_gen(void *arg)
{
    s_rlvr *r = arg;
    return rl_rlvr_gen_step(&r->gen, r->step, &r->batch, r->t->ms);
}

static int s_phase_aepo(void *arg)
{
    s_rlvr *r = arg;
    return rl_rlvr_aepo_shape(&r->aepo, r->batch, r->t->ms);
}

static int s_phase_old_log_prob(void *arg)
{
    s_rlvr *r = arg;
    return rl_lm_job_log_prob(&r->j, r->batch, RL_ACTOR_WHICH_POLICY, RL_ACTOR_OLD_LOGP, NULL);
}

static int s_phase_ref_log_prob(void *arg)
{
    s_rlvr *r = arg;
    return rl_lm_job_log_prob(&r->j, r->batch, RL_ACTOR_WHICH_REF, RL_ACTOR_REF_LOGP, NULL);
}

/* The KL to the reference, this step's coefficient (*coef, before the
 * adaptive controller moves it) and AEPO's KL steps. */
static int s_kl(s_rlvr *r, rl_lm_kl *kl, double *coef)
{
    int rc = rl_lm_kl_tokens(r->batch, S_L, r->kl_kind, kl, r->t->ms);
    *coef = r->klc.value;
    if (!rc)
        rl_metric_set_put(r->t->ms, "actor/reward_kl_coef", r->klc.value);
    if (!rc && r->a->use_kl_in_reward && kl->n > 0)
        rc = rl_kl_ctl_update(&r->klc, kl->sum / kl->n, kl->B);
    if (!rc && r->aepo_on) /* dual ascent on the per-bucket KL budgets, token weights */
        rc = rl_rlvr_aepo_kl(&r->aepo, kl->kl, kl->mask, kl->B, kl->R, *coef,
                             r->a->use_kl_in_reward, r->t->ms);
    return rc;
}

/* KL (when used) and the advantages; the samples to rollout_data_dir. */
static int s_phase_adv(void *arg)
{
    s_rlvr *r = arg;
    rl_lm_kl kl = {0};
    double coef = 0;
    int rc = r->need_ref ? s_kl(r, &kl, &coef) : RL_OK;
    if (!rc)
        rc = rl_lm_advantages(r->batch, S_L, &r->adv, r->need_ref ? &kl : NULL, coef, r->t->ms);
    if (!rc && *r->tc->rollout_data_dir) /* what this step trains on: shaped scores, advantages */
        rc = rl_lm_dump_samples(r->tc->rollout_data_dir,
                                RL_CFG_PATH(&rl_rlvr_trainer_section, rl_rlvr_trainer_config,
                                            rollout_data_dir),
                                r->step, r->batch, NULL);
    rl_lm_kl_free(&kl);
    return rc;
}

static int s_phase_update(void *arg)
{
    s_rlvr *r = arg;
    return rl_lm_ppo_update(&r->j, r->batch, r->t->ms);
}

static int s_phase_sync(void *arg)
{
    s_rlvr *r = arg;
    int rc = rl_lm_job_sync_weights(&r->j);
    return rc ? rc : rl_weight_sync_metrics(&r->j.a.sync, r->t->ms);
}

static int s_phases(void *st, int64_t step, rl_phase *out)
{
    s_rlvr *r = st;
    int n = 0;
    r->step = step;
    rl_driver_call_time(r->t->d, &r->call_wall0, &r->call_comp0, NULL);
    out[n++] = (rl_phase){"gen", s_phase_gen, 1}; /* it puts timing_s/gen and /reward */
    if (r->aepo_on)
        out[n++] = (rl_phase){"aepo", s_phase_aepo, 0};
    out[n++] = (rl_phase){"old_log_prob", s_phase_old_log_prob, 0};
    if (r->need_ref)
        out[n++] = (rl_phase){"ref", s_phase_ref_log_prob, 0};
    out[n++] = (rl_phase){"adv", s_phase_adv, 0};
    out[n++] = (rl_phase){"update_actor", s_phase_update, 0};
    out[n++] = (rl_phase){"sync_weights", s_phase_sync, 0};
    return n;
}

/* ---- around the phases -------------------------------------------------------------------------- */

static int s_step_metrics(void *st, double t0)
{
    s_rlvr *r = st;
    return rl_lm_step_perf(r->t, r->batch, t0, r->call_wall0, r->call_comp0);
}

static int s_validate(void *st)
{
    s_rlvr *r = st;
    double acc, fmt, len, t0 = rl_now_s();
    int rc = rl_lm_job_validate(&r->j, r->step, &acc, &fmt, &len, r->t->ms);
    if (rc)
        return rc;
    rl_metric_set_put(r->t->ms, RL_M_VAL_ACCURACY, acc);
    rl_metric_set_put(r->t->ms, "val/format", fmt);
    if (r->step > 0)
        rl_metric_set_put(r->t->ms, "timing_s/testing", rl_now_s() - t0);
    else
        rl_log_info("step 0: val accuracy %.3f (format %.3f)", acc, fmt);
    return RL_OK;
}

/* validation every trainer.val_every steps, and of the warm start (step 0) */
static int s_hooks(void *st, rl_recipe_hook *out)
{
    out[0] = (rl_recipe_hook){((s_rlvr *)st)->t->val_every, 1, s_validate};
    return 1;
}

static void s_step_clear(void *st)
{
    s_rlvr *r = st;
    rl_dataproto_free(r->batch);
    r->batch = NULL;
}

/* ---- checkpoints ------------------------------------------------------------------------------- */

static int s_save(void *st)
{
    s_rlvr *r = st;
    rl_data_pos pos = rl_data_iter_tell(r->j.it);
    json_t *extra = json_pack("{s:f}", "kl_coef", r->klc.value);
    if (extra && r->aepo_on) /* the difficulty state travels with the checkpoint */
        json_object_set_new(extra, "aepo", rl_rlvr_aepo_save(&r->aepo));
    int rc = extra ? rl_rlvr_gen_save(&r->gen, extra)
                   : rl_error_set(RL_ENOMEM, "checkpoint: out of memory");
    if (!rc)
        rc = rl_trainer_save(r->t, r->j.a.actor, r->step, pos.epoch, pos.index, extra);
    json_decref(extra);
    return rc;
}

/* Checkpoint `want` (-1: the newest; > 0: that step) into the actor ranks
 * and the state: KL coefficient, the gen phase's (weight version, queues),
 * AEPO, the data position; then the weights to the rollout ranks. */
static int s_restore(void *st, int64_t want, int64_t *start)
{
    s_rlvr *r = st;
    int64_t epoch, index;
    json_t *extra = NULL;
    int rc = rl_trainer_restore(r->t, r->j.a.actor, want, start, &epoch, &index, &extra);
    if (rc || *start == 0)
        return rc;
    const json_t *kc = json_object_get(extra, "kl_coef"), *aepo = json_object_get(extra, "aepo");
    if (json_is_number(kc))
        r->klc.value = json_number_value(kc);
    rc = rl_rlvr_gen_restore(&r->gen, extra, *start);
    if (!rc && r->aepo_on && aepo)
        rc = rl_rlvr_aepo_restore(&r->aepo, aepo, r->t->ckpt_dir);
    else if (!rc && r->aepo_on)
        rl_log_warn("the checkpoint has no AEPO state: AEPO starts afresh");
    json_decref(extra);
    if (!rc)
        rc = rl_data_iter_seek(r->j.it, (rl_data_pos){epoch, index});
    return rc ? rc : rl_lm_job_sync_weights(&r->j);
}

/* ---- the loop ------------------------------------------------------------------------------------ */

static int s_open(void *st, rl_trainer *t)
{
    s_rlvr *r = st;
    const rl_config *job = t->job;
    const rl_estimator *est = NULL;
    r->t = t;
    int rc = !(r->a = rl_config_section_get(job, &rl_rlvr_section)) ||
                     !(r->tc = rl_config_section_get(job, &rl_rlvr_trainer_section))
                 ? rl_error_code()
                 : s_algo(job, r->a, &est, &r->kl_kind);
    if (!rc)
        rc = rl_lm_job_open(&r->j, t->d, job);
    if (!rc)
        t->save_files = r->j.save_files; /* the tokenizer's files in every checkpoint */
    if (!rc)
        rc = rl_rlvr_check_sizes(job, est->name, est->min_samples, rl_group_size(r->j.a.actor));
    if (!rc)
        rc = rl_rlvr_aepo_open(&r->aepo, job, &r->aepo_on);
    if (!rc)
        rc = rl_rlvr_gen_open(&r->gen, &r->j, job, t->seed);
    if (!rc) /* partial rollouts: the rollout switches versions in while it generates */
        r->j.a.sync.detach = r->gen.partial;
    if (!rc && *r->tc->rollout_data_dir && rl_mkdir_p(r->tc->rollout_data_dir))
        rc = RL_CFG_ERROR(job, &rl_rlvr_trainer_section, rl_rlvr_trainer_config, rollout_data_dir,
                          RL_EIO, "%s", rl_error_message());
    if (rc)
        return rc;
    const rl_rlvr_config *a = r->a;
    r->need_ref = a->use_kl_in_reward || r->j.a.actor_cfg.use_kl_loss;
    r->adv = (rl_lm_adv_cfg){est, r->j.rollout_cfg.n, a->gamma, a->norm_adv_by_std_in_grpo,
                             a->uniform_scale, a->use_kl_in_reward, a->tis_imp_ratio_cap,
                             RL_CFG_PATH(&rl_rlvr_section, rl_rlvr_config, tis_imp_ratio_cap)};
    return a->kl_ctrl_type == 1 ? rl_kl_ctl_init_adaptive(&r->klc, a->kl_coef, a->target_kl, a->horizon)
                                : rl_kl_ctl_init_fixed(&r->klc, a->kl_coef);
}

/* The bootstrap's rounds (step 0, rounds 1000+). */
static int s_bootstrap_round(void *ctx, int64_t round, int64_t n, rl_dataproto **out)
{
    double g, w;
    return rl_rlvr_gen_round(&((s_rlvr *)ctx)->gen, 0, 1000 + round, n, out, &g, &w);
}

/* A fresh start: AEPO's difficulty pass, after which training starts at
 * the data's beginning. */
static int s_fresh(void *st)
{
    s_rlvr *r = st;
    if (!r->aepo_on || !r->aepo.bootstrap)
        return RL_OK;
    int rc = rl_rlvr_aepo_bootstrap(&r->aepo, r->j.batch, s_bootstrap_round, r);
    return rc ? rc : rl_data_iter_seek(r->j.it, (rl_data_pos){0, 0});
}

static void s_close(void *st, int reopen)
{
    s_rlvr *r = st;
    (void)reopen;
    rl_rlvr_gen_close(&r->gen);
    rl_rlvr_aepo_close(&r->aepo);
    if (r->t)
        r->t->save_files = NULL;
    rl_lm_job_close(&r->j);
    memset(r, 0, sizeof *r);
}

static const rl_recipe_loop s_loop = {
    .state_size = sizeof(s_rlvr),
    .open = s_open, .restore = s_restore, .fresh = s_fresh, .phases = s_phases,
    .step_metrics = s_step_metrics, .hooks = s_hooks, .save = s_save,
    .step_clear = s_step_clear, .close = s_close,
};

/* The run, then the model as <output_dir>/final. */
static int s_run(rl_driver *d, const rl_config *job)
{
    int rc = rl_recipe_run(d, job, &s_loop);
    return rc || rl_driver_interrupted(d) ? rc : rl_lm_save_final(d, job);
}

const rl_recipe rl_recipe_rlvr = {
    .name = "rlvr",
    .summary = "RL with verifiable rewards: GRPO, RLOO, REINFORCE++(-baseline), REINFORCE Pro Max, OPO",
    .sections = (const rl_config_section *const[]){
        &rl_trainer_steps_section, &rl_trainer_ckpt_section, &rl_trainer_recovery_section,
        RL_LM_SECTIONS, &rl_rlvr_trainer_section, &rl_rlvr_section, &rl_rlvr_aepo_section,
        &rl_rlvr_guidance_section, &rl_rlvr_replay_section, &rl_estimator_section, &rl_group_norm_section,
        &rl_discount_section, NULL},
    .changes = rl_rlvr_changes,
    .roles = rl_lm_roles,
    .prepare = s_prepare,
    .run = s_run,
};
