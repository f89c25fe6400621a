/* workers/env/env.c — the env role (contract: workers/env/env.h): this rank's
 * share of env.total_num_envs LIBERO-Object environments (common/sim/libero.h),
 * stepped in env.pipeline_stage_num sub-batches against the rollout over a
 * direct data channel. The tasks are loaded once, at init; a missing or
 * corrupt scene fails the role's start with the file and `make libero-data`.
 *
 * Pipelining (RLinf's scheme): the observations of every stage go out first;
 * then, stage by stage, the env waits for that stage's action chunk, steps
 * its envs and sends their next observations at once, so the policy works on
 * stage s + 1 while the env steps stage s.
 *
 * Bad input from the peer is checked before use: the stage and step of a
 * reply, the actions' dtype and shape, and every value (NaN/Inf is an error
 * naming env, task, initial state and step; out-of-range values are clipped
 * and counted, or an error when env.clip_actions is false). A simulation
 * instability ends that episode as a failure (counted) and the worker goes
 * on. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workers/roles.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "common/core/rng.h"
#include "workers/env/env.h"
#include "rlrt/runtime/channel.h"
#include "common/sim/libero.h"

typedef struct s_slot {
    rl_libero_env *env;
    int task;           /* LIBERO task id */
    int global;         /* env index over all ranks */
    int64_t episode;    /* episodes started by this env */
    int init;           /* initial state of the current episode */
    int done, success, new_episode;
    int64_t ep_steps;
} s_slot;

typedef struct s_state {
    rl_env_config cfg;
    rl_libero_task *tasks[RL_ENV_MAX_TASKS];
    s_slot *slots;
    int n, first;
    rl_channel *chan;
    int ungrouped; /* this interact call's RL_ENV_UNGROUPED */
    int heldout;   /* this interact call's RL_ENV_HELDOUT */
    /* env.render_every > 0: the full scene of the first env's task */
    rl_libero_task *render_task;
    rl_libero_renderer *renderer;
    unsigned char **frames;
    int n_frames;
} s_state;

#define S_MAX_FRAMES 64
#define S_PATH(field) RL_CFG_PATH(&rl_env_section, rl_env_config, field)

static double s_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void s_fini(rl_worker_ctx *ctx)
{
    s_state *st = ctx->user;
    if (!st)
        return;
    for (int i = 0; i < st->n; i++)
        rl_libero_env_free(st->slots[i].env);
    free(st->slots);
    for (int t = 0; t < RL_ENV_MAX_TASKS; t++)
        rl_libero_task_free(st->tasks[t]);
    rl_channel_free(st->chan);
    for (int i = 0; st->frames && i < S_MAX_FRAMES; i++)
        free(st->frames[i]);
    free(st->frames);
    rl_libero_renderer_free(st->renderer);
    rl_libero_task_free(st->render_task);
    free(st);
    ctx->user = NULL;
}

static int s_init(rl_worker_ctx *ctx)
{
    s_state *st = calloc(1, sizeof *st);
    if (!st)
        return rl_error_set(RL_ENOMEM, "env: out of memory");
    ctx->user = st;
    const rl_env_config *c = rl_config_section_get(ctx->config, &rl_env_section);
    if (!c)
        return rl_error_code();
    st->cfg = *c;
    int W = ctx->world_size > 0 ? ctx->world_size : 1;
    st->first = (int)(c->total_num_envs * ctx->rank / W);
    st->n = (int)(c->total_num_envs * (ctx->rank + 1) / W) - st->first;
    if (st->n < c->pipeline_stage_num)
        return RL_CFG_ERROR(ctx->config, &rl_env_section, rl_env_config, pipeline_stage_num, RL_ECONFIG,
                            "env/%d holds %d envs, fewer than %lld pipeline stages", ctx->rank, st->n,
                            (long long)c->pipeline_stage_num);
    st->slots = calloc((size_t)st->n, sizeof *st->slots);
    if (!st->slots)
        return rl_error_set(RL_ENOMEM, "env: out of memory for %d envs", st->n);
    double t0 = s_now();
    for (int i = 0; i < st->n; i++) {
        s_slot *s = &st->slots[i];
        s->global = st->first + i;
        s->task = rl_env_place_of(c, s->global, 0).task;
        if (!st->tasks[s->task]) {
            st->tasks[s->task] = rl_libero_task_load(c->data_dir, s->task,
                                                     c->scene ? RL_LIBERO_SCENE_FULL : RL_LIBERO_SCENE_PHYS);
            if (!st->tasks[s->task])
                return rl_error_wrap(rl_error_code(), "env/%d: %s", ctx->rank, S_PATH(data_dir));
        }
        if (c->heldout_init_states >= rl_libero_task_num_init_states(st->tasks[s->task]))
            return RL_CFG_ERROR(ctx->config, &rl_env_section, rl_env_config, heldout_init_states, RL_ECONFIG,
                                "must leave training states: task %d has %d initial states, %lld held out",
                                s->task, rl_libero_task_num_init_states(st->tasks[s->task]),
                                (long long)c->heldout_init_states);
        s->env = rl_libero_env_new(st->tasks[s->task]);
        if (!s->env)
            return rl_error_code();
        s->done = 1; /* until the first reset */
        s->episode = -1;
    }
    if (c->render_every > 0 && st->n > 0) {
        st->render_task = rl_libero_task_load(c->data_dir, st->slots[0].task, RL_LIBERO_SCENE_FULL);
        st->renderer = st->render_task ? rl_libero_renderer_new(st->render_task, "agentview", (int)c->render_size,
                                                                (int)c->render_size)
                                       : NULL;
        st->frames = calloc(S_MAX_FRAMES, sizeof *st->frames);
        if (!st->renderer || !st->frames)
            return rl_error_wrap(st->frames ? rl_error_code() : RL_ENOMEM, "env/%d: %s",
                                 ctx->rank, S_PATH(render_every));
    }
    rl_log(RL_LOG_INFO, "%d envs (global %d..%d) of tasks %s loaded in %.2f s", st->n, st->first,
           st->first + st->n - 1, c->task_ids, s_now() - t0);
    return RL_OK;
}

/* The initial state of `s`'s episode `e`, a function of its group q (the
 * env itself when env.group_size is 1, or when the call is ungrouped: then
 * the envs of a task take distinct states): cycle walks the states so the
 * groups (envs) that share a task take different ones; random draws from
 * Philox. With env.heldout_init_states H > 0 the states walked are a
 * task's first n − H (a training call) or its last H (a held-out call,
 * RL_ENV_HELDOUT: evaluation); the s_init check keeps n − H >= 1. */
static int s_pick_init(const s_state *st, const s_slot *s, int64_t e)
{
    const rl_env_config *c = &st->cfg;
    int n_init = rl_libero_task_num_init_states(st->tasks[s->task]), first = 0;
    if (c->heldout_init_states > 0) {
        const int h = (int)c->heldout_init_states;
        first = st->heldout ? n_init - h : 0;
        n_init = st->heldout ? h : n_init - h;
    }
    const rl_env_place p = rl_env_place_of(c, s->global, st->ungrouped);
    if (!c->init_random)
        return first + (int)((p.k + e * p.sharing) % n_init);
    rl_rng r;
    rl_rng_init(&r, (uint64_t)c->seed, (p.stream << 32) ^ (uint64_t)e);
    return first + (int)rl_rng_below(&r, (uint64_t)n_init);
}

static int s_reset(s_state *st, s_slot *s, int64_t episode)
{
    s->episode = episode;
    s->init = s_pick_init(st, s, episode);
    s->done = s->success = 0;
    s->ep_steps = 0;
    s->new_episode = 1;
    return rl_libero_env_reset(s->env, s->init);
}

/* A frame of row 0 when rendering is on and it is due (episode start or
 * every env.render_every steps); at most S_MAX_FRAMES per call. */
static int s_capture(s_state *st)
{
    const s_slot *s = &st->slots[0];
    if (!st->renderer || st->n_frames >= S_MAX_FRAMES || s->ep_steps % st->cfg.render_every)
        return RL_OK;
    size_t bytes = (size_t)st->cfg.render_size * (size_t)st->cfg.render_size * 3;
    if (!st->frames[st->n_frames] && !(st->frames[st->n_frames] = malloc(bytes)))
        return rl_error_set(RL_ENOMEM, "env: out of memory for a frame");
    int rc = rl_libero_render(st->renderer, s->env, st->frames[st->n_frames]);
    if (!rc)
        st->n_frames++;
    return rc;
}

/* ---- open_channel ---------------------------------------------------------------------- */

static int s_open_channel(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_state *st = ctx->user;
    const char *host = rl_dataproto_meta_str(in, RL_ENV_HOST, NULL);
    if (!host)
        return rl_error_code();
    char bind[300];
    if ((size_t)snprintf(bind, sizeof bind, "tcp://%s:*", host) >= sizeof bind)
        return rl_error_set(RL_EINVAL, "argument '%s' is too long", RL_ENV_HOST);
    rl_channel_free(st->chan);
    st->chan = rl_channel_listen(bind);
    if (!st->chan)
        return rl_error_code();
    *out = rl_dataproto_new_meta(json_pack("{s:s}", RL_ENV_ENDPOINT, rl_channel_endpoint(st->chan)));
    return *out ? RL_OK : rl_error_code();
}

/* ---- interact -------------------------------------------------------------------------- */

typedef struct s_traj {
    float *proprio, *object, *actions, *rewards;
    uint8_t *dones, *valid, *success;
    int64_t *task, *init;
    int64_t K;
} s_traj;

static void s_record_obs(const s_slot *s, s_traj *tr, int row, int64_t k)
{
    rl_libero_env_obs_f32(s->env, tr->proprio + ((size_t)row * (size_t)(tr->K + 1) + (size_t)k) * 39,
                          tr->object + ((size_t)row * (size_t)(tr->K + 1) + (size_t)k) * 98);
    tr->task[(size_t)row * (size_t)(tr->K + 1) + (size_t)k] = s->task;
    tr->init[(size_t)row * (size_t)(tr->K + 1) + (size_t)k] = s->init;
    tr->success[(size_t)row * (size_t)(tr->K + 1) + (size_t)k] = (uint8_t)s->success;
}

/* A tensor of each spec, in order, added to dp (NULL: a failed allocation);
 * out[i] gets the i-th one's data. */
typedef struct s_tspec {
    const char *name;
    rl_dtype dtype;
    int ndim;
    int64_t shape[3];
} s_tspec;

static int s_new_tensors(rl_dataproto *dp, const s_tspec *sp, int n, void **out)
{
    for (int i = 0; i < n; i++) {
        rl_tensor *t = dp ? rl_dataproto_new_tensor(dp, sp[i].name, sp[i].dtype, sp[i].ndim, sp[i].shape) : NULL;
        if (!t)
            return dp ? rl_error_code() : rl_error_set(RL_ENOMEM, "env: out of memory");
        out[i] = rl_tensor_data(t);
    }
    return RL_OK;
}

/* Observations of stage [b, e) for chunk step t. */
static int s_send_obs(s_state *st, int b, int e, int stage, int64_t t, int timeout_ms)
{
    const int64_t n = e - b;
    const s_tspec sp[5] = {{RL_ENV_PROPRIO, RL_F32, 2, {n, 39}}, {RL_ENV_OBJECT, RL_F32, 2, {n, 98}},
                           {RL_ENV_TASK, RL_I64, 1, {n}}, {RL_ENV_NEW_EPISODE, RL_U8, 1, {n}},
                           {RL_ENV_TASK_INFO, RL_F32, 2, {n, 4}}};
    void *d[5];
    rl_dataproto *m = rl_dataproto_new();
    if (s_new_tensors(m, sp, 5, d)) {
        rl_dataproto_free(m);
        return rl_error_code();
    }
    float *p = d[0], *o = d[1], *info = d[4];
    int64_t *task = d[2];
    uint8_t *ne = d[3];
    for (int i = b; i < e; i++) {
        s_slot *s = &st->slots[i];
        const rl_libero_task *t = st->tasks[s->task];
        rl_libero_env_obs_f32(s->env, p + 39 * (i - b), o + 98 * (i - b));
        task[i - b] = s->task;
        ne[i - b] = (uint8_t)s->new_episode;
        s->new_episode = 0;
        info[4 * (i - b)] = (float)rl_libero_task_target_slot(t);
        info[4 * (i - b) + 1] = (float)rl_libero_task_basket_slot(t);
        info[4 * (i - b) + 2] = (float)rl_libero_task_target_height(t);
        info[4 * (i - b) + 3] = (float)rl_libero_task_grasp_axis(t);
    }
    json_object_set_new(rl_dataproto_meta(m), RL_ENV_STAGE, json_integer(stage));
    json_object_set_new(rl_dataproto_meta(m), RL_ENV_STEP, json_integer(t));
    json_object_set_new(rl_dataproto_meta(m), "offset", json_integer(b));
    int rc = rl_channel_send(st->chan, m, timeout_ms);
    rl_dataproto_free(m);
    return rc;
}

/* Steps stage [b, e) with its action chunk (n, C, 7), recording into tr. */
static int s_step_stage(rl_worker_ctx *ctx, s_state *st, const float *acts, int b, int e, int64_t t,
                        s_traj *tr, json_t *stats)
{
    const rl_env_config *c = &st->cfg;
    const int64_t C = c->num_action_chunks;
    int64_t clipped = 0, unstable = 0, episodes = 0, steps = 0;
    for (int i = b; i < e; i++) {
        s_slot *s = &st->slots[i];
        for (int64_t j = 0; j < C; j++) {
            int64_t k = t * C + j;
            size_t at = (size_t)i * (size_t)tr->K + (size_t)k;
            if (s->done) {
                s_record_obs(s, tr, i, k + 1);
                continue;
            }
            const float *a = acts + ((size_t)(i - b) * (size_t)C + (size_t)j) * 7;
            double ad[7];
            for (int d = 0; d < 7; d++) {
                if (!isfinite(a[d]))
                    return rl_error_set(RL_ENUMERIC,
                                        "env %d (task %d, initial state %d): action[%d] is %s at step %lld of "
                                        "its episode",
                                        s->global, s->task, s->init, d, isnan(a[d]) ? "NaN" : "Inf",
                                        (long long)s->ep_steps);
                ad[d] = a[d];
                if (d < 6 && (a[d] < -1.0f || a[d] > 1.0f)) {
                    if (!c->clip_actions)
                        return rl_error_set(RL_ERANGE,
                                            "env %d (task %d, initial state %d): action[%d] = %g is outside "
                                            "[-1, 1] at step %lld (%s is false)",
                                            s->global, s->task, s->init, d, (double)a[d],
                                            (long long)s->ep_steps, S_PATH(clip_actions));
                    ad[d] = a[d] < -1.0f ? -1.0 : 1.0;
                    clipped++;
                }
                tr->actions[at * 7 + (size_t)d] = (float)ad[d];
            }
            rl_libero_step_info info;
            int rc = rl_libero_env_step(s->env, ad, &info);
            if (rc)
                return rl_error_wrap(rc, "env %d", s->global);
            steps++;
            s->ep_steps++;
            tr->valid[at] = 1;
            if (info.flags & RL_LIBERO_SUCCESS) {
                tr->rewards[at] = 1.0f;
                s->success = 1;
            }
            int end = s->ep_steps >= c->max_episode_steps ||
                      ((info.flags & RL_LIBERO_SUCCESS) && c->terminate_on_success);
            if (info.flags & RL_LIBERO_UNSTABLE) {
                unstable++;
                s->success = 0;
                end = 1;
                rl_log(RL_LOG_WARN, "env %d (task %d, initial state %d): simulation unstable at step %lld (%s); "
                       "the episode ends as a failure",
                       s->global, s->task, s->init, (long long)s->ep_steps, info.warning);
            }
            if (end) {
                s->done = 1;
                tr->dones[at] = 1;
                episodes++;
            }
            s_record_obs(s, tr, i, k + 1);
            if (i == 0) {
                int rc2 = s_capture(st);
                if (rc2)
                    return rc2;
            }
        }
        if (s->done && c->auto_reset) {
            int rc = s_reset(st, s, s->episode + 1);
            if (!rc && i == 0)
                rc = s_capture(st);
            if (rc)
                return rc;
            s_record_obs(s, tr, i, (t + 1) * C);
        }
    }
    (void)ctx;
    json_object_set_new(stats, RL_ENV_M_STEPS,
                        json_integer(json_integer_value(json_object_get(stats, RL_ENV_M_STEPS)) + steps));
    json_object_set_new(stats, RL_ENV_M_CLIPPED,
                        json_integer(json_integer_value(json_object_get(stats, RL_ENV_M_CLIPPED)) + clipped));
    json_object_set_new(stats, RL_ENV_M_UNSTABLE,
                        json_integer(json_integer_value(json_object_get(stats, RL_ENV_M_UNSTABLE)) + unstable));
    json_object_set_new(stats, RL_ENV_M_EPISODES,
                        json_integer(json_integer_value(json_object_get(stats, RL_ENV_M_EPISODES)) + episodes));
    return RL_OK;
}

/* The stage's reply: checked before use. */
static const float *s_actions_of(const rl_dataproto *m, int stage, int64_t t, int64_t n, int64_t C)
{
    int64_t got_stage, got_step;
    if (rl_dataproto_meta_get_int(m, RL_ENV_STAGE, 0, 63, &got_stage) ||
        rl_dataproto_meta_get_int(m, RL_ENV_STEP, 0, INT64_MAX, &got_step))
        return NULL;
    if (got_stage != stage || got_step != t) {
        rl_error_set(RL_EPROTO, "the policy answered stage %lld step %lld, expected stage %d step %lld",
                     (long long)got_stage, (long long)got_step, stage, (long long)t);
        return NULL;
    }
    int64_t dims[3] = {n, C, 7};
    rl_tensor *a = rl_dataproto_tensor_shaped(m, RL_ENV_ACTIONS, RL_F32, 3, dims);
    if (a && rl_dataproto_rows(m) != n) {
        rl_error_set(RL_ESHAPE, "the policy answered %lld rows for stage %d, expected %lld",
                     (long long)rl_dataproto_rows(m), stage, (long long)n);
        return NULL;
    }
    return a ? rl_tensor_data(a) : NULL;
}

static int s_interact(rl_worker_ctx *ctx, const rl_dataproto *in, rl_dataproto **out)
{
    s_state *st = ctx->user;
    const rl_env_config *c = &st->cfg;
    int64_t T, reset, round, ungrouped, heldout;
    if (!st->chan)
        return rl_error_set(RL_ESTATE, "%s: open_channel has not run on env/%d", RL_ENV_INTERACT, ctx->rank);
    /* round is optional (absent or null: -1, the envs' own episode counts);
     * when given it is an episode index, bounded so that the initial-state
     * arithmetic (s_pick_init) cannot overflow. */
    const json_t *jround = json_object_get(rl_dataproto_meta_const(in), RL_ENV_ROUND);
    round = -1;
    if (rl_dataproto_meta_get_int(in, RL_ENV_CHUNK_STEPS, 1, 100000, &T) ||
        rl_dataproto_meta_int(in, RL_ENV_RESET, 0, &reset) ||
        (jround && !json_is_null(jround) &&
         rl_dataproto_meta_get_int(in, RL_ENV_ROUND, -1, INT32_MAX, &round)) ||
        rl_dataproto_meta_int(in, RL_ENV_UNGROUPED, 0, &ungrouped) ||
        rl_dataproto_meta_int(in, RL_ENV_HELDOUT, 0, &heldout))
        return rl_error_code();
    if (ungrouped != 0 && ungrouped != 1)
        return rl_error_set(RL_ERANGE, "%s: meta '%s' is %lld, expected 0 or 1", RL_ENV_INTERACT, RL_ENV_UNGROUPED,
                            (long long)ungrouped);
    if (heldout != 0 && heldout != 1)
        return rl_error_set(RL_ERANGE, "%s: meta '%s' is %lld, expected 0 or 1", RL_ENV_INTERACT, RL_ENV_HELDOUT,
                            (long long)heldout);
    st->ungrouped = (int)ungrouped;
    st->heldout = (int)heldout;
    const int64_t C = c->num_action_chunks, K = T * C, N = st->n;
    if (K > 1000000 || (double)N * (double)(K + 1) * 137 * 4 > 2e9)
        return rl_error_set(RL_ERANGE, "%s: %lld envs x %lld steps is too large for one call", RL_ENV_INTERACT,
                            (long long)N, (long long)K);
    int timeout_ms = (int)(c->channel_timeout_s * 1000);
    for (int i = 0; i < st->n; i++) {
        s_slot *s = &st->slots[i];
        if (reset || (s->done && c->auto_reset)) {
            int rc = s_reset(st, s, reset && round >= 0 ? round : s->episode + 1);
            if (rc)
                return rc;
        }
    }
    const s_tspec sp[9] = {{RL_ENV_PROPRIO, RL_F32, 3, {N, K + 1, 39}}, {RL_ENV_OBJECT, RL_F32, 3, {N, K + 1, 98}},
                           {RL_ENV_ACTIONS, RL_F32, 3, {N, K, 7}},       {RL_ENV_REWARDS, RL_F32, 2, {N, K}},
                           {RL_ENV_DONES, RL_U8, 2, {N, K}},             {RL_ENV_VALID, RL_U8, 2, {N, K}},
                           {RL_ENV_TASK, RL_I64, 2, {N, K + 1}},         {RL_ENV_INIT, RL_I64, 2, {N, K + 1}},
                           {RL_ENV_SUCCESS, RL_U8, 2, {N, K + 1}}};
    void *d[9];
    rl_dataproto *o = rl_dataproto_new();
    if (s_new_tensors(o, sp, 9, d)) {
        rl_dataproto_free(o);
        return rl_error_code();
    }
    s_traj tr = {d[0], d[1], d[2], d[3], d[4], d[5], d[8], d[6], d[7], K};
    for (int i = 0; i < st->n; i++)
        s_record_obs(&st->slots[i], &tr, i, 0);
    st->n_frames = 0;
    int rcf = st->n > 0 ? s_capture(st) : RL_OK;
    if (rcf) {
        rl_dataproto_free(o);
        return rcf;
    }
    json_t *stats = json_pack("{s:I,s:I,s:I,s:I}", RL_ENV_M_STEPS, (json_int_t)0, RL_ENV_M_CLIPPED, (json_int_t)0,
                              RL_ENV_M_UNSTABLE, (json_int_t)0, RL_ENV_M_EPISODES, (json_int_t)0);
    const int S = (int)c->pipeline_stage_num;
    double step_s = 0, wait_s = 0;
    int rc = stats ? RL_OK : rl_error_set(RL_ENOMEM, "out of memory");
    for (int s = 0; s < S && !rc; s++)
        rc = s_send_obs(st, st->n * s / S, st->n * (s + 1) / S, s, 0, timeout_ms);
    for (int64_t t = 0; t < T && !rc; t++) {
        for (int s = 0; s < S && !rc; s++) {
            int b = st->n * s / S, e = st->n * (s + 1) / S;
            rl_dataproto *m = NULL;
            double t0 = s_now();
            rc = rl_channel_recv(st->chan, &m, timeout_ms);
            wait_s += s_now() - t0;
            if (rc) {
                rc = rl_error_wrap(rc, "env/%d waiting for the policy's actions (stage %d, chunk step %lld)",
                                   ctx->rank, s, (long long)t);
                break;
            }
            const float *acts = s_actions_of(m, s, t, e - b, C);
            t0 = s_now();
            rc = acts ? s_step_stage(ctx, st, acts, b, e, t, &tr, stats) : rl_error_code();
            step_s += s_now() - t0;
            rl_dataproto_free(m);
            if (!rc && t + 1 < T)
                rc = s_send_obs(st, b, e, s, t + 1, timeout_ms);
        }
    }
    /* tell the policy we are done, even after an error (it stops waiting) */
    rl_dataproto *end = rl_dataproto_new_meta(json_pack("{s:i}", RL_ENV_END, 1));
    if (end) {
        int rc2 = rl_channel_send(st->chan, end, timeout_ms);
        if (!rc)
            rc = rc2;
        rl_dataproto_free(end);
    }
    if (rc) {
        json_decref(stats);
        rl_dataproto_free(o);
        return rc;
    }
    rl_column *fc = rl_dataproto_new_column(o, RL_ENV_FRAMES, RL_COL_BYTES);
    if (!fc) {
        json_decref(stats);
        rl_dataproto_free(o);
        return rl_error_code();
    }
    if (st->n_frames > 0) {
        unsigned char *png = NULL;
        size_t len = 0;
        rc = rl_png_encode_strip((const unsigned char *const *)st->frames, st->n_frames, (int)c->render_size,
                                 (int)c->render_size, &png, &len);
        if (!rc)
            rc = rl_column_set_bytes(fc, 0, png, len);
        free(png);
        if (rc) {
            json_decref(stats);
            rl_dataproto_free(o);
            return rc;
        }
    }
    json_object_set_new(stats, RL_ENV_M_STEP_S, json_real(step_s));
    json_object_set_new(stats, RL_ENV_M_WAIT_S, json_real(wait_s));
    rl_dataproto_set_meta(o, stats);
    *out = o;
    return RL_OK;
}

static const rl_method s_methods[] = {
    {RL_ENV_OPEN_CHANNEL, s_open_channel},
    {RL_ENV_INTERACT, s_interact},
    {NULL, NULL},
};

const rl_worker_role rl_role_env = {RL_ENV_ROLE, s_methods, s_init, s_fini};
