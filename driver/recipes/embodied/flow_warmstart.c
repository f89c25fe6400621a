/* driver/recipes/embodied/flow_warmstart.c — recipe `flow_warmstart`: the few-shot
 * SFT warm start of the embodied track's flow policy (model.type
 * flow_policy, common/nn/models/flow_policy.h; seed 001 / RLinf's few-shot SFT), then
 * its evaluation on LIBERO-Object.
 *
 *   data   warmstart.demos (a libero_collect dataset, docs/ARCHITECTURE.md
 *          "Demonstration datasets"): the first warmstart.demos_per_task
 *          successful episodes of each task; a pair per step s: the
 *          observation before s and the chunk of C = model.num_action_chunks
 *          actions s … s+C−1, past the episode's end the last action
 *          repeated (π0 / LIBERO loaders).
 *   norm   obs_norm = the pairs' mean and std (std floored at 0.01) — set in
 *          prepare on a fresh model (init_random(trainer.seed)) saved to
 *          <output_dir>/init, which becomes model.init_from, unless the job
 *          names model.init_from itself.
 * Steps 1 … warmstart.steps (rl_recipe_run), one phase each:
 *   train  one optimiser step of flow matching on the actor (its
 *          flow_matching_step, AdamW + FSDP): batch_size pairs drawn by
 *          Philox(trainer.seed, step), t ~ U(0, 1) or π0's
 *          0.999·Beta(1.5, 1) + 0.001 (warmstart.t_schedule), ε ~ N(0, 1),
 *          x_t = (1 − t)·a + t·ε, target ε − a.
 * then, after the last one (as step warmstart.steps + 1 when there is an
 * evaluation):
 *   save   <output_dir>/final: model.safetensors + config.json (atomic).
 *   eval   the trained weights synced to the rollout; eval.episodes episodes
 *          (env rank r ⇄ rollout rank r, rounds of total_num_envs, greedy ODE)
 *          → success per task and overall, logged and written to
 *          <output_dir>/metrics.jsonl (eval/success, eval/success_task_K);
 *          GIFs of the first eval.gif_episodes_per_task episodes of each task
 *          in <output_dir>/gifs/warmstart/ (libero_gif.h).
 */
#include <stddef.h>
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
#include "rlrt/nn/model.h"
#include "workers/env/env.h"
#include "workers/rollout/rollout.h"

typedef struct s_ws {
    rl_trainer *t; /* the loop's (rl_recipe_run) */
    rl_actor_job j;
    const rl_warmstart_config *o;
    const rl_env_config *env;
    rl_flow_demos p;
    int64_t step;
    double t0; /* when training began */
} s_ws;

static int s_phase_train(void *arg)
{
    s_ws *s = arg;
    static const char *const keys[1] = {RL_ACTOR_M_LOSS};
    double loss = 0, gnorm = 0, lr = 0;
    rl_dataproto *req = rl_flow_demos_batch(&s->p, s->t->seed, s->step, s->o->batch_size, s->o->beta_t);
    int rc = req ? rl_actor_job_actor_step(&s->j, RL_ACTOR_FLOW_STEP, req, keys, 1, &loss, &gnorm, &lr)
                 : rl_error_code();
    rl_dataproto_free(req);
    if (rc)
        return rc;
    rl_metric_set_put(s->t->ms, "train/flow_matching_loss", loss);
    rl_metric_set_put(s->t->ms, "actor/grad_norm", gnorm);
    rl_metric_set_put(s->t->ms, "actor/lr", lr);
    return RL_OK;
}

static int s_phase_save(void *arg)
{
    s_ws *s = arg;
    char path[4200];
    snprintf(path, sizeof path, "%s/final", s->t->out_dir);
    int rc = rl_call_all(s->j.actor, RL_ACTOR_SAVE_MODEL, json_pack("{s:s}", RL_ACTOR_PATH, path));
    if (!rc)
        rl_log_info("warm start: %lld steps in %.1f s; saved %s", (long long)s->o->steps, rl_now_s() - s->t0,
                    path);
    return rc;
}

static int s_phase_sync(void *arg) { return rl_actor_job_sync_weights(&((s_ws *)arg)->j); }

/* eval.episodes greedy episodes → success per task, logged and written. */
static int s_phase_eval(void *arg)
{
    s_ws *s = arg;
    rl_group *genv = rl_driver_group(s->t->d, RL_ENV_ROLE);
    rl_episode_tally tally;
    double t0 = rl_now_s();
    int rc = genv ? rl_libero_evaluate(s->t->d, genv, s->j.rollout, s->t->job, 0, s->o->eval_episodes, "warmstart",
                                       0, &tally)
                  : rl_error_code();
    if (rc)
        return rc;
    rl_episode_tally_put(&tally, "eval/success", s->t->ms, NULL, 0);
    for (int k = 0; k < RL_ENV_MAX_TASKS; k++)
        if (tally.n[k])
            rl_log_info("task %d: success %.3f (%lld of %lld)", k, (double)tally.ok[k] / (double)tally.n[k],
                        (long long)tally.ok[k], (long long)tally.n[k]);
    rl_metric_set_put(s->t->ms, "eval/wall_s", rl_now_s() - t0);
    rl_log_info("eval: success %.3f over %lld episodes in %.1f s",
                tally.all ? (double)tally.all_ok / (double)tally.all : 0.0, (long long)tally.all, rl_now_s() - t0);
    return RL_OK;
}

/* Steps 1 … warmstart.steps train; the last step saves the final model,
 * then (a step of its own) syncs and evaluates it. */
static int s_phases(void *st, int64_t step, rl_phase *out)
{
    s_ws *s = st;
    int n = 0;
    s->step = step;
    if (step <= s->o->steps)
        out[n++] = (rl_phase){"train", s_phase_train, 0};
    if (step == s->t->total_steps) {
        out[n++] = (rl_phase){"save", s_phase_save, 0};
        if (s->o->eval_episodes > 0) {
            out[n++] = (rl_phase){"sync_weights", s_phase_sync, 0};
            out[n++] = (rl_phase){"eval", s_phase_eval, 0};
        }
    }
    return n;
}

static int s_open(void *st, rl_trainer *t)
{
    s_ws *s = st;
    const rl_config *job = t->job;
    s->t = t;
    s->o = rl_config_section_get(job, &rl_warmstart_section);
    s->env = s->o ? rl_config_section_get(job, &rl_env_section) : NULL;
    const rl_model_flow_policy_config *m = s->env ? rl_config_section_get(job, &rl_model_flow_policy_section) : NULL;
    int rc = m ? rl_flow_demos_open(job, &rl_warmstart_section, offsetof(rl_warmstart_config, demos), s->o->demos,
                                    s->o->demos_per_task, m->num_action_chunks, (int)m->num_tasks, &s->p)
               : rl_error_code();
    if (!rc)
        rc = rl_actor_job_open(&s->j, t->d, job, 1, 0);
    if (!rc && s->o->batch_size % rl_group_size(s->j.actor))
        rc = RL_CFG_ERROR(job, &rl_warmstart_section, rl_warmstart_config, batch_size, RL_ECONFIG,
                          "%lld must be a multiple of the %d actor ranks", (long long)s->o->batch_size,
                          rl_group_size(s->j.actor));
    if (rc)
        return rc;
    rl_log_info("warm start: %lld demonstrations (%lld pairs of %lld-action chunks), %lld steps of %lld",
                (long long)s->p.eps, (long long)s->p.n, (long long)m->num_action_chunks, (long long)s->o->steps,
                (long long)s->o->batch_size);
    /* the evaluation, or a run of no steps, is a step of its own after training */
    t->total_steps = s->o->steps + (s->o->eval_episodes > 0 || s->o->steps == 0);
    s->t0 = rl_now_s();
    return RL_OK;
}

static void s_close(void *st, int reopen)
{
    s_ws *s = st;
    (void)reopen;
    rl_actor_job_close(&s->j);
    rl_flow_demos_free(&s->p);
    memset(s, 0, sizeof *s);
}

static const rl_recipe_loop s_loop = {
    .state_size = sizeof(s_ws), .open = s_open, .phases = s_phases, .close = s_close,
};

/* A fresh model with the demonstrations' obs_norm, saved to <output_dir>/init,
 * becomes model.init_from. */
static int s_init_model(rl_config *job, const rl_warmstart_config *o, const rl_model_flow_policy_config *m,
                        const rl_trainer_config *tc)
{
    rl_flow_demos p;
    int rc = rl_flow_demos_open(job, &rl_warmstart_section, offsetof(rl_warmstart_config, demos), o->demos,
                                o->demos_per_task, m->num_action_chunks, (int)m->num_tasks, &p);
    if (rc)
        return rc;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/init", tc->output_dir);
    rl_model *model = rl_model_build(job, (uint64_t)tc->seed);
    rc = model ? rl_flow_policy_set_obs_norm(model, p.mean, p.std) : rl_error_code();
    if (!rc && (rc = rl_mkdir_p(tc->output_dir)) == RL_OK)
        rc = rl_model_save(model, dir);
    rl_model_free(model);
    rl_flow_demos_free(&p);
    return rc ? rc : RL_CFG_SET(job, &rl_model_base_section, rl_model_base_config, init_from, dir);
}

/* Checks the job; the trainer's step count is warmstart.steps (the actor's
 * lr schedule counts them); unless model.init_from is set, a fresh model
 * becomes it (s_init_model). */
static int s_prepare(rl_config *job)
{
    const rl_warmstart_config *o = rl_config_section_get(job, &rl_warmstart_section);
    int rc = o ? rl_libero_gif_check(job) : rl_error_code();
    char steps[32];
    snprintf(steps, sizeof steps, "%lld", (long long)(rc ? 0 : o->steps));
    const char *const from[] = {RL_CFG_PATH(&rl_warmstart_section, rl_warmstart_config, steps), NULL};
    if (!rc && !(rc = RL_CFG_DERIVE(job, &rl_trainer_steps_section, rl_trainer_steps_config, total_steps,
                                    steps, from, "the warm start's steps")) &&
        !(rc = RL_CFG_SET(job, &rl_trainer_steps_section, rl_trainer_steps_config, val_every, "0")))
        rc = rl_actor_job_prepare(job, 1);
    if (rc)
        return rc;
    /* the tree changed: its sections afresh */
    const rl_env_config *env = rl_config_section_get(job, &rl_env_section);
    const rl_model_flow_policy_config *m = env ? rl_config_section_get(job, &rl_model_flow_policy_section) : NULL;
    const rl_model_base_config *base = m ? rl_config_section_get(job, &rl_model_base_section) : NULL;
    const rl_trainer_config *tc = base ? rl_config_section_get(job, &rl_trainer_section) : NULL;
    if (!tc || !(o = rl_config_section_get(job, &rl_warmstart_section)))
        return rl_error_code();
    if (m->num_action_chunks != env->num_action_chunks)
        return RL_CFG_ERROR2(job, &rl_model_flow_policy_section, rl_model_flow_policy_config, num_action_chunks,
                             &rl_env_section, rl_env_config, num_action_chunks,
                             RL_ECONFIG, "%s is %lld but %s is %lld",
                             RL_CFG_PATH(&rl_model_flow_policy_section, rl_model_flow_policy_config,
                                         num_action_chunks),
                             (long long)m->num_action_chunks,
                            RL_CFG_PATH(&rl_env_section, rl_env_config, num_action_chunks),
                            (long long)env->num_action_chunks);
    if (env->policy == 0)
        return RL_CFG_ERROR(job, &rl_env_section, rl_env_config, policy, RL_ECONFIG,
                            "the warm start evaluates its model: set 'model'");
    if (env->auto_reset) /* a round's success would count the episode after the reset */
        return RL_CFG_ERROR(job, &rl_env_section, rl_env_config, auto_reset, RL_ECONFIG,
                            "the warm start's evaluation runs one episode per env per round: set false");
    return base->init_from && *base->init_from ? RL_OK : s_init_model(job, o, m, tc);
}

static const char *const s_roles[] = {RL_ACTOR_ROLE, RL_ROLLOUT_ROLE, RL_ENV_ROLE, NULL};

const rl_recipe rl_recipe_flow_warmstart = {
    .name = "flow_warmstart",
    .summary = "few-shot SFT warm start of the flow policy on LIBERO-Object demonstrations, then its evaluation",
    .sections = (const rl_config_section *const[]){&rl_trainer_recovery_section, &rl_model_base_section,
                                                   &rl_model_flow_policy_section, &rl_env_section,
                                                   &rl_libero_gif_section, &rl_warmstart_section,
                                                   &rl_actor_section, &rl_actor_diffusion_section,
                                                   &rl_rollout_section, &rl_rollout_flow_section, NULL},
    .changes = rl_flow_warmstart_changes,
    .roles = s_roles,
    .prepare = s_prepare,
    .loop = &s_loop,
};
