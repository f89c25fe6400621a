/* driver/recipes/embodied/libero_collect.c — recipe `libero_collect`: episodes of the
 * LIBERO-Object env role (workers/env/env.h) driven by the rollout's policy
 * (serve_env: the scripted expert, or with env.policy: model the rollout's
 * flow_policy — model.init_from — sampled greedily (collect.greedy, the ODE)
 * or with the flow SDE) over direct data channels, written
 * as a demonstration dataset (docs/ARCHITECTURE.md, "Demonstration
 * datasets"): the warm-start data of the flow-policy recipes.
 *
 * A round: env rank r opens its channel, rollout rank r serves it, and every
 * env runs one episode from a reset (initial states chosen by the round, so
 * a re-run repeats it) for ceil(max_episode_steps / num_action_chunks) policy
 * calls. The driver only orchestrates and collects. A round whose workers
 * died (the driver restarts them) is re-run, up to collect.retries times.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "driver/recipes/embodied/flow_demos.h"
#include "driver/recipes/embodied/libero_common.h"
#include "driver/recipes/phases.h"
#include "common/nn/engine/safetensors.h"
#include "common/core/util.h"
#include "common/schema/flow_policy.h"
#include "common/schema/libero.h"
#include "common/schema/model.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "rlrt/dtype.h"
#include "rlrt/tensor.h"
#include "rlrt/dataproto.h"
#include "rlrt/config.h"
#include "rlrt/nn/model.h"
#include "workers/env/env.h"
#include "workers/rollout/rollout.h"

/* The job's collect and env sections; with env.policy model the model's
 * keys are checked too (the rollout samples it). */
static int s_read(const rl_config *job, const rl_collect_config **o, const rl_env_config **env)
{
    *o = rl_config_section_get(job, &rl_collect_section);
    *env = *o ? rl_config_section_get(job, &rl_env_section) : NULL;
    if (!*env || !rl_config_section_get(job, &rl_rollout_section) ||
        !rl_config_section_get(job, &rl_rollout_flow_section))
        return rl_error_code();
    return (*env)->policy != 0 ? rl_model_check_config(job) : RL_OK;
}

static int s_prepare(rl_config *job)
{
    const rl_collect_config *o;
    const rl_env_config *e;
    return s_read(job, &o, &e);
}

/* Growable episode store (the dataset's arrays). */
typedef struct s_store {
    int64_t steps, cap, eps, ecap;
    float *proprio, *object, *actions, *rewards;      /* per step */
    int64_t *start, *length, *task, *init;            /* per episode */
    uint8_t *success;
    float *final_proprio, *final_object;
} s_store;

static int s_grow(void **p, int64_t n, size_t elem)
{
    void *q = realloc(*p, (size_t)n * elem);
    if (!q)
        return rl_error_set(RL_ENOMEM, "libero_collect: out of memory for %lld items", (long long)n);
    *p = q;
    return RL_OK;
}

static int s_reserve(s_store *s, int64_t steps, int64_t eps)
{
    int rc = RL_OK;
    if (s->steps + steps > s->cap) {
        int64_t cap = (s->steps + steps) * 2;
        if ((rc = s_grow((void **)&s->proprio, cap, 39 * sizeof(float))) ||
            (rc = s_grow((void **)&s->object, cap, 98 * sizeof(float))) ||
            (rc = s_grow((void **)&s->actions, cap, 7 * sizeof(float))) ||
            (rc = s_grow((void **)&s->rewards, cap, sizeof(float))))
            return rc;
        s->cap = cap;
    }
    if (s->eps + eps > s->ecap) {
        int64_t cap = (s->eps + eps) * 2;
        if ((rc = s_grow((void **)&s->start, cap, sizeof(int64_t))) ||
            (rc = s_grow((void **)&s->length, cap, sizeof(int64_t))) ||
            (rc = s_grow((void **)&s->task, cap, sizeof(int64_t))) ||
            (rc = s_grow((void **)&s->init, cap, sizeof(int64_t))) ||
            (rc = s_grow((void **)&s->success, cap, 1)) ||
            (rc = s_grow((void **)&s->final_proprio, cap, 39 * sizeof(float))) ||
            (rc = s_grow((void **)&s->final_object, cap, 98 * sizeof(float))))
            return rc;
        s->ecap = cap;
    }
    return rc;
}

static void s_store_free(s_store *s)
{
    free(s->proprio), free(s->object), free(s->actions), free(s->rewards);
    free(s->start), free(s->length), free(s->task), free(s->init), free(s->success);
    free(s->final_proprio), free(s->final_object);
}

/* Splits one env rank's interact result into finished episodes. Every
 * shape is checked first: the reply comes from another process. */
static int s_take_episodes(const rl_dataproto *b, s_store *st, int only_success, int64_t want,
                           int64_t per_task[][2])
{
    int64_t N = rl_dataproto_rows(b);
    const rl_tensor *tv = rl_dataproto_tensor_shaped(b, RL_ENV_VALID, RL_U8, 2, NULL);
    if (!tv)
        return rl_error_code();
    int64_t K = tv->shape[1];
    int64_t d1[3] = {-1, K + 1, 39}, d2[3] = {-1, K + 1, 98}, d3[3] = {-1, K, 7}, dk[2] = {-1, K},
            dk1[2] = {-1, K + 1};
    const rl_tensor *tp = rl_dataproto_tensor_shaped(b, RL_ENV_PROPRIO, RL_F32, 3, d1);
    const rl_tensor *to = tp ? rl_dataproto_tensor_shaped(b, RL_ENV_OBJECT, RL_F32, 3, d2) : NULL;
    const rl_tensor *ta = to ? rl_dataproto_tensor_shaped(b, RL_ENV_ACTIONS, RL_F32, 3, d3) : NULL;
    const rl_tensor *tr = ta ? rl_dataproto_tensor_shaped(b, RL_ENV_REWARDS, RL_F32, 2, dk) : NULL;
    const rl_tensor *td = tr ? rl_dataproto_tensor_shaped(b, RL_ENV_DONES, RL_U8, 2, dk) : NULL;
    const rl_tensor *tt = td ? rl_dataproto_tensor_shaped(b, RL_ENV_TASK, RL_I64, 2, dk1) : NULL;
    const rl_tensor *ti = tt ? rl_dataproto_tensor_shaped(b, RL_ENV_INIT, RL_I64, 2, dk1) : NULL;
    const rl_tensor *ts = ti ? rl_dataproto_tensor_shaped(b, RL_ENV_SUCCESS, RL_U8, 2, dk1) : NULL;
    if (!ts)
        return rl_error_code();
    const float *P = rl_tensor_data(tp), *O = rl_tensor_data(to), *A = rl_tensor_data(ta), *R = rl_tensor_data(tr);
    const uint8_t *V = rl_tensor_data(tv), *D = rl_tensor_data(td), *S = rl_tensor_data(ts);
    const int64_t *T = rl_tensor_data(tt), *I = rl_tensor_data(ti);
    for (int64_t i = 0; i < N && st->eps < want; i++) {
        int64_t begin = -1;
        for (int64_t k = 0; k < K; k++) {
            size_t at = (size_t)(i * K + k), at1 = (size_t)(i * (K + 1) + k);
            if (!V[at])
                continue;
            if (begin < 0)
                begin = k;
            if (!D[at])
                continue;
            /* the episode [begin, k] is complete */
            int64_t len = k - begin + 1, task = T[(size_t)(i * (K + 1) + begin)];
            int ok = S[at1 + 1];
            if (task >= 0 && task < RL_ENV_MAX_TASKS) {
                per_task[task][0]++;
                per_task[task][1] += ok;
            }
            if (!only_success || ok) {
                int rc = s_reserve(st, len, 1);
                if (rc)
                    return rc;
                size_t b0 = (size_t)(i * (K + 1) + begin), a0 = (size_t)(i * K + begin);
                memcpy(st->proprio + st->steps * 39, P + b0 * 39, (size_t)len * 39 * sizeof(float));
                memcpy(st->object + st->steps * 98, O + b0 * 98, (size_t)len * 98 * sizeof(float));
                memcpy(st->actions + st->steps * 7, A + a0 * 7, (size_t)len * 7 * sizeof(float));
                memcpy(st->rewards + st->steps, R + a0, (size_t)len * sizeof(float));
                memcpy(st->final_proprio + st->eps * 39, P + (at1 + 1) * 39, 39 * sizeof(float));
                memcpy(st->final_object + st->eps * 98, O + (at1 + 1) * 98, 98 * sizeof(float));
                st->start[st->eps] = st->steps;
                st->length[st->eps] = len;
                st->task[st->eps] = task;
                st->init[st->eps] = I[(size_t)(i * (K + 1) + begin)];
                st->success[st->eps] = (uint8_t)ok;
                st->steps += len;
                st->eps++;
            }
            begin = -1;
            if (st->eps >= want)
                break;
        }
    }
    return RL_OK;
}

/* The languages of the suite's tasks, from the data's manifest (a JSON
 * array of strings, or an empty array when the manifest cannot be read). */
static json_t *s_languages(const char *data_dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/manifest.json", data_dir);
    json_t *man = json_load_file(path, 0, NULL), *out = json_array();
    json_t *tasks = json_object_get(man, "tasks");
    for (size_t i = 0; out && i < json_array_size(tasks); i++) {
        json_t *l = json_object_get(json_array_get(tasks, i), "language");
        json_array_append_new(out, json_string(json_is_string(l) ? json_string_value(l) : ""));
    }
    json_decref(man);
    return out;
}

static int s_write(const rl_collect_config *o, const rl_env_config *env, const s_store *st, int64_t per_task[][2],
                   double wall_s)
{
    if (rl_mkdir_p(o->output))
        return rl_error_wrap(RL_EIO, "%s %s", RL_CFG_PATH(&rl_collect_section, rl_collect_config, output), o->output);
    int64_t sS[2] = {st->steps, 39}, sO[2] = {st->steps, 98}, sA[2] = {st->steps, 7}, s1[1] = {st->steps},
            e1[1] = {st->eps}, eP[2] = {st->eps, 39}, eO[2] = {st->eps, 98};
    rl_st_entry t[] = {
        {RL_DEMOS_PROPRIO, RL_F32, 2, sS, st->proprio},
        {RL_DEMOS_OBJECT, RL_F32, 2, sO, st->object},
        {RL_DEMOS_ACTIONS, RL_F32, 2, sA, st->actions},
        {RL_DEMOS_REWARDS, RL_F32, 1, s1, st->rewards},
        {RL_DEMOS_START, RL_I64, 1, e1, st->start},
        {RL_DEMOS_LENGTH, RL_I64, 1, e1, st->length},
        {RL_DEMOS_TASK, RL_I64, 1, e1, st->task},
        {RL_DEMOS_INIT, RL_I64, 1, e1, st->init},
        {RL_DEMOS_SUCCESS, RL_U8, 1, e1, st->success},
        {RL_DEMOS_FINAL_PROPRIO, RL_F32, 2, eP, st->final_proprio},
        {RL_DEMOS_FINAL_OBJECT, RL_F32, 2, eO, st->final_object},
    };
    json_t *lang = s_languages(env->data_dir);
    char *lang_s = lang ? json_dumps(lang, JSON_COMPACT) : NULL;
    json_decref(lang);
    char nums[3][32];
    snprintf(nums[0], sizeof nums[0], "%lld", (long long)env->max_episode_steps);
    snprintf(nums[1], sizeof nums[1], "%lld", (long long)env->num_action_chunks);
    snprintf(nums[2], sizeof nums[2], "%lld", (long long)st->eps);
    json_t *meta = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "format", "rlrt-libero-demos-1", "suite",
                             "libero_object", RL_DEMOS_PROPRIO, "robot0_proprio-state (LIBERO order)", RL_DEMOS_OBJECT,
                             "object-state (LIBERO order)", RL_DEMOS_ACTIONS, "OSC_POSE deltas + gripper, [-1, 1]",
                             "max_episode_steps", nums[0], "num_action_chunks", nums[1], "episodes", nums[2],
                             "languages", lang_s ? lang_s : "[]");
    free(lang_s);
    char path[4200];
    snprintf(path, sizeof path, "%s/demos.safetensors", o->output);
    int rc = meta ? rl_safetensors_write(path, st->eps ? t : t, (int)(sizeof t / sizeof t[0]), meta)
                  : rl_error_set(RL_ENOMEM, "out of memory");
    json_decref(meta);
    if (rc)
        return rc;
    json_t *summary = json_pack("{s:s,s:I,s:I,s:f,s:o}", "file", "demos.safetensors", "episodes",
                                (json_int_t)st->eps, "steps", (json_int_t)st->steps, "wall_s", wall_s,
                                "per_task", json_array());
    int64_t ok = 0;
    for (int64_t e = 0; e < st->eps; e++)
        ok += st->success[e];
    for (int k = 0; summary && k < RL_ENV_MAX_TASKS; k++)
        if (per_task[k][0])
            json_array_append_new(json_object_get(summary, "per_task"),
                                  json_pack("{s:i,s:I,s:I}", "task_id", k, "episodes", (json_int_t)per_task[k][0],
                                            "successes", (json_int_t)per_task[k][1]));
    if (summary)
        json_object_set_new(summary, "success_rate", json_real(st->eps ? (double)ok / (double)st->eps : 0.0));
    snprintf(path, sizeof path, "%s/dataset.json", o->output);
    char *text = summary ? json_dumps(summary, JSON_INDENT(1)) : NULL;
    json_decref(summary);
    rc = text ? rl_file_write_atomic(path, text, strlen(text)) : rl_error_set(RL_ENOMEM, "out of memory");
    free(text);
    return rc;
}

/* env.render_every > 0: env rank r's PNG strip of its first env goes to
 * <output>/frames/round_RRRR_envrank_R.png. */
static int s_write_frames(const rl_collect_config *o, int64_t round, int rank, const rl_dataproto *b)
{
    const rl_column *c = rl_dataproto_column(b, RL_ENV_FRAMES);
    size_t len = 0;
    const void *png = c && rl_column_get_type(c) == RL_COL_BYTES && rl_column_rows(c) > 0
                          ? rl_column_bytes(c, 0, &len)
                          : NULL;
    if (!png || len < 8)
        return RL_OK;
    if (memcmp(png, "\x89PNG\r\n\x1a\n", 8) != 0)
        return rl_error_set(RL_EPROTO, "env/%d sent frames that are not a PNG", rank);
    char path[4200];
    snprintf(path, sizeof path, "%s", o->output);
    if (mkdir(path, 0755) && errno != EEXIST)
        return rl_error_set(RL_EIO, "%s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/frames", o->output);
    if (mkdir(path, 0755) && errno != EEXIST)
        return rl_error_set(RL_EIO, "%s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/frames/round_%04lld_envrank_%d.png", o->output, (long long)round, rank);
    return rl_file_write_atomic(path, png, len);
}

static int s_run(rl_driver *d, const rl_config *job)
{
    const rl_collect_config *o;
    const rl_env_config *env;
    int rc = s_read(job, &o, &env);
    if (rc)
        return rc;
    rl_group *genv = rl_driver_group(d, RL_ENV_ROLE), *groll = genv ? rl_driver_group(d, RL_ROLLOUT_ROLE) : NULL;
    if (!groll)
        return rl_error_code();
    if ((rc = rl_libero_paired(genv, groll, "libero_collect")))
        return rc;
    const int64_t T = rl_libero_chunk_steps(env);
    const int model = env->policy != 0;
    s_store st = {0};
    int64_t per_task[RL_ENV_MAX_TASKS][2] = {{0}};
    double t0 = rl_now_s();
    int64_t round = 0, retries = 0, env_steps = 0;
    while (!rc && st.eps < o->episodes && !rl_driver_interrupted(d)) {
        int restarts = rl_driver_restarts(d);
        double r0 = rl_now_s();
        rl_libero_replies res;
        rc = rl_libero_round(genv, groll, T, round, o->greedy, o->greedy, 0, model, 0, &res);
        if (rc && rl_driver_restarts(d) > restarts && retries < o->retries && !rl_driver_fatal(d)) {
            retries++;
            rl_log(RL_LOG_WARN, "round %lld failed (%s); a worker was restarted: re-running the round (%lld of %lld)",
                   (long long)round, rl_error_message(), (long long)retries, (long long)o->retries);
            rc = rl_group_wait_ready(genv, 120000);
            if (!rc)
                rc = rl_group_wait_ready(groll, 120000);
            continue;
        }
        int64_t before = st.eps, steps = 0;
        double step_s = 0, wait_s = 0;
        for (int r = 0; r < res.E && !rc; r++) {
            int64_t n = 0;
            double a = 0, w = 0;
            rl_dataproto_meta_int(res.env[r], RL_ENV_M_STEPS, 0, &n);
            rl_dataproto_meta_double(res.env[r], RL_ENV_M_STEP_S, 0, &a);
            rl_dataproto_meta_double(res.env[r], RL_ENV_M_WAIT_S, 0, &w);
            steps += n;
            step_s += a;
            wait_s += w;
            rc = s_take_episodes(res.env[r], &st, o->only_success, o->episodes, per_task);
            if (!rc)
                rc = s_write_frames(o, round, r, res.env[r]);
        }
        rl_libero_replies_free(&res);
        env_steps += steps;
        int64_t ok = 0;
        for (int64_t e = 0; e < st.eps; e++)
            ok += st.success[e];
        if (!rc)
            rl_log(RL_LOG_INFO, "round %lld: %lld episodes (%lld total, success %.3f), %lld env steps in %.1f s "
                   "(env ranks stepping %.1f s, waiting for the policy %.1f s)",
                   (long long)round, (long long)(st.eps - before), (long long)st.eps,
                   st.eps ? (double)ok / (double)st.eps : 0.0, (long long)steps, rl_now_s() - r0, step_s, wait_s);
        round++;
    }
    if (!rc && rl_driver_interrupted(d))
        rc = rl_error_set(RL_ESTATE, "interrupted");
    if (!rc) {
        rc = s_write(o, env, &st, per_task, rl_now_s() - t0);
        if (!rc)
            rl_log(RL_LOG_INFO, "wrote %lld episodes (%lld steps, %lld env steps run, %lld re-run rounds) to %s/demos.safetensors",
                   (long long)st.eps, (long long)st.steps, (long long)env_steps, (long long)retries, o->output);
    }
    s_store_free(&st);
    return rc;
}

static const char *const s_roles[] = {RL_ENV_ROLE, RL_ROLLOUT_ROLE, NULL};

const rl_recipe rl_recipe_libero_collect = {
    .name = "libero_collect",
    .summary = "LIBERO-Object episodes (env role + rollout policy) written as a demonstration dataset",
    .sections = (const rl_config_section *const[]){&rl_model_base_section, &rl_model_flow_policy_section,
                                                   &rl_env_section, &rl_collect_section, &rl_rollout_section,
                                                   &rl_rollout_flow_section, NULL},
    .changes = rl_libero_collect_changes,
    .roles = s_roles,
    .prepare = s_prepare,
    .run = s_run,
};
