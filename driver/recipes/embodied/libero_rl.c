/* libero_rl.c — recipe `libero_rl`: RL of the flow_policy action model
 * (common/nn/models/flow_policy.h) on LIBERO-Object — FlowSAR (seed 000), FlowIPO
 * (seed 001), flow-SDE GRPO and PPO (RLinf). algorithm.loss_type and
 * algorithm.adv_estimator pick the method; nothing else changes
 * (contract of the methods: workers/flow_rl.h). A step is this table of
 * phases (rl_phases_run times each one):
 *   rollout       every env runs one episode from a reset (initial states
 *                 chosen by the step, env.init_state) while rollout rank r
 *                 serves env rank r with the flow-SDE policy (FlowSAR and
 *                 FlowIPO at rollout.noise_level 0: the ODE) and records
 *                 each policy call (observation, initial noise, chain,
 *                 log-probs, action); joined by (env_row, chunk_step) into
 *                 step-major arrays: S chunk steps × B episodes
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
 * then evaluation every trainer.val_every steps (the ODE policy on fixed
 * initial states: eval.episodes_per_task per task; success per task; at
 * step 0 and the last step GIFs of the first episodes of each task in
 * <output_dir>/gifs/step_N/, libero_gif.h),
 * metrics.jsonl + TensorBoard, and a checkpoint every trainer.save_every
 * steps (actor model + optimiser, θ_ref in <ckpt>/step_N.ema and, with
 * eval.ema_decay > 0, the evaluation EMA θ_eval in step_N.eval_ema). Every
 * draw is a function of (seed, step, row), so trainer.resume continues
 * exactly; a lost worker is recovered with rl_recovery. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver/recipes/diffusion/diffusion_common.h"
#include "driver/recipes/embodied/flow_demos.h"
#include "driver/recipes/embodied/libero_common.h"
#include "common/algo/flow/embodied.h"
#include "common/algo/advantage.h"
#include "common/algo/flow/flow.h"
#include "common/nn/models/flow_policy.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "common/core/rng.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "common/metrics/metrics.h"
#include "workers/env/env.h"
#include "workers/flow_rl.h"
#include "common/core/util.h"
#include "common/schema/trainer.h"

static const char *const s_roles[] = {RL_ACTOR_ROLE, RL_ROLLOUT_ROLE, RL_ENV_ROLE, NULL};

/* ---- options ------------------------------------------------------------------------------------ */

typedef struct s_opts {
    int64_t eval_per_task;
    double eval_noise;
    double eval_ema; /* eval.ema_decay: evaluate θ_eval, an EMA of the weights (0: the live weights) */
} s_opts;

static int s_read_opts(const rl_config *job, s_opts *o, rl_env_config *env, rl_flow_rl_config *alg)
{
    static const rl_config_spec spec[] = {
        {"eval.episodes_per_task", RL_CFG_INT, offsetof(s_opts, eval_per_task), 1, 50, 0, NULL},
        {"eval.ema_decay", RL_CFG_NUM, offsetof(s_opts, eval_ema), 0, 1, RL_CFG_MAX_OPEN, NULL},
    };
    memset(o, 0, sizeof *o);
    int rc = rl_config_read(job, spec, 2, o);
    if (!rc)
        rc = rl_env_config_read(job, env);
    if (!rc)
        rc = rl_flow_rl_config_read(job, alg);
    if (!rc && env->auto_reset)
        rc = rl_config_error_at(job, "env.auto_reset", RL_ECONFIG,
                                "libero_rl runs one episode per env per step: auto_reset must be false");
    if (!rc && env->policy != 1)
        rc = rl_config_error_at(job, "env.policy", RL_ECONFIG, "libero_rl trains the model: env.policy must be "
                                                               "'model'");
    return rc;
}

static int s_prepare(rl_config *job)
{
    s_opts o;
    rl_env_config env;
    rl_flow_rl_config alg;
    int64_t epochs;
    int rc = s_read_opts(job, &o, &env, &alg);
    if (!rc && rl_config_get_int_in(job, "actor.ppo_epochs", 1, 10000, &epochs))
        rc = rl_error_code();
    /* an lr schedule's length: updates per step are not known before the
     * episodes end, so the schedule counts one update per epoch and step */
    if (!rc)
        rc = rl_actor_job_prepare(job, epochs);
    const rl_rollout_flow_config *ro = rc ? NULL : rl_config_section_get(job, &rl_rollout_flow_section);
    if (!rc && !ro)
        rc = rl_error_code();
    /* Evaluation rounds sample the ODE. Training rounds sample the flow SDE
     * at rollout.noise_level; GRPO/PPO score its log-probs, so they need a
     * level > 0. FlowSAR and FlowIPO read no log-probs: at 0 their training
     * rounds sample the ODE from each row's initial noise (seed 001 §2.5:
     * exploration from the initial noise alone). */
    if (!rc && !(ro->noise_level > 0) && alg.loss >= RL_FLOW_LOSS_GRPO)
        rc = rl_config_error_at(job, "rollout.noise_level", RL_ECONFIG,
                                "%s scores the flow SDE's log-probs: the noise level must be > 0 (0, the ODE, "
                                "is for flow_sar and flow_ipo)",
                                alg.loss == RL_FLOW_LOSS_GRPO ? "flow-SDE GRPO" : "flow-SDE PPO");
    int64_t x;
    int b;
    if (!rc && (rl_config_get_int_in(job, "trainer.save_every", 0, 1000000000, &x) ||
                rl_config_get_bool(job, "trainer.resume", &b)))
        rc = rl_error_code();
    if (!rc)
        rc = rl_libero_gif_check(job);
    return rc;
}

/* ---- state ----------------------------------------------------------------------------------------- */

typedef struct s_lr {
    rl_trainer t;
    rl_actor_job j;
    s_opts o;
    rl_env_config env;
    rl_flow_rl_config alg;
    rl_group *genv;
    int64_t step, S, B, C, D;
    /* this step */
    rl_dataproto *batch;  /* kept rows, step-major order */
    int64_t *row_sb;      /* (kept) s·B + b of each row */
    float *step_mask, *chunk_rewards, *step_rewards, *ep_reward; /* (S,B), (S,B), (S,B,C), (B) */
    int64_t *ep_task;     /* (B) */
    rl_flow_demos demos;  /* algorithm.demo_coef > 0: the anchor's pairs */
    int train_ode;        /* rollout.noise_level 0 (FlowSAR/FlowIPO): training rounds sample the ODE */
    double first_eval;    /* success at the start of this run (NaN: none yet) */
} s_lr;

static void s_step_clear(s_lr *s)
{
    rl_dataproto_free(s->batch);
    free(s->row_sb);
    free(s->step_mask);
    free(s->chunk_rewards);
    free(s->step_rewards);
    free(s->ep_reward);
    free(s->ep_task);
    s->batch = NULL;
    s->row_sb = NULL;
    s->step_mask = s->chunk_rewards = s->step_rewards = s->ep_reward = NULL;
    s->ep_task = NULL;
}

/* ---- one round of episodes: env interact ‖ rollout serve_env ---------------------------------------- */

typedef struct s_round_out {
    rl_dataproto **env;  /* per env rank: interact's arrays */
    rl_dataproto **rec;  /* per rollout rank: serve_env's records (NULL: not recorded) */
    int E;
} s_round_out;

static void s_round_free(s_round_out *r)
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

/* An evaluation round: the ODE, ungrouped, not recorded; a training round:
 * the flow SDE (the ODE with s->train_ode), grouped, recorded. */
static int s_round(s_lr *s, int64_t round, int eval, s_round_out *res)
{
    int E = rl_group_size(s->genv);
    memset(res, 0, sizeof *res);
    res->E = E;
    res->env = calloc((size_t)E, sizeof *res->env);
    res->rec = calloc((size_t)E, sizeof *res->rec);
    int rc = res->env && res->rec ? RL_OK : rl_error_set(RL_ENOMEM, "out of memory");
    if (!rc)
        rc = rl_libero_round(s->t.d, s->genv, s->j.rollout, s->S, round, eval || s->train_ode, eval, 0,
                             &res->env, eval ? NULL : res->rec);
    if (rc)
        s_round_free(res);
    return rc;
}

/* The env arrays of all ranks, rows = global envs: rewards, valid (B, K),
 * task (B), success (B) at the end. Every shape is checked (peer data). */
typedef struct s_envs {
    int64_t B, K;
    float *rewards;
    uint8_t *valid, *success;
    int64_t *task, *offset; /* (B), (E + 1) */
} s_envs;

static void s_envs_free(s_envs *e)
{
    free(e->rewards);
    free(e->valid);
    free(e->success);
    free(e->task);
    free(e->offset);
    memset(e, 0, sizeof *e);
}

static int s_envs_take(const s_round_out *r, int64_t K, s_envs *e)
{
    memset(e, 0, sizeof *e);
    e->K = K;
    if (!(e->offset = calloc((size_t)r->E + 1, sizeof(int64_t))))
        return rl_error_set(RL_ENOMEM, "out of memory");
    for (int i = 0; i < r->E; i++)
        e->offset[i + 1] = e->offset[i] + rl_dataproto_rows(r->env[i]);
    int64_t B = e->B = e->offset[r->E];
    e->rewards = malloc(sizeof(float) * (size_t)(B * K + 1));
    e->valid = malloc((size_t)(B * K + 1));
    e->success = malloc((size_t)B + 1);
    e->task = malloc(sizeof(int64_t) * (size_t)(B + 1));
    if (!e->rewards || !e->valid || !e->success || !e->task)
        return rl_error_set(RL_ENOMEM, "out of memory");
    for (int i = 0; i < r->E; i++) {
        const rl_dataproto *b = r->env[i];
        int64_t n = rl_dataproto_rows(b), o = e->offset[i];
        const rl_tensor *tr = rl_dataproto_tensor_shaped(b, RL_ENV_REWARDS, RL_F32, 2, (int64_t[]){n, K});
        const rl_tensor *tv = tr ? rl_dataproto_tensor_shaped(b, RL_ENV_VALID, RL_U8, 2, (int64_t[]){n, K}) : NULL;
        const rl_tensor *tt = tv ? rl_dataproto_tensor_shaped(b, RL_ENV_TASK, RL_I64, 2, (int64_t[]){n, K + 1})
                                 : NULL;
        const rl_tensor *ts = tt ? rl_dataproto_tensor_shaped(b, RL_ENV_SUCCESS, RL_U8, 2, (int64_t[]){n, K + 1})
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

/* ---- rollout phase ---------------------------------------------------------------------------------------- */

/* The records of all rollout ranks joined to the env's (chunk step, env):
 * the kept rows (the chunk's first action was taken) in step-major order,
 * with flow_action (rows, D) and flow_seeds (rows) added. */
static int s_join(s_lr *s, const s_round_out *r, const s_envs *e)
{
    int64_t S = s->S, B = e->B, C = s->C, D = s->D;
    int64_t *where = malloc(sizeof(int64_t) * (size_t)(S * B + 1));
    rl_dataproto *all = NULL;
    int rc = where ? RL_OK : rl_error_set(RL_ENOMEM, "out of memory");
    for (int64_t i = 0; !rc && i < S * B; i++)
        where[i] = -1;
    if (!rc && !(all = rl_dataproto_concat(r->rec, r->E)))
        rc = rl_error_wrap(rl_error_code(), "the rollout's records");
    int64_t base = 0;
    for (int i = 0; !rc && i < r->E; i++) {
        int64_t n = rl_dataproto_rows(r->rec[i]), nenv = e->offset[i + 1] - e->offset[i];
        const rl_tensor *te = rl_dataproto_tensor_shaped(r->rec[i], "env_row", RL_I64, 1, (int64_t[]){n});
        const rl_tensor *tc = te ? rl_dataproto_tensor_shaped(r->rec[i], "chunk_step", RL_I64, 1, (int64_t[]){n})
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
    int64_t *idx = rc ? NULL : malloc(sizeof(int64_t) * (size_t)(S * B + 1));
    s->row_sb = rc ? NULL : malloc(sizeof(int64_t) * (size_t)(S * B + 1));
    if (!rc && (!idx || !s->row_sb))
        rc = rl_error_set(RL_ENOMEM, "out of memory");
    for (int64_t i = 0; !rc && i < S * B; i++) {
        if (s->step_mask[i] == 0.0f)
            continue;
        if (where[i] < 0) {
            rc = rl_error_set(RL_EPROTO, "no record of chunk step %lld of env %lld, which the env stepped",
                              (long long)(i / B), (long long)(i % B));
            break;
        }
        idx[kept] = where[i];
        s->row_sb[kept++] = i;
    }
    if (!rc && !(s->batch = rl_dataproto_index(all, idx, kept)))
        rc = rl_error_code();
    const rl_tensor *ta = rc ? NULL
                             : rl_dataproto_tensor_shaped(s->batch, RL_FP_ACTION, RL_F32, 3,
                                                          (int64_t[]){kept, C, RL_FP_ACTION_DIM});
    if (!rc && !ta)
        rc = rl_error_wrap(rl_error_code(), "the rollout's records");
    rl_tensor *tf = rc ? NULL : rl_dataproto_new_tensor(s->batch, RL_FLOW_ACTION, RL_F32, 2, (int64_t[]){kept, D});
    rl_tensor *ts = tf ? rl_dataproto_new_tensor(s->batch, RL_FLOW_SEEDS, RL_I64, 1, (int64_t[]){kept}) : NULL;
    rl_tensor *tm = ts ? rl_dataproto_new_tensor(s->batch, RL_FLOW_MASK, RL_F32, 1, (int64_t[]){kept}) : NULL;
    if (!rc && !tm)
        rc = rl_error_code();
    if (!rc) {
        memcpy(rl_tensor_data(tf), rl_tensor_data(ta), sizeof(float) * (size_t)(kept * D));
        /* the env ran the chunk clipped to [-1, 1]: FlowSAR / FlowIPO train
         * on that action (the warm start's own samples reach |a| ~ 30, and
         * flow matching on them pulls the policy off the demonstrations) */
        if (s->env.clip_actions)
            rl_metric_set_put(s->t.ms, "rollout/action_clip_frac",
                              (double)rl_flow_clip_actions(rl_tensor_data(tf), kept * D, -1.0f, 1.0f) /
                                  (double)(kept * D > 0 ? kept * D : 1));
        int64_t *sd = rl_tensor_data(ts);
        float *m = rl_tensor_data(tm);
        for (int64_t k = 0; k < kept; k++) {
            sd[k] = (int64_t)(rl_splitmix64(s->t.seed ^ rl_splitmix64(0x5a4ull + (uint64_t)s->step)) ^
                              rl_splitmix64((uint64_t)s->row_sb[k])) >> 1;
            m[k] = 1.0f;
        }
    }
    free(where);
    free(idx);
    rl_dataproto_free(all);
    return rc;
}

static int s_phase_rollout(void *arg)
{
    s_lr *s = arg;
    s_round_out r;
    int rc = s_round(s, 1000000 + s->step, 0, &r);
    if (rc)
        return rc;
    s_envs e;
    rc = s_envs_take(&r, s->S * s->C, &e);
    int64_t S = s->S, B = e.B, C = s->C;
    s->B = B;
    if (!rc) {
        s->step_mask = malloc(sizeof(float) * (size_t)(S * B + 1));
        s->chunk_rewards = malloc(sizeof(float) * (size_t)(S * B + 1));
        s->step_rewards = malloc(sizeof(float) * (size_t)(S * B * C + 1));
        s->ep_reward = malloc(sizeof(float) * (size_t)(B + 1));
        s->ep_task = malloc(sizeof(int64_t) * (size_t)(B + 1));
        if (!s->step_mask || !s->chunk_rewards || !s->step_rewards || !s->ep_reward || !s->ep_task)
            rc = rl_error_set(RL_ENOMEM, "out of memory");
    }
    if (!rc) {
        rl_embodied_chunk_arrays(e.rewards, e.valid, B, S, C, s->step_rewards, s->chunk_rewards, s->step_mask);
        rc = rl_flow_episode_rewards(s->step_rewards, S, B, C, s->ep_reward);
        memcpy(s->ep_task, e.task, sizeof(int64_t) * (size_t)B);
    }
    if (!rc)
        rc = s_join(s, &r, &e);
    if (!rc) {
        double succ = 0, len = 0;
        for (int64_t b = 0; b < B; b++)
            succ += e.success[b];
        for (int64_t i = 0; i < S * B; i++)
            len += s->step_mask[i];
        rl_metric_set_put(s->t.ms, "env/success_once", B ? succ / B : 0);
        rl_metric_set_put(s->t.ms, "env/episode_chunks", B ? len / B : 0);
        rl_metric_set_put(s->t.ms, "env/episodes", (double)B);
        rl_metric_set_put(s->t.ms, "rollout/rows", (double)rl_dataproto_rows(s->batch));
    }
    s_envs_free(&e);
    s_round_free(&r);
    return rc;
}

/* ---- annotate ------------------------------------------------------------------------------------------------ */

static int s_phase_annotate(void *arg)
{
    s_lr *s = arg;
    if (s->alg.loss == RL_FLOW_LOSS_GRPO)
        return RL_OK;
    rl_dataproto *out = NULL;
    int rc;
    if (s->alg.loss == RL_FLOW_LOSS_PPO) {
        static const char *const in[3] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK};
        rl_dataproto *req = rl_dataproto_request(s->batch, in, 3, NULL, 0, NULL);
        rc = req ? rl_group_call_sync(s->j.actor, RL_ACTOR_FLOW_VALUES, RL_DISPATCH_DP_COMPUTE, req, &out)
                 : rl_error_code();
        rl_dataproto_free(req);
    } else {
        static const char *const in[6] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK, RL_FLOW_ACTION, RL_FLOW_SEEDS,
                                          RL_FP_INITIAL_NOISE};
        rl_dataproto *req = rl_dataproto_request(s->batch, in, s->alg.loss == RL_FLOW_LOSS_IPO ? 6 : 5, NULL, 0,
                                                 NULL);
        rc = req ? rl_group_call_sync(s->j.rollout, RL_ROLLOUT_FLOW_ANNOTATE, RL_DISPATCH_DP_COMPUTE, req, &out)
                 : rl_error_code();
        rl_dataproto_free(req);
    }
    if (!rc && rl_dataproto_rows(out) != rl_dataproto_rows(s->batch))
        rc = rl_error_set(RL_EPROTO, "the annotation has %lld rows, the batch %lld",
                          (long long)rl_dataproto_rows(out), (long long)rl_dataproto_rows(s->batch));
    if (rc) {
        rl_dataproto_free(out);
        return rc;
    }
    return rl_dataproto_union_into(&s->batch, out);
}

/* ---- credit ------------------------------------------------------------------------------------------------------ */

/* (rows) f32 tensor `name` of the batch, or NULL + message. */
static const float *s_col(s_lr *s, const char *name, int64_t D)
{
    int64_t n = rl_dataproto_rows(s->batch);
    const rl_tensor *t = D ? rl_dataproto_tensor_shaped(s->batch, name, RL_F32, 2, (int64_t[]){n, D})
                           : rl_dataproto_tensor_shaped(s->batch, name, RL_F32, 1, (int64_t[]){n});
    return t ? rl_tensor_data(t) : NULL;
}

static float *s_new_col(s_lr *s, const char *name, int64_t D)
{
    int64_t n = rl_dataproto_rows(s->batch);
    rl_tensor *t = D ? rl_dataproto_new_tensor(s->batch, name, RL_F32, 2, (int64_t[]){n, D})
                     : rl_dataproto_new_tensor(s->batch, name, RL_F32, 1, (int64_t[]){n});
    return t ? rl_tensor_data(t) : NULL;
}

static int s_phase_credit(void *arg)
{
    s_lr *s = arg;
    int64_t S = s->S, B = s->B, n = rl_dataproto_rows(s->batch), D = s->D;
    float *sb = malloc(sizeof(float) * (size_t)(S * B + 1)), *w = malloc(sizeof(float) * (size_t)(S * B + 1));
    float *lab = malloc(sizeof(float) * (size_t)(B + 1));
    int rc = sb && w && lab ? RL_OK : rl_error_set(RL_ENOMEM, "out of memory");
    double succ = 0;
    for (int64_t b = 0; b < B; b++)
        succ += s->ep_reward[b];
    if (!rc && s->alg.loss == RL_FLOW_LOSS_SAR) {
        const float *e = s_col(s, RL_FLOW_RECON, 0);
        float *wc = e ? s_new_col(s, RL_FLOW_WEIGHTS, 0) : NULL, *lc = wc ? s_new_col(s, RL_FLOW_LABELS, 0) : NULL;
        if (!lc)
            rc = rl_error_code();
        for (int64_t i = 0; !rc && i < S * B; i++)
            sb[i] = 0;
        for (int64_t k = 0; !rc && k < n; k++)
            sb[s->row_sb[k]] = e[k];
        if (!rc)
            rc = rl_flow_sar_weights(sb, s->ep_reward, s->step_mask, S, B, s->alg.sar_temperature, s->alg.sar_w_min,
                                     s->alg.sar_w_max, w, lab);
        double em = 0;
        for (int64_t k = 0; !rc && k < n; k++) {
            wc[k] = w[s->row_sb[k]];
            lc[k] = lab[s->row_sb[k] % B];
            em += e[k];
        }
        if (!rc)
            rl_metric_set_put(s->t.ms, "actor/recon_error_mean", n ? em / n : 0);
        if (!rc && s->alg.sar_credit == 1) {
            /* success-filtered self-imitation: every chunk of a successful
             * episode with w = 1, R = 1 (with mse_branch and β = 1 the loss
             * is plain flow matching on it); the failed episodes' rows leave
             * the batch, so the loss is a mean over the successes' chunks */
            int64_t *keep = malloc(sizeof(int64_t) * (size_t)(n + 1)), m = 0;
            if (!keep)
                rc = rl_error_set(RL_ENOMEM, "out of memory");
            for (int64_t k = 0; !rc && k < n; k++)
                if (s->ep_reward[s->row_sb[k] % B] >= 0.5f) {
                    wc[k] = 1.0f;
                    lc[k] = 1.0f;
                    s->row_sb[m] = s->row_sb[k];
                    keep[m++] = k;
                }
            rl_dataproto *sub = rc ? NULL : rl_dataproto_index(s->batch, keep, m);
            if (!rc && !sub)
                rc = rl_error_code();
            if (!rc) {
                rl_dataproto_free(s->batch);
                s->batch = sub;
                n = m;
                rl_metric_set_put(s->t.ms, "actor/trained_rows", (double)m);
            }
            free(keep);
        }
    } else if (!rc && s->alg.loss == RL_FLOW_LOSS_IPO) {
        const float *ref = s_col(s, RL_FLOW_REF_ACTION, D), *act = ref ? s_col(s, RL_FLOW_ACTION, D) : NULL;
        float *wc = act ? s_new_col(s, RL_FLOW_WEIGHTS, 0) : NULL;
        float *A = wc ? calloc((size_t)(S * B * D + 1), sizeof(float)) : NULL;
        float *R = A ? calloc((size_t)(S * B * D + 1), sizeof(float)) : NULL;
        if (!R)
            rc = wc ? rl_error_set(RL_ENOMEM, "out of memory") : rl_error_code();
        for (int64_t k = 0; !rc && k < n; k++) {
            memcpy(A + s->row_sb[k] * D, act + k * D, sizeof(float) * (size_t)D);
            memcpy(R + s->row_sb[k] * D, ref + k * D, sizeof(float) * (size_t)D);
        }
        if (!rc && s->env.clip_actions) /* compared with the executed (clipped) actions */
            (void)rl_flow_clip_actions(R, S * B * D, -1.0f, 1.0f);
        rl_flow_ipo_weight_stats st = {0};
        if (!rc)
            rc = rl_flow_ipo_weights(A, R, s->ep_reward, s->step_mask, S, B, D, s->alg.ipo_alpha, 1e-8, w, &st);
        for (int64_t k = 0; !rc && k < n; k++)
            wc[k] = w[s->row_sb[k]];
        if (!rc) {
            rl_metric_set_put(s->t.ms, "actor/mean_weight", st.weight_mean);
            rl_metric_set_put(s->t.ms, "actor/delta_mean", st.delta_mean);
        }
        free(A);
        free(R);
    } else if (!rc && s->alg.loss == RL_FLOW_LOSS_GRPO) {
        float *adv = s_new_col(s, RL_ACTOR_ADVANTAGES, 0), *ea = adv ? malloc(sizeof(float) * (size_t)(B + 1)) : NULL;
        int64_t kept = 0;
        if (!ea)
            rc = adv ? rl_error_set(RL_ENOMEM, "out of memory") : rl_error_code();
        /* groups: env.group_size > 1: the G envs that share a task and an
         * initial state (global env b is in group b / G); 1: the episodes
         * of one task in this step */
        const int64_t G = s->env.group_size;
        int64_t *grp = ea && G > 1 ? malloc(sizeof(int64_t) * (size_t)(B + 1)) : NULL;
        if (ea && G > 1 && !grp)
            rc = rl_error_set(RL_ENOMEM, "out of memory");
        for (int64_t b = 0; !rc && grp && b < B; b++)
            grp[b] = b / G;
        if (!rc)
            rc = rl_embodied_grpo_advantages(s->ep_reward, grp ? grp : s->ep_task, B,
                                             grp ? (B + G - 1) / G : RL_ENV_MAX_TASKS, s->alg.filter_rewards,
                                             s->alg.rewards_lower, s->alg.rewards_upper, ea, &kept);
        free(grp);
        for (int64_t k = 0; !rc && k < n; k++)
            adv[k] = ea[s->row_sb[k] % B];
        if (!rc)
            rl_metric_set_put(s->t.ms, "critic/kept_groups", (double)kept);
        free(ea);
    } else if (!rc) { /* PPO: GAE over the chunk steps of each episode, (B, S) */
        const float *val = s_col(s, RL_FLOW_VALUES, 0);
        float *adv = val ? s_new_col(s, RL_ACTOR_ADVANTAGES, 0) : NULL;
        float *ret = adv ? s_new_col(s, RL_FLOW_RETURNS, 0) : NULL, *ov = ret ? s_new_col(s, RL_FLOW_OLD_VALUES, 0) : NULL;
        float *rw = ov ? calloc((size_t)(4 * S * B + 1), sizeof(float)) : NULL;
        if (!rw)
            rc = ov ? rl_error_set(RL_ENOMEM, "out of memory") : rl_error_code();
        if (!rc) {
            float *vv = rw + S * B, *mm = vv + S * B, *aa = mm + S * B, *rr = w;
            for (int64_t i = 0; i < S * B; i++) {
                int64_t t = i / B, b = i % B;
                rw[b * S + t] = s->chunk_rewards[i];
                mm[b * S + t] = s->step_mask[i];
            }
            for (int64_t k = 0; k < n; k++) {
                int64_t t = s->row_sb[k] / B, b = s->row_sb[k] % B;
                vv[b * S + t] = val[k];
            }
            rc = rl_adv_gae(rw, vv, mm, B, S, s->alg.gamma, s->alg.gae_lambda, s->alg.normalize_adv, aa, rr);
            for (int64_t k = 0; !rc && k < n; k++) {
                int64_t t = s->row_sb[k] / B, b = s->row_sb[k] % B;
                adv[k] = aa[b * S + t];
                ret[k] = rr[b * S + t];
                ov[k] = val[k];
            }
        }
        free(rw);
    }
    if (!rc && (s->alg.loss == RL_FLOW_LOSS_SAR || s->alg.loss == RL_FLOW_LOSS_IPO)) {
        /* the seeds' dummy advantages: zeros, so the data keeps its shape */
        float *adv = s_new_col(s, RL_ACTOR_ADVANTAGES, 0);
        if (!adv)
            rc = rl_error_code();
        else
            memset(adv, 0, sizeof(float) * (size_t)n);
    }
    if (!rc && s->alg.loss >= RL_FLOW_LOSS_GRPO && s->alg.seq_mean) {
        /* actor.loss_agg_mode seq-mean-token-mean: every episode weighs
         * the same in the loss, however many chunk steps it ran */
        float *adv = rl_tensor_data(rl_dataproto_tensor(s->batch, RL_ACTOR_ADVANTAGES));
        int64_t *ep = malloc(sizeof(int64_t) * (size_t)(n + 1));
        if (!ep)
            rc = rl_error_set(RL_ENOMEM, "out of memory");
        for (int64_t k = 0; !rc && k < n; k++)
            ep[k] = s->row_sb[k] % B;
        if (!rc)
            rc = rl_embodied_seq_mean_scale(ep, n, B, adv);
        free(ep);
    }
    if (!rc && s->alg.loss >= RL_FLOW_LOSS_GRPO) { /* the sampler's log-probs are the old ones */
        const rl_tensor *lp = rl_dataproto_tensor_shaped(s->batch, RL_FP_SAMPLE_LOGP, RL_F32, 2,
                                                         (int64_t[]){n, -1});
        rl_tensor *ot = lp ? rl_dataproto_new_tensor(s->batch, RL_ACTOR_OLD_LOGP, RL_F32, 2,
                                                     (int64_t[]){n, lp->shape[1]})
                           : NULL;
        if (!ot)
            rc = rl_error_code();
        else
            memcpy(rl_tensor_data(ot), rl_tensor_data(lp), sizeof(float) * (size_t)(n * lp->shape[1]));
    }
    if (!rc)
        rl_metric_set_put(s->t.ms, "critic/rewards/mean", B ? succ / B : 0);
    free(sb);
    free(w);
    free(lab);
    return rc;
}

/* ---- update --------------------------------------------------------------------------------------------------- */

/* The demonstration anchor: as many demonstration pairs as the request has
 * rows (drawn by (seed, step, update)), under the RL_FLOW_DEMO_* names. */
static int s_add_demos(s_lr *s, rl_dataproto *req, int update)
{
    static const char *const from[6] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK, RL_FP_X_T, RL_FP_T,
                                        RL_ACTOR_VELOCITY_TARGET};
    static const char *const to[6] = {RL_FLOW_DEMO_PROPRIO, RL_FLOW_DEMO_OBJECT, RL_FLOW_DEMO_TASK,
                                      RL_FLOW_DEMO_X_T, RL_FLOW_DEMO_T, RL_FLOW_DEMO_TARGET};
    rl_dataproto *db = rl_flow_demos_batch(&s->demos, s->t.seed ^ 0xd3e0ull, s->step * 100000 + update,
                                           rl_dataproto_rows(req), 1);
    int rc = db ? RL_OK : rl_error_code();
    for (int k = 0; !rc && k < 6; k++)
        rc = rl_dataproto_add_tensor(req, to[k], rl_dataproto_tensor(db, from[k]));
    rl_dataproto_free(db);
    return rc;
}

static int s_phase_update(void *arg)
{
    s_lr *s = arg;
    int64_t n = rl_dataproto_rows(s->batch), W = rl_group_size(s->j.actor);
    int64_t mini = s->j.actor_cfg.mini_batch / W * W;
    if (mini < W)
        mini = W;
    static const char *const flow_keep[11] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK, RL_FLOW_MASK, RL_FLOW_ACTION,
                                              RL_FLOW_T, RL_FLOW_EPS, RL_FLOW_V_OLD, RL_FLOW_WEIGHTS,
                                              RL_FLOW_LABELS, RL_ACTOR_ADVANTAGES};
    static const char *const pg_keep[12] = {RL_FP_PROPRIO, RL_FP_OBJECT, RL_FP_TASK, RL_FLOW_MASK,
                                            RL_FP_CHAIN, RL_FP_TIMES, RL_FP_NOISE_LEVEL, RL_FP_STEP_MASK,
                                            RL_ACTOR_OLD_LOGP, RL_ACTOR_ADVANTAGES, RL_FLOW_RETURNS,
                                            RL_FLOW_OLD_VALUES};
    const char *const *keep;
    int nkeep;
    switch (s->alg.loss) {
    case RL_FLOW_LOSS_SAR: keep = flow_keep, nkeep = 11; break;
    case RL_FLOW_LOSS_IPO: keep = flow_keep, nkeep = 9; break; /* no labels: next two skipped */
    case RL_FLOW_LOSS_GRPO: keep = pg_keep, nkeep = 10; break;
    default: keep = pg_keep, nkeep = 12; break;
    }
    enum { NK = 19 };
    static const char *const mkeys[NK] = {
        RL_ACTOR_M_LOSS, RL_FLOW_M_ROWS, "actor/flow_sar_loss", "actor/flow_sar_E_pos", "actor/flow_sar_E_neg",
        "actor/flow_sar_weight_mean", "actor/flow_sar_contrastive", "actor/flow_sar_kl_penalty",
        "actor/flow_sar_success_ratio", "actor/flow_ipo_loss", "actor/velocity_mse", "actor/pg_loss",
        "actor/pg_clipfrac", "actor/ppo_kl", "actor/ratio_mean", "actor/trained_steps", "critic/value_loss",
        "actor/flow_ipo_target_gap", RL_FLOW_M_DEMO_LOSS};
    double tot[NK] = {0}, demo_rows = 0, gn = 0, lr = 0;
    int updates = 0, rc = RL_OK;
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (!perm)
        return rl_error_set(RL_ENOMEM, "out of memory");
    const rl_tensor *smt = rl_dataproto_tensor(s->batch, RL_FP_STEP_MASK);
    for (int64_t e = 0; !rc && e < s->j.actor_cfg.epochs; e++) {
        rl_rng g;
        rl_rng_init(&g, s->t.seed ^ 0x1b3e70ull, (uint64_t)s->step * 1000u + (uint64_t)e);
        for (int64_t i = 0; i < n; i++)
            perm[i] = i;
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)rl_rng_below(&g, (uint64_t)i + 1), x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        for (int64_t r0 = 0; !rc && r0 + W <= n; r0 += mini) {
            int64_t rows = r0 + mini <= n ? mini : (n - r0) / W * W;
            rl_dataproto *mb = rl_dataproto_index(s->batch, perm + r0, rows);
            int64_t steps = 0;
            if (mb && smt) {
                const rl_tensor *t = rl_dataproto_tensor(mb, RL_FP_STEP_MASK);
                const float *m = rl_tensor_data(t);
                for (int64_t i = 0; i < rows * t->shape[1]; i++)
                    steps += m[i] != 0.0f;
            }
            rl_dataproto *req = mb ? rl_dataproto_request(mb, keep, nkeep, NULL, 0,
                                                          json_pack("{s:I,s:I}", RL_ACTOR_GLOBAL_ROWS, (json_int_t)rows,
                                                                    RL_ACTOR_GLOBAL_TOKENS, (json_int_t)steps))
                                   : NULL;
            rl_dataproto_free(mb);
            if (req && s->alg.demo_coef > 0 && !(rc = s_add_demos(s, req, updates)))
                demo_rows += (double)rows;
            double sums[NK], gnorm, l;
            if (!rc)
                rc = req ? rl_actor_job_actor_step(&s->j, RL_ACTOR_UPDATE_FLOW, req, mkeys, NK, sums, &gnorm, &l)
                         : rl_error_code();
            rl_dataproto_free(req);
            for (int k = 0; !rc && k < NK; k++)
                tot[k] += sums[k];
            gn += gnorm;
            lr = l;
            updates++;
        }
    }
    free(perm);
    if (rc)
        return rc;
    double rows = tot[1] > 0 ? tot[1] : 1;
    if (s->alg.loss == RL_FLOW_LOSS_SAR) {
        for (int k = 2; k <= 5; k++)
            rl_metric_set_put(s->t.ms, mkeys[k], tot[k] / rows);
        rl_metric_set_put(s->t.ms, "actor/flow_sar_energy_type", s->alg.sar_energy ? 1.0 : 0.0);
        rl_metric_set_put(s->t.ms, "actor/flow_sar_loss_variant", s->alg.sar_variant ? 1.0 : 0.0);
        if (s->alg.sar_variant) {
            rl_metric_set_put(s->t.ms, mkeys[6], tot[6] / rows);
            rl_metric_set_put(s->t.ms, mkeys[7], tot[7] / rows);
        } else {
            rl_metric_set_put(s->t.ms, mkeys[8], tot[8] / rows);
        }
    } else if (s->alg.loss == RL_FLOW_LOSS_IPO) {
        rl_metric_set_put(s->t.ms, mkeys[9], tot[9] / rows);
        rl_metric_set_put(s->t.ms, mkeys[10], tot[10] / rows);
        rl_metric_set_put(s->t.ms, mkeys[17], tot[17] / rows);
    } else if (tot[15] > 0) {
        for (int k = 11; k <= 14; k++)
            rl_metric_set_put(s->t.ms, mkeys[k], tot[k] / tot[15]);
        rl_metric_set_put(s->t.ms, mkeys[15], tot[15]);
        if (s->alg.loss == RL_FLOW_LOSS_PPO)
            rl_metric_set_put(s->t.ms, mkeys[16], tot[16] / rows);
    }
    if (demo_rows > 0)
        rl_metric_set_put(s->t.ms, RL_FLOW_M_DEMO_LOSS, tot[NK - 1] / demo_rows);
    rl_metric_set_put(s->t.ms, "actor/updates", updates);
    rl_metric_set_put(s->t.ms, "actor/grad_norm", updates ? gn / updates : 0);
    rl_metric_set_put(s->t.ms, "actor/lr", lr);
    return RL_OK;
}

static int s_phase_sync(void *arg) { return rl_actor_job_sync_weights(&((s_lr *)arg)->j); }

/* ---- evaluation ---------------------------------------------------------------------------------------------- */

/* θ_eval into the rollout ranks' models (on = 1) or the live weights back
 * (on = 0); eval.ema_decay > 0 only. */
static int s_eval_weights(s_lr *s, int on)
{
    return rl_call_all(s->j.rollout, RL_ROLLOUT_EVAL_WEIGHTS, json_pack("{s:b}", RL_FLOW_EMA, on));
}

/* The ODE policy (greedy) on fixed initial states: rounds 0.. of
 * env.init_state cycle give episodes_per_task distinct states per task
 * (with eval.ema_decay > 0, the rollout's θ_eval acts). */
static int s_evaluate(void *ctx)
{
    s_lr *s = ctx;
    double t0 = rl_now_s();
    int64_t per_env_task = s->env.total_num_envs / s->env.num_tasks;
    if (per_env_task < 1)
        per_env_task = 1;
    int64_t rounds = (s->o.eval_per_task + per_env_task - 1) / per_env_task;
    int64_t ok[RL_ENV_MAX_TASKS] = {0}, cnt[RL_ENV_MAX_TASKS] = {0}, all_ok = 0, all = 0;
    int64_t gifs[RL_ENV_MAX_TASKS] = {0}; /* before and after training: GIFs (libero_gif.h) */
    int rc = s->o.eval_ema > 0 ? s_eval_weights(s, 1) : RL_OK;
    for (int64_t r = 0; !rc && r < rounds; r++) {
        s_round_out ro;
        if ((rc = s_round(s, r, 1, &ro)))
            break;
        s_envs e;
        rc = s_envs_take(&ro, s->S * s->C, &e);
        for (int64_t b = 0; !rc && b < e.B; b++) {
            int64_t slot = b % s->env.num_tasks, k = b / s->env.num_tasks;
            if (k + r * per_env_task >= s->o.eval_per_task) /* only the first per_task states */
                continue;
            (void)slot;
            ok[e.task[b]] += e.success[b];
            cnt[e.task[b]]++;
            all_ok += e.success[b];
            all++;
        }
        if (!rc && (s->step == 0 || s->step == s->t.total_steps))
            rc = rl_libero_eval_gifs(s->t.job, NULL, s->step, ro.env, ro.E, -1, gifs);
        s_envs_free(&e);
        s_round_free(&ro);
    }
    if (s->o.eval_ema > 0) { /* the live weights back, on every path */
        int rc2 = s_eval_weights(s, 0);
        rc = rc ? rc : rc2;
    }
    if (rc)
        return rl_error_wrap(rc, "evaluation");
    char line[1024];
    int n = snprintf(line, sizeof line, "step %lld evaluation%s: success %.3f over %lld episodes (per task:",
                     (long long)s->step, s->o.eval_ema > 0 ? " (EMA weights)" : "",
                     all ? (double)all_ok / all : 0.0, (long long)all);
    for (int k = 0; k < RL_ENV_MAX_TASKS; k++)
        if (cnt[k]) {
            char key[64];
            snprintf(key, sizeof key, "eval/success_task_%d", k);
            rl_metric_set_put(s->t.ms, key, (double)ok[k] / cnt[k]);
            if (n < (int)sizeof line)
                n += snprintf(line + n, sizeof line - (size_t)n, " %d:%.2f", k, (double)ok[k] / cnt[k]);
        }
    if (n < (int)sizeof line)
        snprintf(line + n, sizeof line - (size_t)n, ")");
    double success = all ? (double)all_ok / all : 0.0;
    rl_metric_set_put(s->t.ms, "eval/success_rate", success);
    rl_metric_set_put(s->t.ms, "eval/episodes", (double)all);
    rl_metric_set_put(s->t.ms, "timing_s/eval", rl_now_s() - t0);
    rl_log_info("%s", line);
    return RL_OK;
}

/* ---- checkpoints -------------------------------------------------------------------------------------------------- */

static int s_has_ref(const s_lr *s) { return s->alg.loss == RL_FLOW_LOSS_SAR || s->alg.loss == RL_FLOW_LOSS_IPO; }

/* <ckpt>/step_N.ema (θ_ref) or step_N.eval_ema (θ_eval). */
static void s_ref_dir(const s_lr *s, int64_t step, const char *which, char *buf, size_t n)
{
    snprintf(buf, n, "%s/step_%lld.%s", s->t.ckpt_dir, (long long)step,
             strcmp(which, "eval") == 0 ? "eval_ema" : "ema");
}

/* The rollout's average `which` ("ref", "eval") saved into step N's directory. */
static int s_save_avg(s_lr *s, const char *which)
{
    char dir[4200];
    s_ref_dir(s, s->step, which, dir, sizeof dir);
    int rc = rl_mkdir_p(s->t.ckpt_dir);
    rl_dataproto *req = rc ? NULL : rl_dataproto_new_meta(json_pack("{s:s, s:s}", RL_FLOW_PATH, dir,
                                                                    RL_FLOW_WHICH, which));
    if (!rc && !req)
        rc = rl_error_code();
    if (!rc)
        rc = rl_group_call_sync(s->j.rollout, RL_ROLLOUT_FLOW_REF_SAVE, RL_DISPATCH_RANK_ZERO, req, NULL);
    rl_dataproto_free(req);
    return rc;
}

static int s_save(void *ctx)
{
    s_lr *s = ctx;
    int rc = RL_OK;
    /* the averages first: the step directory marks the checkpoint complete */
    if (s_has_ref(s))
        rc = s_save_avg(s, "ref");
    if (!rc && s->o.eval_ema > 0)
        rc = s_save_avg(s, "eval");
    json_t *extra = rc ? NULL : json_pack("{s:I}", "weight_version", (json_int_t)s->j.sync.version);
    if (!rc && !extra)
        rc = rl_error_set(RL_ENOMEM, "checkpoint: out of memory");
    if (!rc)
        rc = rl_trainer_save(&s->t, s->j.actor, s->step, 0, s->step, extra);
    json_decref(extra);
    return rc;
}

/* The rollout ranks' average `which` back from step N's directory. */
static int s_load_avg(s_lr *s, int64_t step, const char *which)
{
    char dir[4200];
    s_ref_dir(s, step, which, dir, sizeof dir);
    return rl_call_all(s->j.rollout, RL_ROLLOUT_FLOW_REF_LOAD,
                       json_pack("{s:s, s:s}", RL_FLOW_PATH, dir, RL_FLOW_WHICH, which));
}

static int s_resume(s_lr *s, int64_t want, int64_t *start)
{
    int rc = rl_actor_job_restore(&s->j, &s->t, want, start, NULL);
    /* after the sync: θ_ref and θ_eval exactly as saved */
    if (!rc && *start > 0 && s_has_ref(s))
        rc = s_load_avg(s, *start, "ref");
    if (!rc && *start > 0 && s->o.eval_ema > 0)
        rc = s_load_avg(s, *start, "eval");
    return rc;
}

/* ---- the loop ----------------------------------------------------------------------------------------------------- */

static int s_open(s_lr *s, rl_driver *d, const rl_config *job)
{
    int rc = rl_trainer_open(&s->t, d, job);
    if (!rc)
        rc = s_read_opts(job, &s->o, &s->env, &s->alg);
    if (!rc && !(s->genv = rl_driver_group(d, RL_ENV_ROLE)))
        rc = rl_error_code();
    if (!rc)
        rc = rl_actor_job_open(&s->j, d, job, 1, 0);
    if (!rc && rl_group_size(s->genv) != rl_group_size(s->j.rollout))
        rc = rl_error_set(RL_ECONFIG, "libero_rl pairs env rank r with rollout rank r: the cluster has %d env and %d "
                                      "rollout ranks", rl_group_size(s->genv), rl_group_size(s->j.rollout));
    const rl_rollout_flow_config *ro = rc ? NULL : rl_config_section_get(job, &rl_rollout_flow_section);
    if (!rc && !ro)
        rc = rl_error_code();
    s->train_ode = !rc && !(ro->noise_level > 0);
    s->C = s->env.num_action_chunks;
    s->D = s->C * RL_FP_ACTION_DIM;
    s->S = (s->env.max_episode_steps + s->C - 1) / s->C;
    int64_t tasks = 0;
    if (!rc && s->alg.demo_coef > 0 &&
        !(rc = rl_config_get_int_in(job, "model.num_tasks", 1, RL_ENV_MAX_TASKS, &tasks)) &&
        (rc = rl_flow_demos_load(s->alg.demos, s->alg.demos_per_task, s->C, (int)tasks, &s->demos)))
        rc = rl_config_error_at(job, "algorithm.demos", rc, "%s", rl_error_message());
    if (!rc && s->alg.demo_coef > 0)
        rl_log_info("demonstration anchor: %g x flow matching on %lld pairs of %lld demonstrations",
                    s->alg.demo_coef, (long long)s->demos.n, (long long)s->demos.eps);
    return rc;
}

static void s_close(s_lr *s)
{
    s_step_clear(s);
    rl_flow_demos_free(&s->demos);
    rl_trainer_close(&s->t);
    rl_actor_job_close(&s->j);
}

static int s_start(s_lr *s, rl_driver *d, const rl_config *job, int64_t restore, int64_t *start)
{
    *start = 0;
    int rc = s_open(s, d, job);
    if (!rc && restore)
        rc = s_resume(s, restore, start);
    if (!rc)
        rc = rl_trainer_open_metrics(&s->t, *start);
    s->step = *start;
    if (!rc && *start == 0) { /* the warm-started policy: step 0 */
        rl_metric_set_clear(s->t.ms);
        rc = s_evaluate(s);
        if (!rc)
            rc = rl_metrics_log(s->t.sink, 0, s->t.ms);
    }
    rl_trainer_cpu_mark(&s->t); /* step 1's interval starts after step 0's evaluation */
    return rc;
}

static int s_step(s_lr *s, int *saved)
{
    static const rl_phase phases[] = {
        {"rollout", s_phase_rollout, 0},       {"annotate", s_phase_annotate, 0}, {"credit", s_phase_credit, 0},
        {"update_actor", s_phase_update, 0}, {"sync_weights", s_phase_sync, 0},
    };
    const rl_step_hook hooks[] = {{s->t.val_every, s_evaluate}};
    double t0 = rl_now_s();
    rl_metric_set_clear(s->t.ms);
    int rc = rl_phases_run(phases, 5, s, s->t.ms);
    s_step_clear(s);
    return rl_trainer_step_tail(&s->t, s->step, t0, rc, hooks, 1, s_save, s, saved);
}

/* rl_train_loop's view of the recipe */
typedef struct {
    s_lr *s;
    rl_driver *d;
    const rl_config *job;
} s_loop;

static int s_loop_start(void *ctx, int64_t restore, int64_t *start)
{
    s_loop *l = ctx;
    return s_start(l->s, l->d, l->job, restore, start);
}

static int s_loop_step(void *ctx, int64_t step, int *saved)
{
    s_loop *l = ctx;
    l->s->step = step;
    return s_step(l->s, saved);
}

static void s_loop_reset(void *ctx)
{
    s_lr *s = ((s_loop *)ctx)->s;
    s_close(s);
    memset(s, 0, sizeof *s);
}

static int64_t s_loop_total(void *ctx)
{
    return ((s_loop *)ctx)->s->t.total_steps;
}

static int s_run(rl_driver *d, const rl_config *job)
{
    s_lr s;
    memset(&s, 0, sizeof s);
    s_loop l = {&s, d, job};
    rl_train_loop loop = {&l, s_loop_start, s_loop_step, s_loop_reset, s_loop_total};
    int rc = rl_train_loop_run(d, job, &loop);
    s_close(&s);
    return rc;
}

const rl_recipe rl_recipe_libero_rl = {
    .name = "libero_rl",
    .summary = "embodied RL of the flow policy on LIBERO-Object: FlowSAR, FlowIPO, flow-SDE GRPO and PPO",
    .sections = (const rl_config_section *const[]){&rl_trainer_recovery_section, &rl_actor_section,
                                                   &rl_rollout_section, &rl_rollout_flow_section, NULL},
    .defaults = (const char *const[]){
        RL_FLOW_POLICY_MODEL_DEFAULTS,
        RL_ENV_DEFAULTS, RL_FLOW_RL_DEFAULTS, RL_LIBERO_GIF_DEFAULTS,
        "env:\n"
        "  auto_reset: false          # one episode per env per step\n"
        "  policy: model\n"
        "rollout:\n"
        "  num_steps: 4               # RLinf pi0: 4 denoising steps\n"
        "  noise_level: 0.5           # flow-SDE noise of the training rounds (flow_sar/flow_ipo: 0 = the ODE)\n"
        "actor:\n"
        "  optim: {lr: 1.0e-4, weight_decay: 0.0}\n"
        "  ppo_mini_batch_size: 256   # kept rows (policy calls) per optimiser step\n"
        "  ppo_epochs: 1\n"
        "eval:\n"
        "  episodes_per_task: 10      # RLinf's protocol: 50 (10 tasks x 50 = 500 episodes)\n"
        "  ema_decay: 0.0             # > 0: evaluate an EMA of the weights (θ ← d·θ + (1 − d)·θ_new at\n"
        "                             # every sync, in <ckpt>/step_N.eval_ema), not the live ones\n"
        "trainer:\n"
        "  total_steps: 20\n"
        "  val_every: 5\n"
        "  save_every: 10\n"
        "  resume: false\n"
        "  output_dir: runs/libero_rl\n",
        NULL},
    .roles = s_roles,
    .prepare = s_prepare,
    .run = s_run,
};
