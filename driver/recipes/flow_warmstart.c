/* driver/recipes/flow_warmstart.c — recipe `flow_warmstart`: the few-shot
 * SFT warm start of the embodied track's flow policy (model.type
 * flow_policy, rlrt/nn/flow_policy.h; seed 001 / RLinf's few-shot SFT), then
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

#include "diffusion_common.h"
#include "libero_common.h"
#include "rlrt/nn/flow_policy.h"
#include "rlrt/nn/safetensors.h"
#include "rlrt/rlrt.h"
#include "rlrt/rng.h"
#include "rlrt/roles/env.h"

#define S_OBS (RL_FP_PROPRIO_DIM + RL_FP_OBJECT_DIM)

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

/* The training pairs. */
typedef struct s_pairs {
    int64_t n, C, D, eps;
    float *prop, *obj, *act; /* (n, 39), (n, 98), (n, D) */
    int64_t *task;           /* (n) */
    float mean[S_OBS], std[S_OBS];
    int64_t per_task[RL_ENV_MAX_TASKS];
} s_pairs;

static void s_pairs_free(s_pairs *p)
{
    free(p->prop);
    free(p->obj);
    free(p->act);
    free(p->task);
    memset(p, 0, sizeof *p);
}

static const rl_st_tensor *s_tensor(const rl_safetensors *st, const char *path, const char *name,
                                    rl_dtype dt, int ndim, int64_t d1)
{
    int i = rl_safetensors_find(st, name);
    const rl_st_tensor *t = i < 0 ? NULL : rl_safetensors_tensor(st, i);
    if (!t) {
        rl_error_set(RL_ENOTFOUND, "%s: no tensor '%s' (not a libero_collect dataset?)", path, name);
        return NULL;
    }
    if (t->dtype != dt || t->ndim != ndim || (ndim == 2 && t->shape[1] != d1)) {
        rl_error_set(RL_ESHAPE, "%s: tensor '%s' has the wrong dtype or shape", path, name);
        return NULL;
    }
    return t;
}

/* Reads the demonstrations into pairs of chunks of C actions. */
static int s_load_pairs(const char *path, int64_t per_task, int64_t C, int num_tasks, s_pairs *p)
{
    memset(p, 0, sizeof *p);
    p->C = C;
    p->D = C * RL_FP_ACTION_DIM;
    rl_safetensors *st = rl_safetensors_open(path);
    if (!st)
        return rl_error_wrap(rl_error_code(), "warmstart.demos (collect them with examples/libero_collect.yaml)");
    const rl_st_tensor *tp = s_tensor(st, path, "obs/proprio", RL_F32, 2, RL_FP_PROPRIO_DIM);
    const rl_st_tensor *to = tp ? s_tensor(st, path, "obs/object", RL_F32, 2, RL_FP_OBJECT_DIM) : NULL;
    const rl_st_tensor *ta = to ? s_tensor(st, path, "actions", RL_F32, 2, RL_FP_ACTION_DIM) : NULL;
    const rl_st_tensor *ts = ta ? s_tensor(st, path, "episode/start", RL_I64, 1, 0) : NULL;
    const rl_st_tensor *tl = ts ? s_tensor(st, path, "episode/length", RL_I64, 1, 0) : NULL;
    const rl_st_tensor *tt = tl ? s_tensor(st, path, "episode/task_id", RL_I64, 1, 0) : NULL;
    const rl_st_tensor *tk = tt ? s_tensor(st, path, "episode/success", RL_U8, 1, 0) : NULL;
    int rc = tk ? RL_OK : rl_error_code();
    const int64_t S = tp ? tp->shape[0] : 0, E = ts ? ts->shape[0] : 0;
    if (!rc && (to->shape[0] != S || ta->shape[0] != S || tl->shape[0] != E || tt->shape[0] != E ||
                tk->shape[0] != E))
        rc = rl_error_set(RL_ESHAPE, "%s: step or episode tensors disagree in length", path);
    const int64_t *start = rc ? NULL : ts->data, *len = rc ? NULL : tl->data, *task = rc ? NULL : tt->data;
    const uint8_t *ok = rc ? NULL : tk->data;
    uint8_t *keep = rc ? NULL : calloc((size_t)(E + 1), 1);
    if (!rc && !keep)
        rc = rl_error_set(RL_ENOMEM, "out of memory");
    int64_t n = 0;
    for (int64_t e = 0; !rc && e < E; e++) {
        if (start[e] < 0 || len[e] < 1 || start[e] + len[e] > S || task[e] < 0 || task[e] >= num_tasks ||
            task[e] >= RL_ENV_MAX_TASKS)
            rc = rl_error_set(RL_ERANGE, "%s: episode %lld (start %lld, length %lld, task %lld) out of range", path,
                              (long long)e, (long long)start[e], (long long)len[e], (long long)task[e]);
        else if (ok[e] && p->per_task[task[e]] < per_task) {
            keep[e] = 1;
            p->per_task[task[e]]++;
            p->eps++;
            n += len[e];
        }
    }
    if (!rc && n == 0)
        rc = rl_error_set(RL_EINVAL, "%s: no successful episode of tasks [0, %d)", path, num_tasks);
    p->n = n;
    if (!rc) {
        p->prop = malloc(sizeof(float) * (size_t)n * RL_FP_PROPRIO_DIM);
        p->obj = malloc(sizeof(float) * (size_t)n * RL_FP_OBJECT_DIM);
        p->act = malloc(sizeof(float) * (size_t)(n * p->D));
        p->task = malloc(sizeof(int64_t) * (size_t)n);
        if (!p->prop || !p->obj || !p->act || !p->task)
            rc = rl_error_set(RL_ENOMEM, "out of memory for %lld pairs", (long long)n);
    }
    const float *P = rc ? NULL : tp->data, *O = rc ? NULL : to->data, *A = rc ? NULL : ta->data;
    int64_t i = 0;
    for (int64_t e = 0; !rc && e < E; e++) {
        if (!keep[e])
            continue;
        for (int64_t s = 0; s < len[e]; s++, i++) {
            int64_t g = start[e] + s;
            memcpy(p->prop + i * RL_FP_PROPRIO_DIM, P + g * RL_FP_PROPRIO_DIM, sizeof(float) * RL_FP_PROPRIO_DIM);
            memcpy(p->obj + i * RL_FP_OBJECT_DIM, O + g * RL_FP_OBJECT_DIM, sizeof(float) * RL_FP_OBJECT_DIM);
            for (int64_t c = 0; c < C; c++) { /* past the end: the last action again */
                int64_t src = start[e] + (s + c < len[e] ? s + c : len[e] - 1);
                memcpy(p->act + i * p->D + c * RL_FP_ACTION_DIM, A + src * RL_FP_ACTION_DIM,
                       sizeof(float) * RL_FP_ACTION_DIM);
            }
            p->task[i] = task[e];
        }
    }
    for (int64_t k = 0; !rc && k < n * p->D; k++)
        if (!isfinite(p->act[k]))
            rc = rl_error_set(RL_ENUMERIC, "%s: a kept action is not finite", path);
    /* obs_norm: mean and std over the pairs (double sums), std >= 0.01 */
    for (int j = 0; !rc && j < S_OBS; j++) {
        double s1 = 0, s2 = 0;
        for (int64_t r = 0; r < n; r++) {
            double x = j < RL_FP_PROPRIO_DIM ? p->prop[r * RL_FP_PROPRIO_DIM + j]
                                             : p->obj[r * RL_FP_OBJECT_DIM + j - RL_FP_PROPRIO_DIM];
            s1 += x;
            s2 += x * x;
        }
        double m = s1 / (double)n, v = s2 / (double)n - m * m;
        p->mean[j] = (float)m;
        p->std[j] = (float)fmax(sqrt(fmax(v, 0.0)), 0.01);
        if (!isfinite(p->mean[j]) || !isfinite(p->std[j]))
            rc = rl_error_set(RL_ENUMERIC, "%s: observation %d is not finite", path, j);
    }
    free(keep);
    rl_safetensors_close(st);
    if (rc)
        s_pairs_free(p);
    return rc;
}

/* ---- the run ---------------------------------------------------------------------------- */

typedef struct s_ws {
    rl_dj j;
    rl_trainer t;
    s_ws_cfg o;
    s_pairs p;
    int64_t step;
} s_ws;

/* The flow-matching request of one step (rows drawn by Philox(seed, step)). */
static rl_dataproto *s_batch(s_ws *s)
{
    const int64_t B = s->o.batch, D = s->p.D;
    rl_dataproto *dp = rl_dataproto_new();
    if (dp && rl_dataproto_set_meta(dp, json_pack("{s:I}", RL_ACTOR_GLOBAL_ROWS, (json_int_t)B))) {
        rl_dataproto_free(dp);
        return NULL;
    }
    int64_t s1[1] = {B}, sp[2] = {B, RL_FP_PROPRIO_DIM}, so[2] = {B, RL_FP_OBJECT_DIM}, sd[2] = {B, D};
    rl_tensor *tp = dp ? rl_dataproto_new_tensor(dp, RL_FP_PROPRIO, RL_F32, 2, sp) : NULL;
    rl_tensor *to = tp ? rl_dataproto_new_tensor(dp, RL_FP_OBJECT, RL_F32, 2, so) : NULL;
    rl_tensor *tk = to ? rl_dataproto_new_tensor(dp, RL_FP_TASK, RL_I64, 1, s1) : NULL;
    rl_tensor *tx = tk ? rl_dataproto_new_tensor(dp, RL_FP_X_T, RL_F32, 2, sd) : NULL;
    rl_tensor *tt = tx ? rl_dataproto_new_tensor(dp, RL_FP_T, RL_F32, 1, s1) : NULL;
    rl_tensor *tg = tt ? rl_dataproto_new_tensor(dp, RL_ACTOR_VELOCITY_TARGET, RL_F32, 2, sd) : NULL;
    if (!tg) {
        rl_dataproto_free(dp);
        return NULL;
    }
    float *P = rl_tensor_data(tp), *O = rl_tensor_data(to), *X = rl_tensor_data(tx);
    float *T = rl_tensor_data(tt), *G = rl_tensor_data(tg);
    int64_t *K = rl_tensor_data(tk);
    for (int64_t b = 0; b < B; b++) {
        rl_rng g;
        rl_rng_init(&g, s->t.seed ^ 0x77a5u, (uint64_t)s->step * 1000003u + (uint64_t)b);
        int64_t i = (int64_t)rl_rng_below(&g, (uint64_t)s->p.n);
        double u = rl_rng_uniform_f64(&g);
        float t = s->o.beta ? (float)(0.999 * pow(u, 1.0 / 1.5) + 0.001) : (float)u;
        memcpy(P + b * RL_FP_PROPRIO_DIM, s->p.prop + i * RL_FP_PROPRIO_DIM, sizeof(float) * RL_FP_PROPRIO_DIM);
        memcpy(O + b * RL_FP_OBJECT_DIM, s->p.obj + i * RL_FP_OBJECT_DIM, sizeof(float) * RL_FP_OBJECT_DIM);
        K[b] = s->p.task[i];
        T[b] = t;
        for (int64_t j = 0; j < D; j++) {
            float a = s->p.act[i * D + j], e = rl_rng_normal(&g);
            X[b * D + j] = (1.0f - t) * a + t * e;
            G[b * D + j] = e - a;
        }
    }
    return dp;
}

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
        rc = rl_libero_round(d, genv, s->j.rollout, T, round, 1, 0, &res, NULL);
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
        rc = s_load_pairs(s.o.demos, s.o.per_task, C, (int)tasks, &s.p);
    if (!rc)
        rc = rl_trainer_open(&s.t, d, job);
    if (!rc)
        rc = rl_dj_open(&s.j, d, job, 1, 0);
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
        rl_dataproto *req = s_batch(&s);
        static const char *const keys[1] = {RL_ACTOR_M_LOSS};
        double loss = 0, gnorm = 0, lr = 0;
        rc = req ? rl_dj_actor_step(&s.j, RL_ACTOR_FLOW_STEP, req, keys, 1, &loss, &gnorm, &lr) : rl_error_code();
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
    if (!rc && s.o.eval_episodes > 0 && !(rc = rl_dj_sync_weights(&s.j)))
        rc = s_evaluate(&s, d, job);
    rl_trainer_close(&s.t);
    rl_dj_close(&s.j);
    s_pairs_free(&s.p);
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
        rc = rl_dj_prepare(job, 1);
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
    if (rc || (from && *from))
        return rc;
    s_pairs p;
    if ((rc = s_load_pairs(o.demos, o.per_task, C, (int)tasks, &p)))
        return rl_config_error_at(job, "warmstart.demos", rc, "%s", rl_error_message());
    rl_model *m = rl_model_build(job, (uint64_t)seed);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/init", out);
    rc = m ? rl_flow_policy_set_obs_norm(m, p.mean, p.std) : rl_error_code();
    if (!rc && (rc = rl_dj_mkdirs(out)) == RL_OK)
        rc = rl_model_save(m, dir);
    if (!rc)
        rc = rl_config_set_yaml(job, "model.init_from", dir);
    rl_model_free(m);
    s_pairs_free(&p);
    return rc;
}

static const char *const s_roles[] = {RL_ACTOR_ROLE, RL_ROLLOUT_ROLE, RL_ENV_ROLE, NULL};

const rl_recipe rl_recipe_flow_warmstart = {
    .name = "flow_warmstart",
    .summary = "few-shot SFT warm start of the flow policy on LIBERO-Object demonstrations, then its evaluation",
    .defaults = (const char *const[]){RL_FLOW_POLICY_MODEL_DEFAULTS, RL_ACTOR_DEFAULTS, RL_ACTOR_DIFFUSION_DEFAULTS,
                                      RL_ROLLOUT_DEFAULTS, RL_ENV_DEFAULTS, RL_LIBERO_GIF_DEFAULTS,
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
