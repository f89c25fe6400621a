/* libero_gif.c — GIFs of the LIBERO recipes' evaluation episodes
 * (libero_gif.h): the env ranks' interact replies checked, the first
 * episodes of each task picked, each replayed and drawn by
 * rl_libero_replay_gif with one replayer (scenes + renderer) per task. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver/recipes/embodied/libero_gif.h"
#include "common/sim/libero.h"
#include "common/schema/libero.h"
#include "common/schema/trainer.h"
#include "common/core/util.h"
#include "rlrt/error.h"
#include "rlrt/log.h"
#include "workers/env/env.h"

static double s_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int rl_libero_gif_check(const rl_config *job)
{
    const rl_libero_gif_config *o = rl_config_section_get(job, &rl_libero_gif_section);
    const rl_env_config *env = o ? rl_config_section_get(job, &rl_env_section) : NULL;
    if (!env)
        return rl_error_code();
    if (o->per_task > 0 && rl_libero_replay_frames(env->max_episode_steps, (int)o->every) > 4096)
        return RL_CFG_ERROR2(job, &rl_libero_gif_section, rl_libero_gif_config, every, &rl_env_section,
                             rl_env_config, max_episode_steps, RL_ECONFIG,
                             "%s %lld gives more than 4096 frames for episodes of %s %lld",
                             RL_CFG_PATH(&rl_libero_gif_section, rl_libero_gif_config, every),
                             (long long)o->every,
                            RL_CFG_PATH(&rl_env_section, rl_env_config, max_episode_steps),
                            (long long)env->max_episode_steps);
    return RL_OK;
}

/* Nothing more is due in this evaluation (its later rounds do not retry
 * what cannot work here, nor warn again). */
static void s_give_up(int64_t *done, int64_t per_task)
{
    for (int t = 0; t < RL_ENV_MAX_TASKS; t++)
        done[t] = per_task;
}

/* An episode to draw: env rank, row, and what the replay needs. */
typedef struct s_pick {
    int rank, task, init, reported;
    int64_t row, K;
    const float *actions; /* (K, 7), borrowed from the reply */
} s_pick;

/* Checks reply r (shapes, task and initial-state ranges, finite actions of
 * the taken steps) and appends its episodes that are due to picks[]. */
static int s_take(const rl_dataproto *dp, int r, int64_t *row0, int64_t rows, const rl_libero_gif_config *o,
                  int auto_reset,
                  const int64_t *done, int64_t *picked, s_pick *picks, int64_t *n_picks)
{
    const int64_t n = rl_dataproto_rows(dp);
    const rl_tensor *tt = rl_dataproto_tensor_shaped(dp, RL_ENV_TASK, RL_I64, 2, NULL);
    if (!tt)
        return rl_error_wrap(RL_EPROTO, "env/%d interact reply", r);
    const int64_t K1 = tt->shape[1], K = K1 - 1;
    if (n < 0 || tt->shape[0] != n || K < 1)
        return rl_error_set(RL_EPROTO, "env/%d interact reply: %s is (%lld, %lld) with %lld rows (need K >= 1 steps)",
                            r, RL_ENV_TASK, (long long)tt->shape[0], (long long)K1, (long long)n);
    const rl_tensor *ti = rl_dataproto_tensor_shaped(dp, RL_ENV_INIT, RL_I64, 2, (int64_t[]){n, K1});
    const rl_tensor *ta = ti ? rl_dataproto_tensor_shaped(dp, RL_ENV_ACTIONS, RL_F32, 3, (int64_t[]){n, K, 7}) : NULL;
    const rl_tensor *tv = ta ? rl_dataproto_tensor_shaped(dp, RL_ENV_VALID, RL_U8, 2, (int64_t[]){n, K}) : NULL;
    const rl_tensor *td = tv ? rl_dataproto_tensor_shaped(dp, RL_ENV_DONES, RL_U8, 2, (int64_t[]){n, K}) : NULL;
    const rl_tensor *ts = td ? rl_dataproto_tensor_shaped(dp, RL_ENV_SUCCESS, RL_U8, 2, (int64_t[]){n, K1}) : NULL;
    if (!ts)
        return rl_error_wrap(RL_EPROTO, "env/%d interact reply", r);
    const int64_t *task = rl_tensor_data(tt), *init = rl_tensor_data(ti);
    const float *act = rl_tensor_data(ta);
    const uint8_t *valid = rl_tensor_data(tv), *dones = rl_tensor_data(td), *succ = rl_tensor_data(ts);
    for (int64_t i = 0; i < n && (rows < 0 || *row0 < rows); i++, (*row0)++) {
        const int64_t t = task[i * K1], s0 = init[i * K1];
        if (t < 0 || t >= RL_ENV_MAX_TASKS || s0 < 0 || s0 > 1000000)
            return rl_error_set(RL_EPROTO, "env/%d row %lld: task %lld / initial state %lld out of range", r,
                                (long long)i, (long long)t, (long long)s0);
        if (done[t] + picked[t] >= o->per_task)
            continue;
        /* the episode: its leading taken steps, up to the first that ended it */
        int64_t k = 0;
        while (k < K && valid[i * K + k] && task[i * K1 + k] == t && init[i * K1 + k] == s0) {
            k++;
            if (dones[i * K + k - 1])
                break;
        }
        if (k == 0)
            continue;
        const float *a = act + (size_t)i * (size_t)K * 7;
        for (int64_t j = 0; j < k * 7; j++)
            if (!isfinite(a[j]))
                return rl_error_set(RL_EPROTO, "env/%d row %lld: action[%lld] of step %lld is not finite", r,
                                    (long long)i, (long long)(j % 7), (long long)(j / 7));
        s_pick *p = &picks[(*n_picks)++];
        p->rank = r;
        p->row = i;
        p->task = (int)t;
        p->init = (int)s0;
        p->K = k;
        p->actions = a;
        /* success_once after the episode's last step; with auto_reset the
         * column after it may already be the next episode's */
        p->reported = auto_reset ? -1 : succ[i * K1 + k] != 0;
        picked[t]++;
    }
    return RL_OK;
}

int rl_libero_eval_gifs(const rl_config *job, const char *tag, int64_t step, rl_dataproto *const *replies, int E,
                        int64_t rows, int64_t done[RL_ENV_MAX_TASKS])
{
    const rl_libero_gif_config *op = rl_config_section_get(job, &rl_libero_gif_section);
    const rl_env_config *envp = op ? rl_config_section_get(job, &rl_env_section) : NULL;
    const rl_trainer_config *tc = envp ? rl_config_section_get(job, &rl_trainer_section) : NULL;
    if (!tc)
        return rl_error_code();
    const rl_libero_gif_config o = *op;
    const rl_env_config env = *envp;
    const char *out = tc->output_dir;
    int rc = RL_OK;
    if (o.per_task == 0 || rows == 0)
        return RL_OK;
    if (!replies || E < 1 || !done)
        return rl_error_set(RL_EINVAL, "eval GIFs: no replies or done counts");
    int64_t total = 0, picked[RL_ENV_MAX_TASKS] = {0}, n_picks = 0, row0 = 0;
    for (int r = 0; r < E; r++) {
        int64_t n = replies[r] ? rl_dataproto_rows(replies[r]) : -1;
        if (n < 0)
            return rl_error_set(RL_EPROTO, "env/%d interact reply: no rows", r);
        total += n;
    }
    s_pick *picks = calloc((size_t)total + 1, sizeof *picks);
    if (!picks)
        return rl_error_set(RL_ENOMEM, "out of memory");
    for (int r = 0; !rc && r < E; r++)
        rc = s_take(replies[r], r, &row0, rows, &o, env.auto_reset, done, picked, picks, &n_picks);
    if (rc || n_picks == 0) {
        free(picks);
        return rc;
    }
#if defined(__SANITIZE_ADDRESS__)
    /* Mesa's software renderer is not instrumented (LeakSanitizer reports
     * what it keeps to exit): the replies are checked, nothing is drawn */
    rl_log_warn("eval GIFs: not drawn in an AddressSanitizer build (Mesa is not instrumented)");
    s_give_up(done, o.per_task);
    free(picks);
    return RL_OK;
#endif
    char dir[4096], name[64];
    if (tag)
        snprintf(name, sizeof name, "%s", tag);
    else
        snprintf(name, sizeof name, "step_%lld", (long long)step);
    snprintf(dir, sizeof dir, "%s/gifs/%s", out, name);
    if (rl_mkdir_p(dir)) {
        rl_log_warn("eval GIFs: %s; no GIFs of this evaluation", rl_error_message());
        s_give_up(done, o.per_task);
        free(picks);
        return RL_OK;
    }
    const double t0 = s_now();
    double load_s = 0;
    int wrote = 0, frames = 0, stop = 0;
    for (int t = 0; !rc && !stop && t < RL_ENV_MAX_TASKS; t++) {
        if (!picked[t])
            continue;
        double tl = s_now();
        rl_libero_replayer *p = rl_libero_replayer_new(env.data_dir, t, env.scene ? RL_LIBERO_SCENE_FULL
                                                                                  : RL_LIBERO_SCENE_PHYS,
                                                       (int)o.size);
        load_s += s_now() - tl;
        if (!p) { /* no EGL, or no scenes on this host: the pictures only */
            stop = rl_error_code() == RL_EUNSUPPORTED;
            rl_log_warn("eval GIFs: %s; %s", rl_error_message(),
                        stop ? "no GIFs of this evaluation" : "no GIFs of this task");
            done[t] = o.per_task;
            if (stop)
                s_give_up(done, o.per_task);
            continue;
        }
        for (int64_t i = 0; !rc && i < n_picks; i++) {
            const s_pick *k = &picks[i];
            if (k->task != t)
                continue;
            rl_libero_replay_info info;
            char path[4300], tmp[4300];
            snprintf(tmp, sizeof tmp, "%s/task%d_init%d_replay.gif", dir, t, k->init);
            int e = rl_libero_replay_gif(p, k->init, k->actions, k->K, (int)o.every, tmp, &info);
            done[t]++;
            if (e == RL_ERANGE) { /* an initial state the task lacks: peer data */
                rc = rl_error_wrap(RL_EPROTO, "env/%d row %lld", k->rank, (long long)k->row);
                break;
            }
            if (e) {
                rl_log_warn("eval GIFs: %s", rl_error_message());
                continue;
            }
            snprintf(path, sizeof path, "%s/task%d_init%d_%s.gif", dir, t, k->init, info.success ? "success" : "fail");
            if (rename(tmp, path)) {
                rl_log_warn("eval GIFs: cannot rename %s to %s", tmp, path);
                remove(tmp);
                continue;
            }
            if (k->reported >= 0 && !info.unstable && info.success != k->reported)
                rl_log_warn("eval GIFs: the replay of task %d, initial state %d (env/%d row %lld) ended in %s, the "
                            "env reported %s: the replay is not the episode",
                            t, k->init, k->rank, (long long)k->row, info.success ? "success" : "failure",
                            k->reported ? "success" : "failure");
            wrote++;
            frames += info.frames;
        }
        rl_libero_replayer_free(p);
    }
    if (!rc && wrote)
        rl_log_info("eval GIFs: %d episodes (%d frames) in %s in %.1f s (scene loads %.1f s)", wrote, frames, dir,
                    s_now() - t0, load_s);
    free(picks);
    return rc;
}
