/* libero_rl.c — recipe `libero_rl`: RL of the flow_policy action model
 * (common/nn/models/flow_policy.h) on LIBERO-Object — FlowSAR (seed 000), FlowIPO
 * (seed 001), flow-SDE GRPO and PPO (RLinf). algorithm.loss_type and
 * algorithm.adv_estimator pick the method; nothing else changes
 * (contract of the methods: workers/flow_rl.h; the batch transforms:
 * common/batch/episodes.h). A step is this table of phases:
 *   rollout       every env runs one episode from a reset (initial states
 *                 chosen by the step, env.init_state) while rollout rank r
 *                 serves env rank r with the flow-SDE policy (FlowSAR and
 *                 FlowIPO at rollout.noise_level 0: the ODE) and records
 *                 each policy call (observation, initial noise, chain,
 *                 log-probs, action); joined by (env_row, chunk_step) into
 *                 the step's batch: the kept policy calls, step-major;
 *                 metrics rollout/env_steps (the control steps the round's
 *                 episodes took: the env ranks' count, checked against the
 *                 sum of the episodes' lengths) and rollout/env_steps_total
 *                 (over the run so far: the x axis of sample efficiency,
 *                 bench/bench_embodied_report.py; evaluations not counted)
 *   annotate      flow_sar: the rollout's self-annotation with the EMA
 *                 reference (e_i at τ_mid; t, ε, v_old for training);
 *                 flow_ipo: reference actions from the same initial noise
 *                 (and t, ε, v_ref); actor_critic: the value head's values
 *   credit        flow_sar: softmax credit weights and labels; flow_ipo:
 *                 sigmoid weights; actor: GRPO over the env groups of
 *                 env.group_size (same task and initial state), or the
 *                 episodes of a task when it is 1 (reward filter);
 *                 actor_critic: GAE over chunk steps
 *   update_actor  actor.ppo_epochs × mini-batches of ppo_mini_batch_size
 *                 kept rows (shuffled by (seed, step)): the actor's
 *                 update_flow (FSDP, AdamW, grad clip); with
 *                 algorithm.demo_coef > 0 each mini-batch carries as many
 *                 demonstration pairs (algorithm.demos, flow_demos.h) and
 *                 the loss adds demo_coef × their flow matching (the anchor)
 *   sync_weights  the new weights to the rollout ranks (which update θ_ref)
 * then evaluation every trainer.val_every steps and at step 0 (the ODE
 * policy on fixed initial states: eval.episodes_per_task per task; success
 * per task; at step 0 and the last step GIFs of the first episodes of each
 * task in <output_dir>/gifs/step_N/, libero_gif.h), metrics.jsonl +
 * TensorBoard, and a checkpoint every trainer.save_every steps (actor model
 * + optimiser, θ_ref in <ckpt>/step_N.ema and, with eval.ema_decay > 0, the
 * evaluation EMA θ_eval in step_N.eval_ema; the extra `env_steps_total`
 * carries rollout/env_steps_total). Every draw is a function of
 * (seed, step, row), so trainer.resume continues exactly; a lost worker is
 * recovered (rl_recipe_run). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/batch/episodes.h"
#include "common/core/util.h"
#include "common/schema/flow_policy.h"
#include "common/schema/libero.h"
#include "common/schema/model.h"
#include "common/schema/trainer.h"
#include "driver/recipes/actor_job.h"
#include "driver/recipes/embodied/flow_demos.h"
#include "driver/recipes/embodied/libero_common.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "workers/env/env.h"
#include "workers/flow_rl.h"
#include "workers/rollout/rollout.h"

static const char *const s_roles[] = {RL_ACTOR_ROLE, RL_ROLLOUT_ROLE, RL_ENV_ROLE, NULL};

typedef struct s_lr {
    rl_trainer *t; /* the loop's (rl_recipe_run) */
    rl_actor_job j;
    const rl_env_config *env;
    const rl_flow_rl_config *alg;
    const rl_libero_eval_config *ev;
    const rl_estimator *est;
    rl_group *genv;
    int64_t step, S, C;
    int64_t env_steps_total; /* control steps of the training rounds so far (the checkpoint carries it) */
    rl_episode_batch b;  /* this step */
    rl_flow_demos demos; /* algorithm.demo_coef > 0: the anchor's pairs */
} s_lr;

/* the checkpoint extra that carries s_lr.env_steps_total */
#define S_CKPT_ENV_STEPS "env_steps_total"

/* ---- phases ----------------------------------------------------------------------------------------- */

/* The control steps of the round: the env ranks' counts (RL_ENV_M_STEPS),
 * which must be the sum of its episodes' lengths; into the step's and the
 * run's counts. */
static int s_env_steps(s_lr *s, const rl_libero_replies *r, const rl_episode_envs *e)
{
    int64_t steps = 0;
    for (int i = 0; i < r->E; i++) {
        int64_t n;
        if (rl_dataproto_meta_get_int(r->env[i], RL_ENV_M_STEPS, 0, INT64_MAX / 4, &n))
            return rl_error_wrap(rl_error_code(), "env/%d interact reply", i);
        steps += n;
    }
    const int64_t held = rl_episode_envs_steps(e);
    if (steps != held)
        return rl_error_set(RL_EPROTO, "the env ranks report %lld env steps, their episodes hold %lld",
                            (long long)steps, (long long)held);
    s->env_steps_total += steps;
    rl_metric_set_put(s->t->ms, "rollout/env_steps", (double)steps);
    rl_metric_set_put(s->t->ms, "rollout/env_steps_total", (double)s->env_steps_total);
    return RL_OK;
}

/* A training round: the flow SDE (the ODE with rollout.noise_level 0),
 * grouped, recorded; its batch and its env steps. */
static int s_phase_rollout(void *arg)
{
    s_lr *s = arg;
    rl_libero_replies r;
    rl_episode_envs e = {0};
    int rc = rl_libero_round(s->genv, s->j.rollout, s->S, 1000000 + s->step, s->alg->train_ode, 0, 0, 0, 1, &r);
    if (!rc && !(rc = rl_episode_envs_gather(r.env, r.E, s->S * s->C, &rl_libero_cols, &e)))
        rc = rl_episode_batch_build(&e, r.rec, r.E, s->S, s->C, &rl_libero_cols, s->t->seed, s->step,
                                    s->env->clip_actions, &s->b, s->t->ms);
    if (!rc)
        rc = s_env_steps(s, &r, &e);
    rl_episode_envs_free(&e);
    rl_libero_replies_free(&r);
    return rc;
}

static int s_phase_annotate(void *arg)
{
    s_lr *s = arg;
    if (s->alg->loss == RL_FLOW_LOSS_GRPO)
        return RL_OK;
    static const char *const in[6] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK, RL_FLOW_ACTION, RL_FLOW_SEEDS,
                                      RL_FP_INITIAL_NOISE};
    const int ppo = s->alg->loss == RL_FLOW_LOSS_PPO; /* the value head's values; else the rollout's */
    rl_dataproto *out = NULL,
                 *req = rl_dataproto_request(s->b.rows, in, ppo ? 3 : s->alg->loss == RL_FLOW_LOSS_IPO ? 6 : 5,
                                             NULL, 0, NULL);
    int rc = req ? rl_group_call_sync(ppo ? s->j.actor : s->j.rollout,
                                      ppo ? RL_ACTOR_FLOW_VALUES : RL_ROLLOUT_FLOW_ANNOTATE,
                                      RL_DISPATCH_DP_COMPUTE, req, &out)
                 : rl_error_code();
    rl_dataproto_free(req);
    if (!rc && rl_dataproto_rows(out) != rl_dataproto_rows(s->b.rows))
        rc = rl_error_set(RL_EPROTO, "the annotation has %lld rows, the batch %lld",
                          (long long)rl_dataproto_rows(out), (long long)rl_dataproto_rows(s->b.rows));
    if (rc) {
        rl_dataproto_free(out);
        return rc;
    }
    return rl_dataproto_union_into(&s->b.rows, out);
}

static int s_phase_credit(void *arg)
{
    s_lr *s = arg;
    return rl_episode_credit(&s->b, &rl_libero_cols, s->alg, s->est, s->env, s->t->ms);
}

/* The chunk steps of a mini-batch that are trained (its step mask's ones). */
static int64_t s_steps(const rl_dataproto *mb)
{
    const rl_tensor *t = rl_dataproto_tensor((rl_dataproto *)mb, RL_FP_STEP_MASK);
    const float *m = t ? rl_tensor_data(t) : NULL;
    int64_t steps = 0;
    for (int64_t i = 0; m && i < rl_dataproto_rows(mb) * t->shape[1]; i++)
        steps += m[i] != 0.0f;
    return steps;
}

static int s_phase_update(void *arg)
{
    s_lr *s = arg;
    const int64_t n = rl_dataproto_rows(s->b.rows), W = rl_group_size(s->j.actor);
    int64_t mini = s->j.actor_cfg.mini_batch / W * W;
    if (mini < W)
        mini = W;
    int nkeep;
    const char *const *keep = rl_libero_update_columns(s->alg->loss, &nkeep);
    const int has_steps = rl_dataproto_tensor(s->b.rows, RL_FP_STEP_MASK) != NULL;
    rl_episode_update u;
    memset(&u, 0, sizeof u);
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)(n + 1));
    int rc = perm ? RL_OK : rl_error_set(RL_ENOMEM, "out of memory");
    for (int64_t e = 0; !rc && e < s->j.actor_cfg.epochs; e++) {
        rl_episode_shuffle(s->t->seed, s->step, e, perm, n);
        for (int64_t r0 = 0; !rc && r0 + W <= n; r0 += mini) {
            int64_t rows = r0 + mini <= n ? mini : (n - r0) / W * W;
            rl_dataproto *mb = rl_dataproto_index(s->b.rows, perm + r0, rows);
            json_t *meta = mb ? json_pack("{s:I,s:I}", RL_ACTOR_GLOBAL_ROWS, (json_int_t)rows, RL_ACTOR_GLOBAL_TOKENS,
                                          (json_int_t)(has_steps ? s_steps(mb) : 0))
                              : NULL;
            rl_dataproto *req = mb ? rl_dataproto_request(mb, keep, nkeep, NULL, 0, meta) : NULL;
            rl_dataproto_free(mb);
            if (req && s->alg->demo_coef > 0 &&
                !(rc = rl_flow_demos_anchor(&s->demos, s->t->seed ^ 0xd3e0ull, s->step * 100000 + u.updates, req)))
                u.demo_rows += (double)rows;
            double sums[RL_FUS_COUNT], gnorm = 0, lr = 0;
            if (!rc)
                rc = req ? rl_actor_job_actor_step(&s->j, RL_ACTOR_UPDATE_FLOW, req, rl_libero_update_sums,
                                                   RL_FUS_COUNT, sums, &gnorm, &lr)
                         : rl_error_code();
            rl_dataproto_free(req);
            for (int k = 0; !rc && k < RL_FUS_COUNT; k++)
                u.sum[k] += sums[k];
            u.grad_norm += gnorm;
            u.lr = lr;
            u.updates++;
        }
    }
    free(perm);
    if (!rc)
        rl_episode_update_put(&u, rl_libero_update_sums, s->alg, s->t->ms);
    return rc;
}

/* the new weights, and each sync's bytes, seconds, GB/s and transport
 * (perf/weight_sync_*: CUDA IPC when the rollout ranks share the actor's
 * GPU, examples/cluster-gpu-libero.yaml) */
static int s_phase_sync(void *arg)
{
    s_lr *s = arg;
    int rc = rl_actor_job_sync_weights(&s->j);
    return rc ? rc : rl_weight_sync_metrics(&s->j.sync, s->t->ms);
}

static int s_phases(void *st, int64_t step, rl_phase *out)
{
    static const rl_phase phases[] = {
        {"rollout", s_phase_rollout, 0},       {"annotate", s_phase_annotate, 0}, {"credit", s_phase_credit, 0},
        {"update_actor", s_phase_update, 0}, {"sync_weights", s_phase_sync, 0},
    };
    ((s_lr *)st)->step = step;
    memcpy(out, phases, sizeof phases);
    return (int)(sizeof phases / sizeof phases[0]);
}

/* ---- evaluation ---------------------------------------------------------------------------------------- */

/* θ_eval into the rollout ranks' models (on = 1) or the live weights back
 * (on = 0); eval.ema_decay > 0 only. */
static int s_eval_weights(s_lr *s, int on)
{
    return rl_call_all(s->j.rollout, RL_ROLLOUT_EVAL_WEIGHTS, json_pack("{s:b}", RL_FLOW_EMA, on));
}

/* The ODE policy (greedy) on fixed initial states: ungrouped rounds 0.. of
 * the env.init_state cycle give episodes_per_task distinct states per task
 * (with eval.ema_decay > 0, the rollout's θ_eval acts). */
static int s_evaluate(void *ctx)
{
    s_lr *s = ctx;
    double t0 = rl_now_s();
    const int ema = s->ev->ema_decay > 0, gifs = s->step == 0 || s->step == s->t->total_steps;
    rl_episode_tally tally;
    int rc = ema ? s_eval_weights(s, 1) : RL_OK;
    if (!rc) /* GIFs before and after training (libero_gif.h) */
        rc = rl_libero_evaluate(s->t->d, s->genv, s->j.rollout, s->t->job, s->ev->episodes_per_task, 0, NULL,
                                gifs ? s->step : -1, &tally);
    if (ema) { /* the live weights back, on every path */
        int rc2 = s_eval_weights(s, 0);
        rc = rc ? rc : rc2;
    }
    if (rc)
        return rl_error_wrap(rc, "evaluation");
    char line[1024];
    snprintf(line, sizeof line, "step %lld evaluation%s: success %.3f over %lld episodes (per task:",
             (long long)s->step, ema ? " (EMA weights)" : "",
             tally.all ? (double)tally.all_ok / (double)tally.all : 0.0, (long long)tally.all);
    rl_episode_tally_put(&tally, "eval/success_rate", s->t->ms, line, sizeof line - 1);
    strcat(line, ")");
    rl_metric_set_put(s->t->ms, "timing_s/eval", rl_now_s() - t0);
    rl_log_info("%s", line);
    return RL_OK;
}

/* at step 0 (the warm-started policy) and every trainer.val_every steps */
static int s_hooks(void *st, rl_recipe_hook *out)
{
    out[0] = (rl_recipe_hook){((s_lr *)st)->t->val_every, 1, s_evaluate};
    return 1;
}

/* ---- checkpoints: the actor's, and the rollout's averages θ_ref and θ_eval --------------------------------- */

static int s_has_ref(const s_lr *s) { return s->alg->loss == RL_FLOW_LOSS_SAR || s->alg->loss == RL_FLOW_LOSS_IPO; }

/* The rollout's average `which` ("ref": <ckpt>/step_N.ema, "eval":
 * step_N.eval_ema) saved into (save) or loaded from step N's directory. */
static int s_avg(s_lr *s, int64_t step, const char *which, int save)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/step_%lld.%s", s->t->ckpt_dir, (long long)step,
             strcmp(which, "eval") == 0 ? "eval_ema" : "ema");
    json_t *args = json_pack("{s:s, s:s}", RL_FLOW_PATH, dir, RL_FLOW_WHICH, which);
    if (!save)
        return rl_call_all(s->j.rollout, RL_ROLLOUT_FLOW_REF_LOAD, args);
    rl_dataproto *req = rl_dataproto_new_meta(args);
    int rc = req ? rl_mkdir_p(s->t->ckpt_dir) : rl_error_code();
    if (!rc)
        rc = rl_group_call_sync(s->j.rollout, RL_ROLLOUT_FLOW_REF_SAVE, RL_DISPATCH_RANK_ZERO, req, NULL);
    rl_dataproto_free(req);
    return rc;
}

static int s_save(void *st)
{
    s_lr *s = st;
    /* the averages first: the step directory marks the checkpoint complete */
    int rc = s_has_ref(s) ? s_avg(s, s->step, "ref", 1) : RL_OK;
    if (!rc && s->ev->ema_decay > 0)
        rc = s_avg(s, s->step, "eval", 1);
    json_t *extra = rc ? NULL
                       : json_pack("{s:I,s:I}", "weight_version", (json_int_t)s->j.sync.version, S_CKPT_ENV_STEPS,
                                   (json_int_t)s->env_steps_total);
    if (!rc && !extra)
        rc = rl_error_set(RL_ENOMEM, "checkpoint: out of memory");
    if (!rc)
        rc = rl_trainer_save(s->t, s->j.actor, s->step, 0, s->step, extra);
    json_decref(extra);
    return rc;
}

static int s_restore(void *st, int64_t want, int64_t *start)
{
    s_lr *s = st;
    json_t *extra = NULL;
    int rc = rl_actor_job_restore(&s->j, s->t, want, start, &extra);
    /* the run's env steps so far (a checkpoint saved before they were
     * counted has none: the count starts again at the resume) */
    const json_t *steps = json_object_get(extra, S_CKPT_ENV_STEPS);
    s->env_steps_total = 0;
    if (!rc && *start > 0 && json_is_integer(steps) && json_integer_value(steps) >= 0)
        s->env_steps_total = json_integer_value(steps);
    else if (!rc && *start > 0)
        rl_log_warn("the checkpoint of step %lld has no extra.%s: rollout/env_steps_total counts from step %lld",
                    (long long)*start, S_CKPT_ENV_STEPS, (long long)*start + 1);
    json_decref(extra);
    /* after the sync: θ_ref and θ_eval exactly as saved */
    if (!rc && *start > 0 && s_has_ref(s))
        rc = s_avg(s, *start, "ref", 0);
    if (!rc && *start > 0 && s->ev->ema_decay > 0)
        rc = s_avg(s, *start, "eval", 0);
    s->step = *start;
    return rc;
}

/* ---- the loop ------------------------------------------------------------------------------------------------ */

static int s_open(void *st, rl_trainer *t)
{
    s_lr *s = st;
    const rl_config *job = t->job;
    s->t = t;
    s->env = rl_config_section_get(job, &rl_env_section);
    s->alg = s->env ? rl_config_section_get(job, &rl_flow_rl_section) : NULL;
    s->ev = s->alg ? rl_config_section_get(job, &rl_libero_eval_section) : NULL;
    s->est = s->ev ? rl_flow_rl_estimator(job, s->alg) : NULL;
    const rl_model_flow_policy_config *m = s->est ? rl_config_section_get(job, &rl_model_flow_policy_section) : NULL;
    int rc = m ? RL_OK : rl_error_code();
    if (!rc && !(s->genv = rl_driver_group(t->d, RL_ENV_ROLE)))
        rc = rl_error_code();
    if (!rc)
        rc = rl_actor_job_open(&s->j, t->d, job, 1, 0);
    if (!rc)
        rc = rl_libero_paired(s->genv, s->j.rollout, "libero_rl");
    s->C = s->env ? s->env->num_action_chunks : 1;
    s->S = s->env ? rl_libero_chunk_steps(s->env) : 1;
    if (!rc && s->alg->demo_coef > 0 &&
        !(rc = rl_flow_demos_open(job, &rl_flow_rl_section, offsetof(rl_flow_rl_config, demos), s->alg->demos,
                                  s->alg->demos_per_task, s->C, (int)m->num_tasks, &s->demos)))
        rl_log_info("demonstration anchor: %g x flow matching on %lld pairs of %lld demonstrations",
                    s->alg->demo_coef, (long long)s->demos.n, (long long)s->demos.eps);
    return rc;
}

static void s_step_clear(void *st) { rl_episode_batch_free(&((s_lr *)st)->b); }

/* After a lost worker (reopen) too: open builds it all again. */
static void s_close(void *st, int reopen)
{
    s_lr *s = st;
    (void)reopen;
    rl_episode_batch_free(&s->b);
    rl_flow_demos_free(&s->demos);
    rl_actor_job_close(&s->j);
    memset(s, 0, sizeof *s);
}

static const rl_recipe_loop s_loop = {
    .state_size = sizeof(s_lr),
    .open = s_open, .restore = s_restore, .phases = s_phases, .hooks = s_hooks,
    .save = s_save, .step_clear = s_step_clear, .close = s_close,
};

/* Before any worker starts: libero_rl's env settings, the method's
 * estimator, the lr schedule's length (updates per step are not known
 * before the episodes end: one update per epoch and step), the GIFs. */
static int s_prepare(rl_config *job)
{
    const rl_env_config *env = rl_config_section_get(job, &rl_env_section);
    const rl_flow_rl_config *alg = env ? rl_config_section_get(job, &rl_flow_rl_section) : NULL;
    if (!alg)
        return rl_error_code();
    if (env->auto_reset)
        return RL_CFG_ERROR(job, &rl_env_section, rl_env_config, auto_reset, RL_ECONFIG,
                            "libero_rl runs one episode per env per step: auto_reset must be false");
    if (env->policy != 1)
        return RL_CFG_ERROR(job, &rl_env_section, rl_env_config, policy, RL_ECONFIG,
                            "libero_rl trains the model: %s must be 'model'",
                            RL_CFG_PATH(&rl_env_section, rl_env_config, policy));
    const rl_actor_config *ac = rl_config_section_get(job, &rl_actor_section);
    if (!ac || !rl_flow_rl_estimator(job, alg))
        return rl_error_code();
    int rc = rl_actor_job_prepare(job, ac->epochs);
    return rc ? rc : rl_libero_gif_check(job);
}

const rl_recipe rl_recipe_libero_rl = {
    .name = "libero_rl",
    .summary = "embodied RL of the flow policy on LIBERO-Object: FlowSAR, FlowIPO, flow-SDE GRPO and PPO",
    .sections = (const rl_config_section *const[]){&rl_trainer_steps_section, &rl_trainer_ckpt_section,
                                                   &rl_trainer_recovery_section, &rl_model_base_section,
                                                   &rl_model_flow_policy_section, &rl_env_section,
                                                   &rl_flow_rl_section, &rl_libero_eval_section,
                                                   &rl_actor_section, &rl_rollout_section, &rl_rollout_flow_section,
                                                   &rl_estimator_section, &rl_discount_section,
                                                   &rl_libero_gif_section, NULL},
    .changes = rl_libero_rl_changes,
    .roles = s_roles,
    .prepare = s_prepare,
    .loop = &s_loop,
};
