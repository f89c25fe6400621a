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
 *   train  warmstart.steps optimiser steps of flow matching on the actor
 *          (its flow_matching_step, AdamW + FSDP): batch_size pairs drawn by
 *          Philox(trainer.seed, step), t ~ U(0, 1) or π0's
 *          0.999·Beta(1.5, 1) + 0.001 (warmstart.t_schedule), ε ~ N(0, 1),
 *          x_t = (1 − t)·a + t·ε, target ε − a.
 *   save   <output_dir>/final: model.safetensors + config.json (atomic).
 *   eval   the trained weights synced to the rollout; eval.episodes episodes
 *          (env rank r ⇄ rollout rank r, rounds of total_num_envs, greedy ODE)
 *          → success per task and overall, logged and written to
 *          <output_dir>/metrics.jsonl (eval/success, eval/success_task_K);
 *          GIFs of the first eval.gif_episodes_per_task episodes of each task
 *          in <output_dir>/gifs/warmstart/ (libero_gif.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/recipes/diffusion/diffusion_common.h"
#include "driver/recipes/embodied/flow_demos.h"
#include "driver/recipes/embodied/libero_common.h"
#include "common/nn/models/flow_policy.h"
#include "common/nn/engine/safetensors.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/dtype.h"
#include "rlrt/nn/model.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/metrics/metrics.h"
#include "common/core/rng.h"
#include "workers/env/env.h"
#include "common/core/util.h"


typedef struct s_ws_cfg {
    const char *demos;
    int64_t per_task, steps, batch, eval_episodes;
    int beta;
} s_ws_cfg;

static int s_read(const rl_config *job, s_ws_cfg *o)
{
    static const rl_config_spec spec[] = {
        {"warmstart.demos", RL_CFG_STR, offsetof(s_ws_cfg, demos), 0, 0, RL_CFG_NONEMPTY, NULL},
        {"warmstart.demos_per_task", RL_CFG_INT, offsetof(s_ws_cfg, per_task), 1, 100000, 0, NULL},
        {"warmstart.steps", RL_CFG_INT, offsetof(s_ws_cfg, steps), 0, 100000000, 0, NULL},
        {"warmstart.batch_size", RL_CFG_INT, offsetof(s_ws_cfg, batch), 1, 1 << 20, 0, NULL},
        {"warmstart.t_schedule", RL_CFG_ENUM, offsetof(s_ws_cfg, beta), 0, 0, 0, "uniform|beta"},
        {"eval.episodes", RL_CFG_INT, offsetof(s_ws_cfg, eval_episodes), 0, 10000000, 0, NULL},
    };
    return rl_config_read(job, spec, sizeof spec / sizeof spec[0], o);
}


/* ---- the run ---------------------------------------------------------------------------- */

typedef struct s_ws {
    rl_actor_job j;
    rl_trainer t;
    s_ws_cfg o;
    rl_flow_demos p;
    int64_t step;
} s_ws;


/* eval.episodes greedy episodes → success per task, logged and written. */
static int s_evaluate(s_ws *s, rl_driver *d, const rl_config *job)
{
    rl_env_config env;
    int rc = rl_env_config_read(job, &env);
    rl_group *genv = rc ? NULL : rl_driver_group(d, RL_ENV_ROLE);
    if (!rc && !genv)
        rc = rl_error_code();
    if (rc)
        return rc;
    int E = rl_group_size(genv);
    const int64_t T = (env.max_episode_steps + env.num_action_chunks - 1) / env.num_action_chunks;
    rl_dataproto **res = calloc((size_t)E, sizeof *res);
    if (!res)
        return rl_error_set(RL_ENOMEM, "out of memory");
    int64_t eps = 0, ok = 0, per[RL_ENV_MAX_TASKS][2] = {{0}}, gifs[RL_ENV_MAX_TASKS] = {0};
    double t0 = rl_now_s();
    for (int64_t round = 0; !rc && eps < s->o.eval_episodes && !rl_driver_interrupted(d); round++) {
        rc = rl_libero_round(d, genv, s->j.rollout, T, round, 1, 1, 0, &res, NULL);
        if (!rc) /* GIFs of the first episodes of each task */
            rc = rl_libero_eval_gifs(job, "warmstart", 0, res, E, s->o.eval_episodes - eps, gifs);
        for (int r = 0; r < E; r++) {
            rl_tensor *tk = rc ? NULL : rl_dataproto_tensor_shaped(res[r], RL_ENV_TASK, RL_I64, 2, NULL);
            rl_tensor *tsu = tk ? rl_dataproto_tensor_shaped(res[r], RL_ENV_SUCCESS, RL_U8, 2, NULL) : NULL;
            if (!rc && !tsu)
                rc = rl_error_code();
            for (int64_t i = 0; !rc && i < tk->shape[0] && eps < s->o.eval_episodes; i++) {
                int64_t K1 = tk->shape[1], task = ((const int64_t *)rl_tensor_data(tk))[i * K1];
                int win = ((const uint8_t *)rl_tensor_data(tsu))[i * K1 + K1 - 1] != 0;
                if (task < 0 || task >= RL_ENV_MAX_TASKS) {
                    rc = rl_error_set(RL_ERANGE, "env/%d row %lld: task %lld", r, (long long)i, (long long)task);
                    break;
                }
                per[task][0]++;
                per[task][1] += win;
                ok += win;
                eps++;
            }
            rl_dataproto_free(res[r]);
            res[r] = NULL;
        }
        if (!rc)
            rl_log_info("eval round %lld: %lld episodes, success %.3f (%.0f s)", (long long)round, (long long)eps,
                        eps ? (double)ok / (double)eps : 0.0, rl_now_s() - t0);
    }
    free(res);
    if (rc)
        return rc;
    rl_metric_set_clear(s->t.ms);
    for (int k = 0; k < RL_ENV_MAX_TASKS; k++)
        if (per[k][0]) {
            char key[64];
            double v = (double)per[k][1] / (double)per[k][0];
            snprintf(key, sizeof key, "eval/success_task_%d", k);
            rl_metric_set_put(s->t.ms, key, v);
            rl_log_info("task %d: success %.3f (%lld of %lld)", k, v, (long long)per[k][1], (long long)per[k][0]);
        }
    double all = eps ? (double)ok / (double)eps : 0.0;
    rl_metric_set_put(s->t.ms, "eval/success", all);
    rl_metric_set_put(s->t.ms, "eval/episodes", (double)eps);
    rl_metric_set_put(s->t.ms, "eval/wall_s", rl_now_s() - t0);
    rl_log_info("eval: success %.3f over %lld episodes in %.1f s", all, (long long)eps, rl_now_s() - t0);
    return rl_metrics_log(s->t.sink, s->o.steps + 1, s->t.ms);
}

static int s_run(rl_driver *d, const rl_config *job)
{
    s_ws s;
    memset(&s, 0, sizeof s);
    int64_t C, tasks;
    int rc = s_read(job, &s.o);
    if (!rc && (rl_config_get_int_in(job, "model.num_action_chunks", 1, 1000, &C) ||
                rl_config_get_int_in(job, "model.num_tasks", 1, 1 << 20, &tasks)))
        rc = rl_error_code();
    if (!rc)
        rc = rl_flow_demos_load(s.o.demos, s.o.per_task, C, (int)tasks, &s.p);
    if (!rc)
        rc = rl_trainer_open(&s.t, d, job);
    if (!rc)
        rc = rl_actor_job_open(&s.j, d, job, 1, 0);
    if (!rc)
        rc = rl_trainer_open_metrics(&s.t, 0);
    if (!rc && s.o.batch % rl_group_size(s.j.actor))
        rc = rl_config_error_at(job, "warmstart.batch_size", RL_ECONFIG, "%lld must be a multiple of the %d actor ranks",
                                (long long)s.o.batch, rl_group_size(s.j.actor));
    if (!rc)
        rl_log_info("warm start: %lld demonstrations (%lld pairs of %lld-action chunks), %lld steps of %lld",
                    (long long)s.p.eps, (long long)s.p.n, (long long)C, (long long)s.o.steps, (long long)s.o.batch);
    double t0 = rl_now_s();
    for (s.step = 1; !rc && s.step <= s.o.steps && !rl_driver_interrupted(d); s.step++) {
        rl_metric_set_clear(s.t.ms);
        rl_dataproto *req = rl_flow_demos_batch(&s.p, s.t.seed, s.step, s.o.batch, s.o.beta);
        static const char *const keys[1] = {RL_ACTOR_M_LOSS};
        double loss = 0, gnorm = 0, lr = 0;
        rc = req ? rl_actor_job_actor_step(&s.j, RL_ACTOR_FLOW_STEP, req, keys, 1, &loss, &gnorm, &lr) : rl_error_code();
        rl_dataproto_free(req);
        if (rc)
            break;
        rl_metric_set_put(s.t.ms, "train/flow_matching_loss", loss);
        rl_metric_set_put(s.t.ms, "actor/grad_norm", gnorm);
        rl_metric_set_put(s.t.ms, "actor/lr", lr);
        if (s.step % 100 == 0 || s.step == s.o.steps)
            rl_log_info("flow_warmstart step %lld/%lld: loss %.4f (%.0f s)", (long long)s.step, (long long)s.o.steps,
                        loss, rl_now_s() - t0);
        rc = rl_metrics_log(s.t.sink, s.step, s.t.ms);
    }
    double train_s = rl_now_s() - t0;
    char path[4096];
    snprintf(path, sizeof path, "%s/final", s.t.out_dir);
    if (!rc && rl_driver_interrupted(d))
        rc = rl_error_set(RL_ESTATE, "interrupted");
    if (!rc && !(rc = rl_call_all(s.j.actor, RL_ACTOR_SAVE_MODEL, json_pack("{s:s}", RL_ACTOR_PATH, path))))
        rl_log_info("warm start: %lld steps in %.1f s; saved %s", (long long)s.o.steps, train_s, path);
    if (!rc && s.o.eval_episodes > 0 && !(rc = rl_actor_job_sync_weights(&s.j)))
        rc = s_evaluate(&s, d, job);
    rl_trainer_close(&s.t);
    rl_actor_job_close(&s.j);
    rl_flow_demos_free(&s.p);
    return rc;
}

/* Checks the job; unless model.init_from is set, a fresh model with the
 * demonstrations' obs_norm becomes it (<output_dir>/init). */
static int s_prepare(rl_config *job)
{
    s_ws_cfg o;
    rl_env_config env;
    char v[32];
    int rc = s_read(job, &o);
    if (!rc)
        rc = rl_libero_gif_check(job);
    snprintf(v, sizeof v, "%lld", (long long)(rc ? 0 : o.steps));
    if (!rc && !(rc = rl_config_set_yaml(job, "trainer.total_steps", v)))
        rc = rl_actor_job_prepare(job, 1);
    if (!rc)
        rc = rl_env_config_read(job, &env);
    const char *from, *out;
    int64_t seed, C, tasks;
    if (!rc && (rl_config_get_string(job, "model.init_from", &from) ||
                rl_config_get_string(job, "trainer.output_dir", &out) ||
                rl_config_get_int_in(job, "trainer.seed", 0, INT64_MAX, &seed) ||
                rl_config_get_int_in(job, "model.num_action_chunks", 1, 1000, &C) ||
                rl_config_get_int_in(job, "model.num_tasks", 1, 1 << 20, &tasks)))
        rc = rl_error_code();
    if (!rc && C != env.num_action_chunks)
        rc = rl_config_error_at(job, "model.num_action_chunks", RL_ECONFIG, "is %lld but env.num_action_chunks is %lld",
                                (long long)C, (long long)env.num_action_chunks);
    if (!rc && env.policy == 0)
        rc = rl_config_error_at(job, "env.policy", RL_ECONFIG, "the warm start evaluates its model: set 'model'");
    if (!rc && env.auto_reset) /* a round's success would count the episode after the reset */
        rc = rl_config_error_at(job, "env.auto_reset", RL_ECONFIG,
                                "the warm start's evaluation runs one episode per env per round: set false");
    if (rc || (from && *from))
        return rc;
    rl_flow_demos p;
    if ((rc = rl_flow_demos_load(o.demos, o.per_task, C, (int)tasks, &p)))
        return rl_config_error_at(job, "warmstart.demos", rc, "%s", rl_error_message());
    rl_model *m = rl_model_build(job, (uint64_t)seed);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/init", out);
    rc = m ? rl_flow_policy_set_obs_norm(m, p.mean, p.std) : rl_error_code();
    if (!rc && (rc = rl_mkdir_p(out)) == RL_OK)
        rc = rl_model_save(m, dir);
    if (!rc)
        rc = rl_config_set_yaml(job, "model.init_from", dir);
    rl_model_free(m);
    rl_flow_demos_free(&p);
    return rc;
}

static const char *const s_roles[] = {RL_ACTOR_ROLE, RL_ROLLOUT_ROLE, RL_ENV_ROLE, NULL};

const rl_recipe rl_recipe_flow_warmstart = {
    .name = "flow_warmstart",
    .summary = "few-shot SFT warm start of the flow policy on LIBERO-Object demonstrations, then its evaluation",
    .sections = (const rl_config_section *const[]){&rl_actor_section, &rl_actor_diffusion_section,
                                                   &rl_rollout_section, &rl_rollout_flow_section, NULL},
    .defaults = (const char *const[]){RL_FLOW_POLICY_MODEL_DEFAULTS, RL_ENV_DEFAULTS, RL_LIBERO_GIF_DEFAULTS,
                                      "warmstart:\n"
                                      "  demos: runs/libero_demos/demos.safetensors  # libero_collect's dataset\n"
                                      "  demos_per_task: 10       # successful episodes kept per task\n"
                                      "  steps: 2000              # optimiser steps\n"
                                      "  batch_size: 256          # pairs per step\n"
                                      "  t_schedule: beta         # beta (pi0: 0.999 Beta(1.5, 1) + 0.001) | uniform\n"
                                      "eval:\n"
                                      "  episodes: 500            # greedy episodes after training (0: none)\n"
                                      "actor:\n"
                                      "  optim: {lr: 1.0e-3}\n"
                                      "trainer:\n"
                                      "  val_every: 0\n"
                                      "  output_dir: runs/libero_warmstart\n",
                                      NULL},
    .roles = s_roles,
    .prepare = s_prepare,
    .run = s_run,
};
